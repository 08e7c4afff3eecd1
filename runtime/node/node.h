// A node: the process `spotlight join` runs on each machine. It says hello to
// the head, hosts the actors the head places on its slots, runs the tasks the
// head leases to them, and sends the results back in batches.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "node/actor_host.h"
#include "node/notice_poller.h"
#include "objects/node_object_store.h"
#include "transport/handshake_monitor.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight::node {

struct NodeOptions {
  std::string head;  // HOST:PORT of the head
  std::string market = "spot";
  int slots = 1;
  std::string node_id;  // default: host-pid
  std::chrono::milliseconds heartbeat{250};
  // How long a node with notice (SIGTERM) has before it exits.
  std::chrono::milliseconds notice_deadline{30000};
  // A cloud metadata endpoint to poll for a spot interruption notice.
  std::string notice_url;
  std::chrono::milliseconds notice_poll{1000};
  // The node's object store: its size, and the host other nodes reach its
  // object server at (default: this machine's address toward the head).
  uint64_t object_store_bytes = 2ull << 30;
  std::string object_host;
};

// Loads an actor library (dlopen); throws std::runtime_error with dlerror().
void load_actor_library(const std::string& path);

class Node {
 public:
  explicit Node(NodeOptions options);
  ~Node();
  // Serves until the head says Shutdown or request_stop() is called.
  void run();
  void request_stop() { stop_requested_.store(true); }
  // Notice that this machine is going away (SIGTERM): drain, then exit. Async-signal-safe.
  void request_drain() { notice_.store(true); }
  const std::string& id() const { return opt_.node_id; }

 private:
  void say_hello();
  void reset_session(const char* why);
  void handle(zmq::message_t& m);
  void on_place(const wire::Place& p);
  void on_unplace(const wire::Unplace& u);
  void on_tasks(wire::Tasks& t);
  void send_outgoing();
  void send(const std::string& frame);
  // The head committed our Done frames up to `seq`: their results are safe.
  void forget_acked(uint64_t seq);
  void send_done(wire::Done& batch);  // numbers it, sends it, keeps its results until acknowledged
  // A head welcomed this node anew: results it may not have are sent again.
  void resend_unacked();
  // Stops taking work, hands back what has not started, lets running tasks
  // yield; the node leaves once idle, or at the deadline.
  void begin_drain(std::chrono::milliseconds deadline, bool tell_head);
  bool drained();

  NodeOptions opt_;
  // The loop holds io_mu_ except while it sleeps; an actor thread that has a
  // result takes it then to send the result itself (Outgoing::send_or_wake).
  std::mutex io_mu_;
  zmq::socket_t dealer_;
  // A head that refuses this node's key for good ends it (check_handshakes).
  std::unique_ptr<transport::HandshakeMonitor> handshakes_;
  transport::Clock::time_point next_handshake_check_;
  void check_handshakes();
  int dealer_fd_ = -1;  // ZMQ_FD: readable when the socket has news; polled without io_mu_
  Outgoing out_;
  std::unique_ptr<objects::NodeObjectStore> objects_;  // outlives hosts_: actors read from it
  std::unique_ptr<TaskCaller> caller_;                 // outlives hosts_ too
  std::unique_ptr<TaskServices> services_;             // what hosts_ lend their tasks
  std::map<uint64_t, std::unique_ptr<ActorHost>> hosts_;
  // Unplaced hosts whose running task has yet to end (their pool was removed).
  std::vector<std::unique_ptr<ActorHost>> retiring_;
  bool welcomed_ = false;
  uint64_t boot_ = 0;
  // Done frames sent and not yet acknowledged as committed, oldest first
  // (under io_mu_): a head that dies before its commit loses them, and the
  // next one gets them again instead of running their tasks again.
  std::deque<std::pair<uint64_t, std::vector<wire::Completion>>> unacked_;
  uint64_t done_seq_ = 0;
  uint64_t max_frame_ = transport::kDefaultMaxFrame;  // the head's limit, from Welcome
  uint32_t session_;  // random start: a restarted node with the same id is a new session
  std::chrono::milliseconds head_liveness_{3000};
  transport::Clock::time_point last_heard_;
  transport::Clock::time_point last_hello_;
  transport::Clock::time_point last_sent_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> notice_{false};
  std::atomic<int64_t> notice_left_ms_{-1};  // from the notice poller, when it says
  std::unique_ptr<NoticePoller> poller_;
  std::atomic<bool> draining_{false};
  transport::Clock::time_point drain_deadline_;
  bool shutdown_ = false;
};

}  // namespace spotlight::node

// The driver side of the runtime: one DEALER to the head, used by whichever
// thread holds io_mu_. An I/O thread serves it whenever nobody else does; a
// caller that waits for a result takes the socket itself while it can (the
// leader/follower pattern), and so does one that submits the only call in
// flight. A synchronous call then never wakes the I/O thread on its path:
// waking a sleeping thread costs about 50 us on the project's 2-vCPU VM.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "objects/node_object_store.h"
#include "spotlight/future.h"
#include "spotlight/options.h"
#include "transport/handshake_monitor.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight::detail {

class CallOrigin;

class Client final : public Waiter, public std::enable_shared_from_this<Client> {
 public:
  // `node_id`: set by a node for its tasks' calls (HelloClient::node_id).
  Client(std::string address, ConnectOptions options, std::string node_id = {});
  ~Client();

  // With `origin`, the call is that running task's own (a child id, wire/child_ids.h).
  std::shared_ptr<FutureState> submit(const std::string& mailbox, const std::string& method,
                                      std::string args, const CallOptions& options,
                                      CallOrigin* origin = nullptr);
  // Awaits the result of another client's call (Runtime::fetch).
  std::shared_ptr<FutureState> fetch(uint64_t task_id);
  // Sends a control request and waits for its reply frame; throws ConnectionError
  // on timeout and RejectedError when the head answers with an error.
  // With `after_calls`, the request leaves only once welcomed and after the
  // calls submitted before it (a Sync).
  std::string request(wire::MsgType type, std::string packed_body,
                      std::chrono::milliseconds timeout, bool after_calls = false);
  const std::string& address() const { return address_; }
  size_t pending() const;
  // This driver's object store (Runtime::objects()), made on first use.
  ObjectStore& objects();
  // Waits for a call's state, reading the socket on this thread while no
  // other thread does.
  bool wait(FutureState& s, std::chrono::steady_clock::time_point deadline) override;

 private:
  struct Pending {
    std::shared_ptr<FutureState> state;
    wire::Call call;       // only the id when fetched
    bool fetched = false;  // goes out in a Fetch, not a Calls frame
  };
  struct Control {
    std::shared_ptr<FutureState> state;
    std::string frame;
    bool after_calls = false;
  };

  // With mu_ held: waits while pending_ is full; false (and `state` resolved
  // with the reason) when the client may not wait, or its head refused it.
  bool wait_for_room(std::unique_lock<std::mutex>& l, FutureState& state);
  void io_loop();
  // Resolves every pending call with a connection error.
  // Fails every call waiting for a result with a ConnectionError saying `why`.
  void fail_pending(const std::string& why = "the client closed before the result came");
  // Reads the handshake monitor (every 20 ms at most):
  // a head that refuses this client's key fails its calls and its connect.
  void check_handshakes(transport::Clock::time_point now);
  // Only waiting threads still hold this client.
  bool abandoned() const;
  // Before a caller lets go of the socket.
  void leave_socket();
  // With io_mu_ held: takes every waiting frame, sends what is queued, says
  // hello or heartbeats as due, and leaves the socket with nothing to read, so
  // that its file descriptor signals the next arrival. Returns how long the
  // socket may then be left alone.
  std::chrono::milliseconds pump();
  void say_hello();
  void on_frame(zmq::message_t& m);
  void send_queued();
  void resend_everything();
  std::vector<uint64_t> sorted_pending_ids() const;  // with mu_ held
  bool is_welcomed();  // takes mu_

  std::string address_;
  ConnectOptions opt_;
  std::string id_;
  std::string node_id_;

  // Shared with callers.
  mutable std::mutex mu_;
  std::condition_variable room_;  // signalled when pending_ shrinks
  // Hashed: a pipelined caller keeps ~10^4 calls here, and an ordered map's
  // lookups (three per call) were most of the I/O thread's time. Ids grow with
  // submission, so whoever needs submission order sorts them (sorted_pending_ids).
  std::unordered_map<uint64_t, Pending> pending_;
  std::vector<uint64_t> outq_;
  std::unordered_map<uint64_t, Control> control_;
  std::vector<uint64_t> control_outq_;
  uint64_t next_seq_ = 0;
  bool refused_logged_ = false;  // a refused hello was logged (I/O thread)
  uint64_t next_rid_ = 0;
  uint32_t num_ = 0;
  uint64_t max_frame_ = transport::kDefaultMaxFrame;  // the head's limit, from Welcome
  bool welcomed_ = false;
  std::shared_ptr<FutureState> welcome_;

  // Whoever holds io_mu_ (the I/O thread or a waiting caller).
  std::mutex io_mu_;
  zmq::socket_t dealer_;
  std::unique_ptr<transport::HandshakeMonitor> handshakes_;  // read under io_mu_, like dealer_
  transport::Clock::time_point next_handshake_check_;
  std::string refused_;  // under mu_: why the head refused this client for good, once it has
  int dealer_fd_ = -1;  // ZMQ_FD: readable when the socket has news; polled without io_mu_
  transport::Waker waker_;
  std::vector<uint64_t> acks_;  // results received, not yet acknowledged to the head
  transport::Clock::time_point first_ack_;  // when acks_ last became non-empty
  uint64_t boot_ = 0;
  transport::Clock::time_point last_heard_, last_sent_, last_hello_;
  std::atomic<bool> stop_{false};
  std::atomic<long> waiting_{0};  // threads in wait()
  // Runtime::objects(), made on first use; whoever handles a Welcome (a head
  // that welcomes this client anew) announces its copies under the same lock.
  std::mutex objects_mu_;
  std::unique_ptr<objects::NodeObjectStore> objects_;
  std::thread io_;
};

// One-shot status and stop requests under cluster key `key` (hex, "none", or
// empty for the process's key): what a local cluster, whose key may not be
// the process's, uses.
ClusterStatus cluster_status(const std::string& address, const std::string& key,
                             std::chrono::milliseconds timeout = std::chrono::seconds(5));
void stop_cluster(const std::string& address, const std::string& key,
                  std::chrono::milliseconds timeout);

}  // namespace spotlight::detail

// ZeroMQ plumbing shared by head, node and client: endpoints, socket set-up,
// a wake-up file descriptor, and multipart receive helpers.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "transport/cluster_key.h"

namespace spotlight::transport {

// The process's one ZeroMQ context (one I/O thread).
zmq::context_t& context();
// For a process about to exit, once its sockets are closed: waits until their
// last messages are sent (up to each socket's linger), then ends the context.
void terminate_context();

// "host:port", "tcp://host:port" or "ipc://path" -> a ZeroMQ endpoint.
std::string endpoint(const std::string& address);

// Default frame size limit: 64 MiB.
inline constexpr size_t kDefaultMaxFrame = 64u << 20;

// A ROUTER bound to `endpoint` (port 0 picks a free port); returns the port bound.
// With a secure `key` it is a CURVE server that admits only peers holding the
// same key (cluster_key.h). With `watch`, a monitor of its handshakes is made
// there before it binds.
class HandshakeMonitor;
zmq::socket_t make_router(const std::string& bind_endpoint, size_t max_frame, int* port_out,
                          const ClusterKey& key,
                          std::unique_ptr<HandshakeMonitor>* watch = nullptr);
// A DEALER with a fixed routing id, so the head recognises it across reconnects.
// With `immediate`, sends fail while no connection is up (the sender keeps the
// message and says hello again); without, they queue until one is. With a
// secure `key` it is a CURVE client of a server with that key. With `watch`,
// a monitor of its handshakes is made there before it connects (a refusal
// that ends the connection for good would otherwise go unseen).
zmq::socket_t make_dealer(const std::string& connect_endpoint, const std::string& routing_id,
                          const ClusterKey& key, bool immediate = true,
                          std::unique_ptr<HandshakeMonitor>* watch = nullptr);

// CURVE on a socket not yet bound or connected (what make_router and
// make_dealer do with a secure key; nothing without one). A server admits
// only peers with the key through the ZAP handler of its context, which
// make_router starts for context().
void curve_server(zmq::socket_t& s, const ClusterKey& key);
void curve_client(zmq::socket_t& s, const ClusterKey& key);

// An eventfd another thread can poke to wake a zmq_poll loop.
class Waker {
 public:
  Waker();
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  void notify();
  void drain();
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Non-blocking receive of one message from a DEALER; nullopt when none is waiting.
std::optional<zmq::message_t> try_recv(zmq::socket_t& s);

// Non-blocking receive of [identity, payload] from a ROUTER. Extra frames are
// drained and reported through `extra_frames`.
struct RoutedMessage {
  std::string peer;
  zmq::message_t payload;
  size_t extra_frames = 0;
};
std::optional<RoutedMessage> try_recv_routed(zmq::socket_t& s);

// Sends to a ROUTER peer; false when the peer is gone (ROUTER_MANDATORY).
bool send_routed(zmq::socket_t& s, const std::string& peer, const std::string& payload);
// Sends on a DEALER; false when the message could not be queued.
bool send(zmq::socket_t& s, const std::string& payload);

using Clock = std::chrono::steady_clock;
inline int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}
// How long a peer's loop may sleep before its next heartbeat is due, given
// when it last sent anything. Waking a whole period after the last wake-up
// instead, as every frame received restarts the wait, left gaps of up to two
// periods (NodeHeartbeat.KeepsItsPeriodWhenTheHeadTalksJustBeforeEachBeat).
inline std::chrono::milliseconds until_heartbeat(Clock::time_point last_sent,
                                                 std::chrono::milliseconds period) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(last_sent + period - Clock::now());
  return std::clamp(left, std::chrono::milliseconds(0), period);
}

}  // namespace spotlight::transport

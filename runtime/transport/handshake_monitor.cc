#include "transport/handshake_monitor.h"

#include <atomic>
#include <bit>
#include <cstring>

#include "transport/cluster_key.h"
#include "transport/socket.h"

namespace spotlight::transport {

namespace {
std::string describe(uint16_t event, uint32_t value) {
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return "the peer's key is not this cluster's (refused, ZAP status " + std::to_string(value) +
             ")";
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
        return "one side has a cluster key and the other has none (a head started with "
               "--insecure takes no key; any other needs one)";
      }
      if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) return "the cluster keys differ";
      return "the handshake broke the protocol (error " + std::to_string(value) + ")";
    default:  // ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
      return "the peer closed the connection during the handshake (the cluster keys differ, or "
             "one side has none)";
  }
}
}  // namespace

HandshakeMonitor::HandshakeMonitor(zmq::socket_t& watched)
    : watched_(watched.handle()), events_(context(), zmq::socket_type::pair) {
  static std::atomic<uint64_t> next{0};
  std::string endpoint = "inproc://handshakes-" + std::to_string(++next);
  int mask = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(watched.handle(), endpoint.c_str(), mask) != 0) throw zmq::error_t();
  events_.set(zmq::sockopt::linger, 0);
  events_.set(zmq::sockopt::rcvhwm, 0);  // a burst of refusals must not reach the blocking send
  events_.connect(endpoint);
}

HandshakeMonitor::~HandshakeMonitor() {
  stop();
}

void HandshakeMonitor::stop() {
  if (!watched_) return;
  zmq_socket_monitor(watched_, nullptr, 0);
  watched_ = nullptr;
}

std::string HandshakeMonitor::refused_by(const std::string& server) const {
  std::string times = in_a_row_ == 1 ? "" : " " + std::to_string(in_a_row_) + " times";
  return server + " refused the handshake" + times + ": " + last_failure_ +
         ". The cluster key is the one `spotlight head` printed (--key, or $" + kKeyVariable + ")";
}

uint64_t HandshakeMonitor::drain() {
  const uint64_t before = failed_;
  for (;;) {
    zmq::message_t head, where;
    if (!events_.recv(head, zmq::recv_flags::dontwait)) break;
    if (head.more()) (void)events_.recv(where, zmq::recv_flags::none);
    if (head.size() < 6) continue;
    uint16_t event;
    uint32_t value;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, 4);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      in_a_row_ = 0;
    } else {
      ++failed_;
      ++in_a_row_;
      definite_ = event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
      last_failure_ = describe(event, value);
    }
  }
  log_due_ = std::bit_width(failed_) > std::bit_width(before);
  return failed_ - before;
}

}  // namespace spotlight::transport

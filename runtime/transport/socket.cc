#include "transport/socket.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "transport/handshake_monitor.h"
#include "transport/zap.h"

namespace spotlight::transport {

namespace {
zmq::context_t* g_context = nullptr;
}

zmq::context_t& context() {
  // Never destroyed implicitly: static destruction order must not close it
  // under live sockets. Processes that exit on purpose call terminate_context().
  static zmq::context_t* ctx = g_context = new zmq::context_t(1);
  return *ctx;
}

void terminate_context() {
  if (g_context) g_context->close();
}

std::string endpoint(const std::string& address) {
  if (address.rfind("tcp://", 0) == 0 || address.rfind("ipc://", 0) == 0 ||
      address.rfind("inproc://", 0) == 0) {
    return address;
  }
  if (address.find(':') == std::string::npos) {
    throw std::invalid_argument("address '" + address + "' is not HOST:PORT");
  }
  return "tcp://" + address;
}

zmq::socket_t make_router(const std::string& bind_endpoint, size_t max_frame, int* port_out,
                          const ClusterKey& key, std::unique_ptr<HandshakeMonitor>* watch) {
  zmq::socket_t s(context(), zmq::socket_type::router);
  if (key.secure()) start_zap_handler();
  curve_server(s, key);
  s.set(zmq::sockopt::router_mandatory, 1);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 0);
  s.set(zmq::sockopt::rcvhwm, 0);
  // Hard cap against memory exhaustion; frames between max_frame and the cap are
  // received and answered with a clear "oversized" error.
  s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_frame) * 4 + 4096);
  if (watch) *watch = std::make_unique<HandshakeMonitor>(s);
  s.bind(bind_endpoint);
  if (port_out) {
    std::string last = s.get(zmq::sockopt::last_endpoint);
    auto colon = last.rfind(':');
    *port_out = colon == std::string::npos ? 0 : std::stoi(last.substr(colon + 1));
  }
  return s;
}

zmq::socket_t make_dealer(const std::string& connect_endpoint, const std::string& routing_id,
                          const ClusterKey& key, bool immediate,
                          std::unique_ptr<HandshakeMonitor>* watch) {
  zmq::socket_t s(context(), zmq::socket_type::dealer);
  curve_client(s, key);
  s.set(zmq::sockopt::routing_id, routing_id);
  s.set(zmq::sockopt::linger, 200);
  s.set(zmq::sockopt::sndhwm, 0);
  s.set(zmq::sockopt::rcvhwm, 0);
  // Queue only on live connections: while the head is away sends fail fast,
  // and the caller keeps the message until it has said hello again.
  s.set(zmq::sockopt::immediate, immediate ? 1 : 0);
  s.set(zmq::sockopt::reconnect_ivl, 50);
  s.set(zmq::sockopt::reconnect_ivl_max, 500);
  if (watch) *watch = std::make_unique<HandshakeMonitor>(s);
  s.connect(connect_endpoint);
  return s;
}

void curve_server(zmq::socket_t& s, const ClusterKey& key) {
  if (!key.secure()) return;
  s.set(zmq::sockopt::curve_server, 1);
  s.set(zmq::sockopt::curve_secretkey, zmq::buffer(key.secret()));
  // The ZAP handler admits the peers whose public key is the domain's.
  s.set(zmq::sockopt::zap_domain, to_hex(key.public_key()));
}

void curve_client(zmq::socket_t& s, const ClusterKey& key) {
  if (!key.secure()) return;
  s.set(zmq::sockopt::curve_serverkey, zmq::buffer(key.public_key()));
  s.set(zmq::sockopt::curve_publickey, zmq::buffer(key.public_key()));
  s.set(zmq::sockopt::curve_secretkey, zmq::buffer(key.secret()));
}

Waker::Waker() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::runtime_error("eventfd failed");
}
Waker::~Waker() { close(fd_); }
void Waker::notify() {
  uint64_t one = 1;
  ssize_t r = write(fd_, &one, sizeof one);
  (void)r;
}
void Waker::drain() {
  uint64_t v;
  ssize_t r = read(fd_, &v, sizeof v);
  (void)r;
}

std::optional<zmq::message_t> try_recv(zmq::socket_t& s) {
  zmq::message_t m;
  if (!s.recv(m, zmq::recv_flags::dontwait)) return std::nullopt;
  while (m.more()) {  // a DEALER peer only ever sends single frames; drop extras
    zmq::message_t extra;
    if (!s.recv(extra, zmq::recv_flags::dontwait)) break;
    if (!extra.more()) break;
  }
  return m;
}

std::optional<RoutedMessage> try_recv_routed(zmq::socket_t& s) {
  zmq::message_t id;
  if (!s.recv(id, zmq::recv_flags::dontwait)) return std::nullopt;
  RoutedMessage r;
  r.peer.assign(static_cast<const char*>(id.data()), id.size());
  if (!id.more()) return r;  // empty payload
  (void)s.recv(r.payload, zmq::recv_flags::none);
  bool more = r.payload.more();
  while (more) {
    zmq::message_t extra;
    (void)s.recv(extra, zmq::recv_flags::none);
    more = extra.more();
    ++r.extra_frames;
  }
  return r;
}

bool send_routed(zmq::socket_t& s, const std::string& peer, const std::string& payload) {
  try {
    if (!s.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    return s.send(zmq::buffer(payload), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;
    throw;
  }
}

bool send(zmq::socket_t& s, const std::string& payload) {
  return s.send(zmq::buffer(payload), zmq::send_flags::dontwait).has_value();
}

}  // namespace spotlight::transport

#include "transport/zap.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <thread>
#include <vector>

#include "transport/cluster_key.h"
#include "transport/socket.h"

namespace spotlight::transport {

namespace {
std::string text(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

// One request (ZAP 1.0, RFC 27): version, request id, domain, address,
// identity, mechanism, credentials...; the reply: version, request id,
// status code, status text, user id, metadata.
void serve(zmq::socket_t& s) {
  for (;;) {
    std::vector<zmq::message_t> req;
    try {
      do {
        req.emplace_back();
        if (!s.recv(req.back(), zmq::recv_flags::none)) return;
      } while (req.back().more());
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP handler: {}", e.what());
      continue;
    }
    if (req.size() < 2) continue;  // libzmq never sends one; nothing to answer
    bool ok = req.size() >= 7 && text(req[0]) == "1.0" && text(req[5]) == "CURVE" &&
              req[6].size() == 32 && to_hex(text(req[6])) == text(req[2]);
    const char* code = ok ? "200" : "400";
    const char* why = ok ? "OK" : "not a member of this cluster";
    try {
      s.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
      s.send(req[1], zmq::send_flags::sndmore);
      s.send(zmq::buffer(code, 3), zmq::send_flags::sndmore);
      s.send(zmq::buffer(std::string(why)), zmq::send_flags::sndmore);
      s.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
      s.send(zmq::str_buffer(""), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
}
}  // namespace

void start_zap_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Bound here, before any server socket exists, so that no handshake can
    // find the handler missing (libzmq would then admit everyone).
    auto s = std::make_shared<zmq::socket_t>(context(), zmq::socket_type::rep);
    s->set(zmq::sockopt::linger, 0);
    s->bind("inproc://zeromq.zap.01");
    // Detached: it must not outlive the context, and it does not: it returns
    // when terminate_context() ends the context, and a process that exits
    // without that takes it along.
    std::thread([s] {
      serve(*s);
      s->close();
    }).detach();
  });
}

}  // namespace spotlight::transport

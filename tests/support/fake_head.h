// A ROUTER that plays the head for one real node (`spotlight join`), for
// tests that send a node what a real head never would.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "transport/cluster_key.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight::testing {

class FakeHead {
 public:
  // Under this process's cluster key, made now if need be: the node it
  // spawns gets the same one (key_env()).
  FakeHead()
      : router_(transport::make_router("tcp://127.0.0.1:0", 1 << 20, &port_,
                                       transport::process_key_or_new())) {}
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // The next frame from any peer: (routing id, payload), or nullopt after `timeout`.
  std::optional<std::pair<std::string, std::string>> recv(std::chrono::milliseconds timeout) {
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, timeout);
    auto m = transport::try_recv_routed(router_);
    if (!m) return std::nullopt;
    return std::make_pair(
        m->peer, std::string(static_cast<const char*>(m->payload.data()), m->payload.size()));
  }
  // Waits up to 10 s for a node's hello; remembers and returns its routing id.
  std::string wait_for_hello() {
    for (int i = 0; i < 200 && node_.empty(); ++i) {
      auto m = recv(std::chrono::milliseconds(50));
      if (m && wire::decode(m->second).type == wire::MsgType::kHelloNode) node_ = m->first;
    }
    EXPECT_FALSE(node_.empty()) << "the node never said hello";
    return node_;
  }
  // To the node that said hello.
  void send(const std::string& frame) { transport::send_routed(router_, node_, frame); }

 private:
  int port_ = 0;
  zmq::socket_t router_;
  std::string node_;
};

}  // namespace spotlight::testing

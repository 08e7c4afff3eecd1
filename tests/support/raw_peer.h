// A raw DEALER that speaks to the head without the client library: for tests
// that send what the library never would.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight::testing {

class RawPeer {
 public:
  explicit RawPeer(const std::string& address)
      : s_(transport::make_dealer(transport::endpoint(address), "raw-" + std::to_string(++n_),
                                  transport::process_key(), false)) {}
  void send(const std::string& frame) { transport::send(s_, frame); }
  // Waits for room rather than drop the frame when the pipe is full.
  void send_all(const std::string& frame) { s_.send(zmq::buffer(frame), zmq::send_flags::none); }
  // The next reply that is not a heartbeat.
  std::optional<wire::Envelope> reply(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    zmq::pollitem_t items[] = {{s_.handle(), 0, ZMQ_POLLIN, 0}};
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::poll(items, 1, std::chrono::milliseconds(50));
      while (auto m = transport::try_recv(s_)) {
        frames_.emplace_back(static_cast<const char*>(m->data()), m->size());
        wire::Envelope env = wire::decode(frames_.back());
        if (env.type != wire::MsgType::kHeartbeat) return env;
      }
    }
    return std::nullopt;
  }
  // Reads whatever came back, without waiting (a peer that sends much must
  // read too); frames that do not decode are kept and skipped.
  void drain() {
    while (auto m = transport::try_recv(s_))
      frames_.emplace_back(static_cast<const char*>(m->data()), m->size());
    while (frames_.size() > 64) frames_.pop_front();
  }
  // Says hello as client `id` (a node's connection for its tasks' calls with
  // `node_id`); returns the client number the head gave it.
  uint64_t hello_client(const std::string& id, const std::string& node_id = {}) {
    send(wire::encode(wire::HelloClient{id, {}, node_id}));
    auto welcome = reply();
    EXPECT_TRUE(welcome && welcome->type == wire::MsgType::kWelcome) << "no welcome";
    return welcome && welcome->type == wire::MsgType::kWelcome
               ? welcome->body<wire::Welcome>().client_num
               : 0;
  }
  wire::ErrorCode error_for(const std::string& frame) {
    send(frame);
    auto env = reply();
    EXPECT_TRUE(env.has_value()) << "no reply";
    if (!env) return wire::ErrorCode::kBadRequest;
    EXPECT_EQ(env->type, wire::MsgType::kError);
    auto e = env->body<wire::Error>();
    EXPECT_FALSE(e.message.empty());
    return static_cast<wire::ErrorCode>(e.code);
  }

 private:
  static inline int n_ = 0;
  zmq::socket_t s_;
  std::deque<std::string> frames_;
};

}  // namespace spotlight::testing

// head_kv(): one DEALER to the head, one request at a time (a mutex), replies
// matched by request id.
#include "spotlight/head_kv.h"

#include <mutex>

#include "common/ids.h"
#include "spotlight/codec.h"
#include "spotlight/errors.h"
#include "transport/socket.h"
#include "wire/envelope.h"
#include "wire/messages.h"

namespace spotlight {
namespace {

class HeadKv : public collective::KvStore {
 public:
  HeadKv(const std::string& address, std::chrono::milliseconds timeout)
      : address_(address),
        timeout_(timeout),
        // Not immediate: a request waits in the socket until the connection is up.
        socket_(transport::make_dealer(transport::endpoint(address), "kv-" + common::random_id(), false)) {
    socket_.set(zmq::sockopt::linger, 0);
  }

  void set(const std::string& key, const std::string& value) override {
    auto env = request(wire::MsgType::kKvSet, pack(wire::KvSet{key, value}), timeout_);
    if (env.type != wire::MsgType::kOk)
      throw RejectedError(std::string("KvSet answered with ") + wire::to_string(env.type));
  }

  std::optional<std::string> wait(const std::string& key, std::chrono::milliseconds timeout) override {
    auto env = request(wire::MsgType::kKvGet, pack(wire::KvGet{key, timeout.count()}), timeout + timeout_);
    if (env.type != wire::MsgType::kKvValue)
      throw RejectedError(std::string("KvGet answered with ") + wire::to_string(env.type));
    auto v = env.body<wire::KvValue>();
    if (!v.found) return std::nullopt;
    return std::move(v.value);
  }

 private:
  wire::Envelope request(wire::MsgType type, const std::string& body, std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu_);
    const uint64_t rid = ++last_rid_;
    transport::send(socket_, wire::encode_raw(type, rid, body));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::poll(items, 1,
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
      while (auto m = transport::try_recv(socket_)) {
        wire::Envelope env = wire::decode(std::string_view(static_cast<const char*>(m->data()), m->size()));
        if (env.request_id != rid) continue;  // a late answer to an abandoned request
        if (env.type == wire::MsgType::kError) throw RejectedError(env.body<wire::Error>().message);
        return env;
      }
    }
    throw ConnectionError("no answer from the head's KV at " + address_ + " within " +
                          std::to_string(timeout.count()) + " ms");
  }

  std::mutex mu_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  zmq::socket_t socket_;
  uint64_t last_rid_ = 0;
};

}  // namespace

std::shared_ptr<collective::KvStore> head_kv(const std::string& address, std::chrono::milliseconds request_timeout) {
  return std::make_shared<HeadKv>(address, request_timeout);
}

}  // namespace spotlight

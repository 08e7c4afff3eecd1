// head_kv(): the head's KV through a HeadRequester.
#include "spotlight/head_kv.h"

#include "client/head_requester.h"
#include "spotlight/codec.h"
#include "spotlight/errors.h"
#include "wire/messages.h"

namespace spotlight {
namespace {

class HeadKv : public collective::KvStore {
 public:
  HeadKv(const std::string& address, std::chrono::milliseconds timeout)
      : timeout_(timeout), head_(address, "kv-") {}

  void set(const std::string& key, const std::string& value) override {
    auto env = head_.request(wire::MsgType::kKvSet, pack(wire::KvSet{key, value}), timeout_, "KV");
    if (env.type != wire::MsgType::kOk)
      throw RejectedError(std::string("KvSet answered with ") + wire::to_string(env.type));
  }

  std::optional<std::string> wait(const std::string& key, std::chrono::milliseconds timeout) override {
    auto env = head_.request(wire::MsgType::kKvGet, pack(wire::KvGet{key, timeout.count()}), timeout + timeout_, "KV");
    if (env.type != wire::MsgType::kKvValue)
      throw RejectedError(std::string("KvGet answered with ") + wire::to_string(env.type));
    auto v = env.body<wire::KvValue>();
    if (!v.found) return std::nullopt;
    return std::move(v.value);
  }

  bool erase(const std::string& key) override {
    auto env = head_.request(wire::MsgType::kKvDelete, pack(wire::KvDelete{key}), timeout_, "KV");
    if (env.type != wire::MsgType::kKvValue)
      throw RejectedError(std::string("KvDelete answered with ") + wire::to_string(env.type));
    return env.body<wire::KvValue>().found;
  }

 private:
  std::chrono::milliseconds timeout_;
  client::HeadRequester head_;
};

}  // namespace

std::shared_ptr<collective::KvStore> head_kv(const std::string& address, std::chrono::milliseconds request_timeout) {
  return std::make_shared<HeadKv>(address, request_timeout);
}

}  // namespace spotlight

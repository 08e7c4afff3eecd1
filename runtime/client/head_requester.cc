#include "client/head_requester.h"

#include "common/ids.h"
#include "spotlight/errors.h"

namespace spotlight::client {

HeadRequester::HeadRequester(std::string address, const std::string& id_prefix,
                             const transport::ClusterKey& key)
    : address_(std::move(address)),
      // Not immediate: a request waits in the socket until the connection is up.
      socket_(transport::make_dealer(transport::endpoint(address_), id_prefix + common::random_id(),
                                     key, false)) {
  socket_.set(zmq::sockopt::linger, 0);
}

void HeadRequester::send(wire::MsgType type, const std::string& body) {
  std::lock_guard lock(mu_);
  transport::send(socket_, wire::encode_raw(type, ++last_rid_, body));
}

wire::Envelope HeadRequester::request(wire::MsgType type, const std::string& body,
                                      std::chrono::milliseconds timeout, const char* what) {
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
      if (env.request_id != rid) continue;  // a late answer to an abandoned or unanswered request
      if (env.type == wire::MsgType::kError) throw RejectedError(env.body<wire::Error>().message);
      return env;
    }
  }
  throw ConnectionError(std::string("no answer from the head's ") + what + " at " + address_ + " within " +
                        std::to_string(timeout.count()) + " ms");
}

}  // namespace spotlight::client

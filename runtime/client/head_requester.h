// A request/reply channel to the head that needs no hello: one DEALER, one
// request at a time (a mutex), replies matched by request id. The head's KV
// and the object directory are served this way, from any process.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "transport/cluster_key.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight::client {

class HeadRequester {
 public:
  HeadRequester(std::string address, const std::string& id_prefix,
                const transport::ClusterKey& key = transport::process_key());
  // Sends and waits for the answer; an Error answer throws RejectedError, no
  // answer within `timeout` throws ConnectionError naming `what`.
  wire::Envelope request(wire::MsgType type, const std::string& body, std::chrono::milliseconds timeout,
                         const char* what);
  // Sends without waiting (the answer, if any, is skipped by later requests).
  void send(wire::MsgType type, const std::string& body);
  const std::string& address() const { return address_; }

 private:
  std::mutex mu_;
  std::string address_;
  zmq::socket_t socket_;
  uint64_t last_rid_ = 0;
};

}  // namespace spotlight::client

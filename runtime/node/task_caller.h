// The node's connection to the head for the calls its running tasks make
// (TaskContext::runtime()): one client for all its slots, connected when the
// first task asks for it, so that nodes whose actors call nobody pay nothing.
#pragma once

#include <memory>
#include <mutex>
#include <string>

namespace spotlight::detail {
class Client;
}

namespace spotlight::node {

class TaskCaller {
 public:
  TaskCaller(std::string head_address, std::string node_id)
      : address_(std::move(head_address)), node_id_(std::move(node_id)) {}
  // Throws ConnectionError when the head does not answer.
  std::shared_ptr<detail::Client> client();

 private:
  const std::string address_;
  const std::string node_id_;  // the head checks that a task's calls come from its node
  std::mutex mu_;
  std::shared_ptr<detail::Client> client_;
};

}  // namespace spotlight::node

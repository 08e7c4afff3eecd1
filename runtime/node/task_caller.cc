#include "node/task_caller.h"

#include "client/client.h"

namespace spotlight::node {

std::shared_ptr<detail::Client> TaskCaller::client() {
  std::lock_guard<std::mutex> l(mu_);
  if (!client_) client_ = std::make_shared<detail::Client>(address_, ConnectOptions{}, node_id_);
  return client_;
}

}  // namespace spotlight::node

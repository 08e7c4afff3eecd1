// The head's HTTP endpoint (Boost.Beast, its own thread): GET / (a status
// page for people, head/dashboard.h), /status.json, /metrics in Prometheus's
// text format, and /healthz. Beast stays out of this header.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace spotlight::head {

class MetricsServer {
 public:
  // The head's ClusterStatus, packed (msgpack) by its loop, or nullopt when
  // the loop did not answer in time. Each request renders its own format
  // from it on the server's thread.
  using Source = std::function<std::optional<std::string>()>;
  // Listens on host:port (0: a free port); throws std::runtime_error when it
  // cannot. Requests are served on the server's thread, one at a time.
  MetricsServer(const std::string& host, int port, Source status);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spotlight::head

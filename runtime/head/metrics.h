// The head's metrics in Prometheus's text format (version 0.0.4), and the
// hand-over that lets another thread have them: the HTTP server asks, the
// head's loop renders them between two turns (it alone touches its state).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "spotlight/status.h"

namespace spotlight::head {

// Nodes, pools, SP groups and every head counter (as `spotlight_<name>_total`).
std::string prometheus_text(const ClusterStatus& s);

// A label value as Prometheus's text format quotes it: \ " and newline escaped.
std::string prometheus_label(const std::string& value);

// One rendering at a time, asked for by any thread and made on the head's
// (the head hands over its status packed; the server renders each format).
class MetricsExchange {
 public:
  // Waits up to `timeout` for the head's loop to render; nullopt if it did not.
  std::optional<std::string> request(std::chrono::milliseconds timeout);
  // Called by the head's loop after every turn: renders if someone waits.
  void serve(const std::function<std::string()>& render);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  // Requests made: read without the lock by every turn of the head's loop.
  std::atomic<uint64_t> asked_{0};
  uint64_t served_ = 0;  // the request count the last rendering answered (written by serve())
  std::string text_;
};

}  // namespace spotlight::head

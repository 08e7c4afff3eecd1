// Polls a cloud metadata endpoint for a spot interruption notice, the way
// AWS (`/latest/meta-data/spot/instance-action`: 404 until a notice, then 200
// with {"action": ..., "time": "2026-11-30T01:40:00Z"}) and GCP
// (`/computeMetadata/v1/instance/preempted`: "FALSE" until "TRUE") announce
// one. On a notice it calls `on_notice` once, with the time left when the
// endpoint says (AWS "time"), else with nullopt.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace spotlight::node {

struct NoticeUrl {
  std::string host;
  std::string port = "80";
  std::string target = "/";
};
// Parses "http://HOST[:PORT]/PATH"; throws std::invalid_argument otherwise.
NoticeUrl parse_notice_url(const std::string& url);

// Reads a notice from one HTTP answer: nullopt when there is none; else the
// milliseconds left (0 when the answer names no time). Exposed for tests.
std::optional<int64_t> read_notice(int status, const std::string& body,
                                   std::chrono::system_clock::time_point now);

class NoticePoller {
 public:
  using Callback = std::function<void(std::optional<std::chrono::milliseconds> left)>;
  NoticePoller(const std::string& url, std::chrono::milliseconds interval, Callback on_notice);
  ~NoticePoller();

 private:
  void loop();
  NoticeUrl url_;
  std::chrono::milliseconds interval_;
  Callback on_notice_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace spotlight::node

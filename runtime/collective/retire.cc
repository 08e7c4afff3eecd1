// collective::retire: one background thread per process destroys retired
// communicators in order; it finishes its queue when the process exits.
#include <sys/resource.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "spotlight/collective.h"

namespace spotlight::collective {
namespace {

class Reaper {
 public:
  ~Reaper() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void add(std::unique_ptr<Communicator> c) {
    std::lock_guard l(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    queue_.push_back(std::move(c));
    cv_.notify_one();
  }

 private:
  void loop() {
    // Lowest priority: the re-forming group's own work comes first.
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
    std::unique_lock l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      auto c = std::move(queue_.front());
      queue_.pop_front();
      l.unlock();
      c.reset();
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Communicator>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

void retire(std::unique_ptr<Communicator> comm) {
  static Reaper reaper;
  if (comm) reaper.add(std::move(comm));
}

}  // namespace spotlight::collective

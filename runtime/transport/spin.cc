#include "transport/spin.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>

namespace spotlight::transport {

std::optional<std::chrono::microseconds> parse_spin_us(std::string_view text) {
  int64_t us = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), us);
  if (ec != std::errc() || end != text.data() + text.size() || us < 0 || us > kMaxSpinUs) {
    return std::nullopt;
  }
  return std::chrono::microseconds(us);
}

std::chrono::microseconds spin_budget() {
  static const std::chrono::microseconds budget = [] {
    const char* text = std::getenv("SPOTLIGHT_SPIN_US");
    if (!text) return std::chrono::microseconds(0);
    auto us = parse_spin_us(text);
    if (!us) {
      spdlog::error("SPOTLIGHT_SPIN_US='{}' is not a whole number of microseconds in [0, {}]: not spinning",
                    text, kMaxSpinUs);
      return std::chrono::microseconds(0);
    }
    return *us;
  }();
  return budget;
}

int poll(zmq::pollitem_t* items, size_t n, std::chrono::milliseconds timeout) {
  auto budget = spin_budget();
  if (timeout.count() >= 0) budget = std::min<std::chrono::microseconds>(budget, timeout);
  if (budget.count() > 0) {
    auto until = std::chrono::steady_clock::now() + budget;
    do {
      if (int ready = zmq::poll(items, n, std::chrono::milliseconds(0)); ready > 0) return ready;
      sched_yield();
    } while (std::chrono::steady_clock::now() < until);
  }
  return zmq::poll(items, n, timeout);
}

}  // namespace spotlight::transport

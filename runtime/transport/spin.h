// Spin-then-block waiting: the runtime's latency mode.
//
// A synchronous call hands off between threads eight times (caller, client
// I/O, head, node, actor and back) besides ZeroMQ's own I/O threads. Waking a
// thread that sleeps costs a futex or eventfd wake-up and, when it sleeps on
// another CPU, an inter-processor interrupt; on the project's 2-vCPU VM that
// is about 50 us a hop (a bare ZeroMQ round trip runs at 9 K/s across the two
// vCPUs and at 50 K/s on one). With SPOTLIGHT_SPIN_US=N every runtime thread
// that runs out of work first polls for up to N microseconds, yielding the
// CPU between tries, before it goes to sleep: a reply that comes within N us
// finds its thread awake. The price is idle CPU, so it is off by default,
// like OMP_WAIT_POLICY=active is for OpenMP.
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>
#include <zmq.hpp>

namespace spotlight::transport {

inline constexpr int64_t kMaxSpinUs = 100'000;

// SPOTLIGHT_SPIN_US's value: a whole number of microseconds in [0, kMaxSpinUs],
// or nullopt for anything else.
std::optional<std::chrono::microseconds> parse_spin_us(std::string_view text);

// The process's spin budget, read once from SPOTLIGHT_SPIN_US (unset: 0). A
// value that does not parse is logged as an error and counts as 0.
std::chrono::microseconds spin_budget();

// zmq::poll that first polls without blocking for up to spin_budget(), but
// no longer than `timeout` (a negative timeout waits for ever).
int poll(zmq::pollitem_t* items, size_t n, std::chrono::milliseconds timeout);

// Before a condition-variable wait: re-checks `ready` with the lock released
// between tries for up to spin_budget(), never past `deadline`. Returns with
// the lock held.
template <class Ready>
void spin_until(std::unique_lock<std::mutex>& lock, Ready ready,
                std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
  auto budget = spin_budget();
  if (budget.count() == 0) return;
  auto until = std::min(std::chrono::steady_clock::now() + budget, deadline);
  while (!ready() && std::chrono::steady_clock::now() < until) {
    lock.unlock();
    sched_yield();
    lock.lock();
  }
}

}  // namespace spotlight::transport

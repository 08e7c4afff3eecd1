// Future<T>: the result of an actor call, resolved when the head forwards it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "spotlight/codec.h"
#include "spotlight/errors.h"

namespace spotlight {

namespace detail {
struct FutureState;

// Wakes a thread that waits for several futures at once (spotlight::wait).
struct ReadySignal {
  std::mutex mu;
  std::condition_variable cv;
  size_t ready = 0;  // states resolved since it was registered
};

// Something that can wait for a state by doing the I/O that resolves it on
// the waiting thread (the client, which then reads its socket itself rather
// than have its I/O thread wake the caller: two thread wake-ups fewer per
// synchronous call).
class Waiter {
 public:
  virtual ~Waiter() = default;
  // Returns the state's done flag once it is set or the deadline passes.
  virtual bool wait(FutureState& s, std::chrono::steady_clock::time_point deadline) = 0;
};

// Shared between the caller's Future and the client's I/O thread.
struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  std::string payload;  // msgpack result when ok, else the error message
  ErrorKind kind = ErrorKind::kFailed;
  std::string error_type;
  std::weak_ptr<Waiter> waiter;  // set when the call's client can pump for the caller
  uint64_t id = 0;               // the call's task id; 0 when it was refused before it got one
  std::vector<std::shared_ptr<ReadySignal>> watchers;  // told when it resolves

  void resolve(bool ok_, std::string payload_, ErrorKind kind_ = ErrorKind::kFailed,
               std::string type_ = {});
  // Blocks until done or until the deadline; returns done. Goes through the
  // waiter while it lives.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  void wait();
  // Waits on the condition variable only (spinning first in latency mode).
  bool wait_here(std::chrono::steady_clock::time_point deadline);
  bool is_done();
  // Throws the carried error when the call failed.
  const std::string& value_or_throw();
};

// Blocks until `n` of `states` are done or `deadline` passes; returns the
// indices of the done ones, in order.
std::vector<size_t> wait_some(const std::vector<FutureState*>& states, size_t n,
                              std::chrono::steady_clock::time_point deadline);
struct FutureAccess;
}  // namespace detail

template <class T>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState> s) : s_(std::move(s)) {}

  // Blocks until the result arrives; throws the actor's error as a spotlight::Error.
  T get() {
    s_->wait();
    const std::string& bytes = s_->value_or_throw();
    if constexpr (std::is_void_v<T>) {
      (void)bytes;
    } else {
      return unpack<T>(bytes);
    }
  }
  // Like get(), but throws TimeoutError after `timeout`.
  template <class Rep, class Period>
  T get(std::chrono::duration<Rep, Period> timeout) {
    if (!wait_for(timeout)) throw TimeoutError("no result within the timeout");
    return get();
  }
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) {
    return s_->wait_until(std::chrono::steady_clock::now() + timeout);
  }
  bool ready() const {
    std::lock_guard<std::mutex> l(s_->mu);
    return s_->done;
  }
  bool valid() const { return s_ != nullptr; }
  // The call's durable id. Another process can take over the call with
  // Runtime::fetch<T>(id) while its result has not been received (the
  // caller died, say). 0 when the call was refused before it got an id, or
  // for a future without a call.
  uint64_t task_id() const { return s_ ? s_->id : 0; }

 private:
  friend struct detail::FutureAccess;
  std::shared_ptr<detail::FutureState> s_;
};

namespace detail {
struct FutureAccess {
  template <class T>
  static std::vector<FutureState*> states(const std::vector<Future<T>>& futures) {
    std::vector<FutureState*> out;
    out.reserve(futures.size());
    for (const auto& f : futures) {
      if (!f.s_) throw std::invalid_argument("spotlight::wait: a future without a call");
      out.push_back(f.s_.get());
    }
    return out;
  }
};
}  // namespace detail

// Ray's `wait`: blocks until at least `n` of `futures` are ready (with a
// result or an error; n is capped at their number) or `timeout` passes, and
// returns the indices of the ready ones, in order. A trainer that gathers
// rollouts as they finish calls it in a loop on the futures still out.
template <class T, class Rep, class Period>
std::vector<size_t> wait(const std::vector<Future<T>>& futures, size_t n,
                         std::chrono::duration<Rep, Period> timeout) {
  return detail::wait_some(detail::FutureAccess::states(futures), n,
                           std::chrono::steady_clock::now() + timeout);
}
// The same, without a timeout.
template <class T>
std::vector<size_t> wait(const std::vector<Future<T>>& futures, size_t n = 1) {
  return detail::wait_some(detail::FutureAccess::states(futures), n,
                           std::chrono::steady_clock::time_point::max());
}

}  // namespace spotlight

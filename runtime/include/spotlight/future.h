// Future<T>: the result of an actor call, resolved when the head forwards it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "spotlight/codec.h"
#include "spotlight/errors.h"

namespace spotlight {

namespace detail {
// Shared between the caller's Future and the client's I/O thread.
struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  std::string payload;  // msgpack result when ok, else the error message
  ErrorKind kind = ErrorKind::kFailed;
  std::string error_type;

  void resolve(bool ok_, std::string payload_, ErrorKind kind_ = ErrorKind::kFailed,
               std::string type_ = {});
  // Blocks until done or until the deadline; returns done.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  void wait();
  // Throws the carried error when the call failed.
  const std::string& value_or_throw();
};
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

 private:
  std::shared_ptr<detail::FutureState> s_;
};

}  // namespace spotlight

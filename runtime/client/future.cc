#include "spotlight/future.h"

#include "transport/spin.h"

namespace spotlight {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kMethod: return "method";
    case ErrorKind::kRejected: return "rejected";
    case ErrorKind::kPreempted: return "preempted";
    case ErrorKind::kCrashed: return "crashed";
    case ErrorKind::kTimedOut: return "timed_out";
    case ErrorKind::kFailed: return "failed";
    case ErrorKind::kConnection: return "connection";
  }
  return "unknown";
}

void throw_error(ErrorKind kind, const std::string& type, const std::string& message) {
  switch (kind) {
    case ErrorKind::kMethod: throw MethodError(type, message);
    case ErrorKind::kRejected: throw RejectedError(message);
    case ErrorKind::kPreempted: throw PreemptedError(message);
    case ErrorKind::kCrashed: throw CrashedError(message);
    case ErrorKind::kTimedOut: throw TimeoutError(message);
    case ErrorKind::kConnection: throw ConnectionError(message);
    case ErrorKind::kFailed: break;
  }
  throw FailedError(message);
}

namespace detail {

void FutureState::resolve(bool ok_, std::string payload_, ErrorKind kind_, std::string type_) {
  {
    std::lock_guard<std::mutex> l(mu);
    if (done) return;  // a result is delivered once
    done = true;
    ok = ok_;
    payload = std::move(payload_);
    kind = kind_;
    error_type = std::move(type_);
  }
  cv.notify_all();
}

bool FutureState::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (auto w = waiter.lock()) return w->wait(*this, deadline);
  return wait_here(deadline);
}

void FutureState::wait() {
  wait_until(std::chrono::steady_clock::time_point::max());
}

bool FutureState::wait_here(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu);
  transport::spin_until(l, [&] { return done; }, deadline);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    cv.wait(l, [&] { return done; });
    return true;
  }
  return cv.wait_until(l, deadline, [&] { return done; });
}

bool FutureState::is_done() {
  std::lock_guard<std::mutex> l(mu);
  return done;
}

const std::string& FutureState::value_or_throw() {
  std::lock_guard<std::mutex> l(mu);
  if (!ok) throw_error(kind, error_type, payload);
  return payload;
}

}  // namespace detail
}  // namespace spotlight

#include "spotlight/future.h"

#include <algorithm>

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
    case ErrorKind::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* to_string(CancelOutcome o) {
  switch (o) {
    case CancelOutcome::kCancelled:
      return "cancelled";
    case CancelOutcome::kFinished:
      return "finished";
    case CancelOutcome::kNotHeld:
      return "not_held";
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
    case ErrorKind::kCancelled:
      throw CancelledError(message);
    case ErrorKind::kFailed: break;
  }
  throw FailedError(message);
}

namespace detail {

void FutureState::resolve(bool ok_, std::string payload_, ErrorKind kind_, std::string type_) {
  std::vector<std::shared_ptr<ReadySignal>> told;
  {
    std::lock_guard<std::mutex> l(mu);
    if (done) return;  // a result is delivered once
    done = true;
    ok = ok_;
    payload = std::move(payload_);
    kind = kind_;
    error_type = std::move(type_);
    told.swap(watchers);
  }
  cv.notify_all();
  for (auto& sig : told) {
    {
      std::lock_guard<std::mutex> l(sig->mu);
      ++sig->ready;
    }
    sig->cv.notify_all();
  }
}

std::vector<size_t> wait_some(const std::vector<FutureState*>& states, size_t n,
                              std::chrono::steady_clock::time_point deadline) {
  n = std::min(n, states.size());
  auto sig = std::make_shared<ReadySignal>();
  size_t done_before = 0;
  for (FutureState* s : states) {
    std::lock_guard<std::mutex> l(s->mu);
    if (s->done) {
      ++done_before;
    } else {
      s->watchers.push_back(sig);
    }
  }
  {
    // The client's I/O thread reads the results meanwhile: no caller holds its socket here.
    std::unique_lock<std::mutex> l(sig->mu);
    auto enough = [&] { return done_before + sig->ready >= n; };
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      sig->cv.wait(l, enough);
    } else {
      sig->cv.wait_until(l, deadline, enough);
    }
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < states.size(); ++i) {
    std::lock_guard<std::mutex> l(states[i]->mu);
    auto& w = states[i]->watchers;
    w.erase(std::remove(w.begin(), w.end(), sig), w.end());
    if (states[i]->done) ready.push_back(i);
  }
  return ready;
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

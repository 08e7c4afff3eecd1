// Errors a caller can tell apart. Every error that crosses the wire carries a
// kind, the exception type where one was thrown, and a message.
#pragma once

#include <stdexcept>
#include <string>

namespace spotlight {

enum class ErrorKind : int {
  kMethod = 1,      // the actor's method threw; type() names the exception
  kRejected = 2,    // the call was refused: unknown actor, unknown method, bad arguments
  kPreempted = 3,   // the actor's machine went away with notice; the task did not finish
  kCrashed = 4,     // the actor or its node died while running the task
  kTimedOut = 5,    // no result before the caller's deadline
  kFailed = 6,      // a kind this side does not know (throw_error's fallback); the runtime
                    // sends none: a call whose attempts ran out is kCrashed, saying so
  kConnection = 7,  // the runtime could not reach the head
  kCancelled = 8,   // the call was cancelled (Runtime::cancel) before it finished
};

const char* to_string(ErrorKind kind);

// What Runtime::cancel did with each call.
enum class CancelOutcome : int32_t {
  kCancelled = 1,  // it will not run (again): its future fails with CancelledError
  kFinished = 2,   // its result (or error) was stored first: its future gets that
  kNotHeld = 3,    // the head does not hold it: never accepted, or its result received or expired
};
const char* to_string(CancelOutcome o);

// Base of every error the runtime throws.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string type, const std::string& message)
      : std::runtime_error(message), kind_(kind), type_(std::move(type)) {}
  ErrorKind kind() const { return kind_; }
  // The C++ type of the exception thrown in the actor (for kMethod), else the kind's name.
  const std::string& type() const { return type_; }

 private:
  ErrorKind kind_;
  std::string type_;
};

// An exception thrown by the actor's method, carried to the caller.
struct MethodError : Error {
  MethodError(std::string type, const std::string& m) : Error(ErrorKind::kMethod, std::move(type), m) {}
};
struct RejectedError : Error {
  explicit RejectedError(const std::string& m) : Error(ErrorKind::kRejected, "rejected", m) {}
};
struct PreemptedError : Error {
  explicit PreemptedError(const std::string& m) : Error(ErrorKind::kPreempted, "preempted", m) {}
};
struct CrashedError : Error {
  explicit CrashedError(const std::string& m) : Error(ErrorKind::kCrashed, "crashed", m) {}
};
struct TimeoutError : Error {
  explicit TimeoutError(const std::string& m) : Error(ErrorKind::kTimedOut, "timed_out", m) {}
};
struct FailedError : Error {
  explicit FailedError(const std::string& m) : Error(ErrorKind::kFailed, "failed", m) {}
};
struct ConnectionError : Error {
  explicit ConnectionError(const std::string& m) : Error(ErrorKind::kConnection, "connection", m) {}
};
struct CancelledError : Error {
  explicit CancelledError(const std::string& m) : Error(ErrorKind::kCancelled, "cancelled", m) {}
};

// A value that does not decode as the expected type.
struct CodecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws the Error subclass that matches kind.
[[noreturn]] void throw_error(ErrorKind kind, const std::string& type, const std::string& message);

}  // namespace spotlight

// TaskContext: what a running task knows about itself and can do for its own
// survival. A method receives it by declaring `spotlight::TaskContext&` as its
// first parameter (callers do not pass it):
//
//   Latent Explorer::rollout(spotlight::TaskContext& ctx, Request r) {
//     Rollout s = ctx.resume_value<Rollout>().value_or(Rollout::start(r));
//     while (s.step < r.steps) {
//       s = denoise(s);
//       ctx.commit_value(s);                  // the head keeps the latest commit
//       if (ctx.should_yield()) ctx.yield();  // the machine is going away
//     }
//     return s.latent;
//   }
//
// A task that yields goes back to the FRONT of its mailbox at once, and the
// next attempt (on another actor of the pool) starts from the last commit.
// Yielding does not use up one of the task's attempts.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "spotlight/codec.h"

namespace spotlight {

// Thrown by TaskContext::yield(); the node turns it into a hand-back.
struct TaskYielded {};

namespace detail {
// Implemented by the node for each running task.
class TaskHost {
 public:
  virtual ~TaskHost() = default;
  virtual void commit(std::string state) = 0;
  virtual bool should_yield() const = 0;
};
}  // namespace detail

class TaskContext {
 public:
  TaskContext(detail::TaskHost& host, uint64_t task_id, uint32_t attempt, const std::string* resume)
      : host_(host), id_(task_id), attempt_(attempt), resume_(resume) {}

  uint64_t task_id() const { return id_; }
  // 1 for the first run; grows when the task is re-run after a crash (not after a yield).
  uint32_t attempt() const { return attempt_; }
  // The state of the last commit of an earlier attempt, if any.
  bool resumed() const { return resume_ != nullptr; }
  const std::string& resume_state() const {
    if (!resume_) throw std::logic_error("resume_state(): this attempt has no committed state");
    return *resume_;
  }
  template <class T>
  std::optional<T> resume_value() const {
    if (!resume_) return std::nullopt;
    return unpack<T>(*resume_);
  }

  // Sends in-flight state to the head, which stores it with the task; an
  // attempt that resumes the task gets the latest. Commits reach the head in
  // order, and before the task's result or yield.
  void commit(std::string state) { host_.commit(std::move(state)); }
  template <class T>
  void commit_value(const T& value) {
    commit(pack(value));
  }

  // True once the task's machine has notice that it is going away.
  bool should_yield() const { return host_.should_yield(); }
  // Gives the task back (commit first); does not return.
  [[noreturn]] void yield() { throw TaskYielded{}; }

 private:
  detail::TaskHost& host_;
  uint64_t id_;
  uint32_t attempt_;
  const std::string* resume_;
};

}  // namespace spotlight

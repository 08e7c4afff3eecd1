// TaskContext: what a running task knows about itself and can do for its own
// survival. A method receives it by declaring `spotlight::TaskContext&` as its
// first parameter (callers do not pass it):
//
//   Latent Explorer::rollout(spotlight::TaskContext& ctx, Request r) {
//     Rollout s = ctx.resume_value<Rollout>().value_or(Rollout::start(r));
//     while (s.step < r.steps) {
//       s = denoise(s);
//       ctx.commit_value(s);                  // the head keeps the latest commit
//       if (ctx.should_yield()) ctx.yield();  // the machine is going away, or
//                                             // a call of higher priority waits
//     }
//     return s.latent;
//   }
//
// A task that yields goes back to the FRONT of its mailbox at once, and the
// next attempt (on another actor of the pool) starts from the last commit.
// Yielding does not use up one of the task's attempts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "spotlight/codec.h"
#include "spotlight/objects.h"

namespace spotlight {

// Thrown by TaskContext::yield(); the node turns it into a hand-back.
struct TaskYielded {};

// The sequence-parallel group a task runs in (a pool created with
// Placement::sequence_parallel(d)). Every member of the group runs the same
// task at the same time; rank 0's result is the call's result and only rank
// 0's commits are kept. A formation is numbered by its epoch: when a member
// is lost the head re-forms the group around the survivors with a new epoch,
// and the task resumes there from its last commit. Members rendezvous under
// (name, epoch) in the head's KV (spotlight/sp_member.h does it for you).
struct SpGroup {
  std::string name;
  uint64_t epoch = 0;
  int32_t rank = 0;
  int32_t size = 0;                // 0: the task does not run in a group
  std::vector<uint64_t> members;   // actor ids, by rank
  MSGPACK_DEFINE(name, epoch, rank, size, members)
};

class Runtime;

class TaskContext;

namespace detail {
class Client;
class CallOrigin;

// Implemented by the node for each running task.
class TaskHost {
 public:
  virtual ~TaskHost() = default;
  virtual void commit(std::string state) = 0;
  virtual bool should_yield() const = 0;
  virtual bool cancelled() const = 0;
  virtual uint64_t actor_id() const = 0;
  virtual const SpGroup& group() const = 0;
  virtual const std::string& head_address() const = 0;
  virtual ObjectStore& objects() const = 0;
  // The node's connection to the head for tasks' calls (connected on first use).
  virtual std::shared_ptr<Client> caller() = 0;
};

// The TaskContext of the task running on this thread, or nullptr (set by
// the node around each run): where a handle that came in a call's
// arguments finds the runtime it calls through.
TaskContext* running_task();
void set_running_task(TaskContext* ctx);
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

  // The actor running this task.
  uint64_t actor_id() const { return host_.actor_id(); }
  // The SP group this task runs in, or nullptr outside SP pools.
  const SpGroup* group() const {
    const SpGroup& g = host_.group();
    return g.size > 0 ? &g : nullptr;
  }
  // HOST:PORT of the head, as this node reaches it (for its KV).
  const std::string& head_address() const { return host_.head_address(); }
  // The node's object store (spotlight/objects.h), shared by its slots.
  ObjectStore& objects() const { return host_.objects(); }

  // Sends in-flight state to the head, which stores it with the task; an
  // attempt that resumes the task gets the latest. Commits reach the head in
  // order, and before the task's result or yield.
  void commit(std::string state) {
    rebase(state);
    host_.commit(std::move(state));
  }
  template <class T>
  void commit_value(const T& value) {
    commit(pack(value));
  }

  // A runtime whose calls are this task's own: spawn, call and fetch from
  // inside an actor as a driver does. Each call's id derives from this task,
  // its last commit, the call's number since that commit and what it calls.
  // A run after a crash or a yield that makes the same calls in the same
  // order (from the start, or after resuming from a commit) gets the earlier
  // run's calls back, finished or still running, instead of running them
  // again; the head keeps their results until this task is done. A call that
  // differs (other arguments, another order) is a new call. Calls from other
  // threads of the task are numbered in the order they are made. (Every
  // commit is hashed for this, at about a GB/s.)
  //
  // A task that waits on a call holds its actor meanwhile: waiting on a call
  // to its own actor never ends, and neither may waiting on a call to its own
  // pool (a member leases calls ahead of running them, and may hold the one it
  // waits for). Give such calls a pool of their own. Calls cross the head as
  // a driver's do. runtime() itself is for the task's own thread; the Runtime
  // it returns may be shared.
  Runtime runtime();

  // True once the task's machine has notice that it is going away, once the
  // call was cancelled (a task that yields on notice also stops when
  // cancelled), or, in a pool with Placement::preempt, once a call of higher
  // priority came for this actor.
  bool should_yield() const { return host_.should_yield(); }
  // True once the call was cancelled (Runtime::cancel). Its caller has
  // CancelledError already and whatever this run returns, throws or commits
  // is dropped: the task may stop at once, by returning or throwing anything.
  bool cancelled() const { return host_.cancelled(); }
  // Gives the task back (commit first); does not return.
  [[noreturn]] void yield() { throw TaskYielded{}; }

 private:
  detail::TaskHost& host_;
  uint64_t id_;
  uint32_t attempt_;
  // Numbers the task's calls from here on under this commit (runtime()).
  void rebase(const std::string& committed);

  const std::string* resume_;
  // Of the last commit this run made (0: none; the commit it resumed from,
  // hashed when runtime() first needs it, if it made none).
  uint64_t lineage_ = 0;
  bool committed_ = false;
  std::shared_ptr<detail::CallOrigin> origin_;  // made by the first runtime()
};

}  // namespace spotlight

// One hosted actor: its instance and the thread that runs its tasks in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "node/task_caller.h"
#include "spotlight/actor.h"
#include "transport/socket.h"
#include "wire/messages.h"

namespace spotlight::node {

// What actor threads hand back to the node's loop; poking `waker` wakes it.
class Outgoing {
 public:
  // How a finished task's result may leave at once: the node sends what waits
  // here if its socket is free, and says whether it did. Set before any actor
  // is placed.
  void set_flusher(std::function<bool()> flush) { flush_ = std::move(flush); }
  void done(wire::Completion c);
  // A result from the actor thread that ran it, in two steps: add it (under
  // the host's lock, so that the node never sees the actor idle and the result
  // nowhere), then, with no lock held and nothing else waiting in the box,
  // have the flusher send it from this thread when it can (no wake-up of the
  // node's loop) or else wake the loop.
  // Never from the loop itself, which holds the socket.
  bool add_finished(wire::Completion c);  // returns whether the outbox was empty
  void send_or_wake(bool was_empty);
  void wake() { waker_.notify(); }
  void placed(wire::Placed p);
  void commit(wire::Commit c);
  // Takes everything queued so far. Send commits before completions: a
  // task's commits then reach the head before its result.
  void take(std::vector<wire::Commit>& commits, std::vector<wire::Completion>& done,
            std::vector<wire::Placed>& placed);
  bool empty();
  // Ids of the tasks whose completions wait here.
  void held(std::vector<uint64_t>& out);
  int fd() const { return waker_.fd(); }
  void drain_wakeups() { waker_.drain(); }

 private:
  void wake_if_first();  // called with mu_ held before adding
  bool nothing_held() const { return done_.empty() && placed_.empty() && commits_.empty(); }
  std::function<bool()> flush_;
  std::mutex mu_;
  std::vector<wire::Commit> commits_;
  std::vector<wire::Completion> done_;
  std::vector<wire::Placed> placed_;
  transport::Waker waker_;
};

// What the node lends the running tasks of every actor it hosts (TaskContext).
struct TaskServices {
  const std::atomic<bool>& draining;  // the node's notice flag: TaskContext::should_yield()
  std::string head_address;           // as this node reaches it (SP members rendezvous in its KV)
  ObjectStore& objects;               // the node's object store
  TaskCaller& caller;                 // the node's connection for TaskContext::runtime()
};

class ActorHost {
 public:
  // Constructs the actor on its own thread and reports Placed through `out`.
  // With `restore`, the new instance is restored from that saved state first.
  ActorHost(uint64_t actor_id, uint32_t incarnation, const detail::ActorTypeInfo& type,
            Outgoing& out, const TaskServices& services,
            std::optional<std::string> restore = std::nullopt);
  // Lets the running task finish, drops the queued ones, joins the thread.
  ~ActorHost();
  // The same without waiting: the thread ends after its running task, and
  // exited() says when (the node then destroys the host at no cost).
  void retire();
  bool exited() const { return exited_.load(); }
  ActorHost(const ActorHost&) = delete;
  ActorHost& operator=(const ActorHost&) = delete;

  void push(wire::Task t);
  // Gives back every task not yet started (the node has notice).
  void hand_back_queued();
  // The head cancelled these tasks: those queued are dropped (the head has
  // finished them), a running one sees TaskContext::cancelled().
  void cancel(const std::unordered_set<uint64_t>& ids);
  // No task running or waiting.
  bool idle();
  // Ids of the tasks it runs or holds queued.
  void held(std::vector<uint64_t>& out);
  uint32_t incarnation() const { return incarnation_; }

 private:
  void loop();
  wire::Completion run(wire::Task& t);

  uint64_t id_;
  uint32_t incarnation_;
  const detail::ActorTypeInfo& type_;
  Outgoing& out_;
  const TaskServices& services_;  // the node's
  bool busy_ = false;  // a task is running (guarded by mu_)
  uint64_t running_id_ = 0;
  // The running task was cancelled; cleared (under mu_) when the next starts.
  std::atomic<bool> cancelled_{false};
  // A call that runs before it came (Placement::preempt): the running task
  // should yield; cleared, like cancelled_, when the next starts.
  std::atomic<bool> outranked_{false};
  int32_t running_priority_ = 0;  // the running task's priority and run_key (under mu_)
  int64_t running_key_ = 0;
  std::optional<std::string> restore_;
  std::shared_ptr<void> instance_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<wire::Task> queue_;
  bool stop_ = false;
  std::atomic<bool> exited_{false};
  std::thread thread_;
};

}  // namespace spotlight::node

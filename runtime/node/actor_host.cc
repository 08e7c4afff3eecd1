#include "node/actor_host.h"

#include <cxxabi.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iterator>
#include <typeinfo>

#include "spotlight/collective.h"
#include "transport/spin.h"

namespace spotlight::node {

namespace {
std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  return s;
}

wire::Completion failure(const wire::Task& t, ErrorKind kind, std::string type, std::string msg) {
  return wire::Completion{t.id, t.actor_id, t.epoch, false, static_cast<int32_t>(kind),
                          std::move(type), Blob{std::move(msg)}, false, {}};
}
}  // namespace

void Outgoing::wake_if_first() {
  // One wake-up per batch, not per message: the loop takes everything at once.
  if (nothing_held()) waker_.notify();
}

void Outgoing::done(wire::Completion c) {
  std::lock_guard<std::mutex> l(mu_);
  wake_if_first();
  done_.push_back(std::move(c));
}

void Outgoing::commit(wire::Commit c) {
  std::lock_guard<std::mutex> l(mu_);
  wake_if_first();
  commits_.push_back(std::move(c));
}

bool Outgoing::add_finished(wire::Completion c) {
  std::lock_guard<std::mutex> l(mu_);
  bool was_empty = nothing_held();
  done_.push_back(std::move(c));
  return was_empty;
}

void Outgoing::send_or_wake(bool was_empty) {
  // Not empty before: whoever added first woke the loop, which has not taken
  // since (taking empties the outbox) and sends this result with the others.
  if (!was_empty) return;
  if (flush_ && flush_()) return;
  waker_.notify();
}

bool Outgoing::empty() {
  std::lock_guard<std::mutex> l(mu_);
  return nothing_held();
}

void Outgoing::placed(wire::Placed p) {
  std::lock_guard<std::mutex> l(mu_);
  wake_if_first();
  placed_.push_back(std::move(p));
}

void Outgoing::take(std::vector<wire::Commit>& commits, std::vector<wire::Completion>& done,
                    std::vector<wire::Placed>& placed) {
  std::lock_guard<std::mutex> l(mu_);
  commits.swap(commits_);
  done.swap(done_);
  placed.swap(placed_);
  commits_.clear();
  done_.clear();
  placed_.clear();
}

namespace {
// The node's side of a running task's TaskContext.
class RunningTask final : public detail::TaskHost {
 public:
  RunningTask(const wire::Task& t, Outgoing& out, const TaskServices& services,
              const std::atomic<bool>& cancelled, const std::atomic<bool>& outranked)
      : t_(t), out_(out), services_(services), cancelled_(cancelled), outranked_(outranked) {}
  void commit(std::string state) override {
    // In an SP group every member runs the same steps; rank 0 speaks for them.
    if (t_.group.size > 0 && t_.group.rank != 0) return;
    out_.commit(wire::Commit{t_.id, t_.actor_id, t_.epoch, Blob{std::move(state)}});
  }
  bool should_yield() const override {
    return services_.draining.load(std::memory_order_relaxed) || cancelled() ||
           outranked_.load(std::memory_order_relaxed);
  }
  bool cancelled() const override { return cancelled_.load(std::memory_order_relaxed); }
  uint64_t actor_id() const override { return t_.actor_id; }
  const SpGroup& group() const override { return t_.group; }
  const std::string& head_address() const override { return services_.head_address; }
  ObjectStore& objects() const override { return services_.objects; }
  std::shared_ptr<detail::Client> caller() override { return services_.caller.client(); }

 private:
  const wire::Task& t_;
  Outgoing& out_;
  const TaskServices& services_;
  const std::atomic<bool>& cancelled_;
  const std::atomic<bool>& outranked_;
};
}  // namespace

ActorHost::ActorHost(uint64_t actor_id, uint32_t incarnation, const detail::ActorTypeInfo& type,
                     Outgoing& out, const TaskServices& services,
                     std::optional<std::string> restore)
    : id_(actor_id),
      incarnation_(incarnation),
      type_(type),
      out_(out),
      services_(services),
      restore_(std::move(restore)) {
  thread_ = std::thread([this] {
    loop();
    exited_ = true;
  });
}

ActorHost::~ActorHost() {
  retire();
  thread_.join();
}

void ActorHost::retire() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
}

void ActorHost::hand_back_queued() {
  std::deque<wire::Task> queued;
  {
    std::lock_guard<std::mutex> l(mu_);
    queued.swap(queue_);
  }
  for (const auto& t : queued) {
    out_.done(failure(t, ErrorKind::kPreempted, "preempted", "handed back unstarted: the node is draining"));
  }
}

void ActorHost::cancel(const std::unordered_set<uint64_t>& ids) {
  std::lock_guard<std::mutex> l(mu_);
  if (busy_ && ids.count(running_id_)) cancelled_.store(true, std::memory_order_relaxed);
  std::erase_if(queue_, [&](const wire::Task& t) { return ids.count(t.id) > 0; });
}

void ActorHost::held(std::vector<uint64_t>& out) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& t : queue_) out.push_back(t.id);
  if (busy_) out.push_back(running_id_);
}

void Outgoing::held(std::vector<uint64_t>& out) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& c : done_) out.push_back(c.id);
}

bool ActorHost::idle() {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.empty() && !busy_;
}

void ActorHost::push(wire::Task t) {
  if (t.start_within_ms > 0) {
    t.start_by = std::chrono::steady_clock::now() + std::chrono::milliseconds(t.start_within_ms);
  }
  if (t.aging_ms > 0) {
    // The head's key (accepted - priority × aging, Mailbox::pop_front), on
    // this node's clock: it was accepted waited_ms before now.
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    t.run_key = now_ms - t.waited_ms - int64_t{t.priority} * t.aging_ms;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    // Placement::preempt: a call that runs before the running one asks it to
    // yield (it goes back to its mailbox and resumes from its last commit).
    if (t.preemptive && busy_ &&
        (t.aging_ms > 0 ? t.run_key < running_key_ : t.priority > running_priority_)) {
      outranked_.store(true, std::memory_order_relaxed);
    }
    // Behind every task that runs before it or ties with it: the head leased
    // them in that order, but a call of higher priority can arrive after
    // others were leased ahead (Placement::prefetch) and must not wait
    // behind them. Without aging that is every task of its priority or
    // higher; with aging, every task of an earlier or equal key (its pool's
    // tasks all share one aging).
    auto before = [&](const wire::Task& q) {
      if (t.aging_ms > 0)
        return q.run_key < t.run_key || (q.run_key == t.run_key && q.priority >= t.priority);
      return q.priority >= t.priority;
    };
    auto at = queue_.end();
    while (at != queue_.begin() && !before(*std::prev(at))) --at;
    queue_.insert(at, std::move(t));
  }
  cv_.notify_one();
}

wire::Completion ActorHost::run(wire::Task& t) {
  if (t.start_within_ms > 0 && std::chrono::steady_clock::now() > t.start_by) {
    // It waited here behind other calls past its deadline: it does not start.
    return failure(
        t, ErrorKind::kTimedOut, "timed_out",
        "the call did not start before its deadline (CallOptions::deadline): it waited on its "
        "node behind other calls, and never ran");
  }
  auto it = type_.methods.find(t.method);
  if (it == type_.methods.end()) {
    return failure(t, ErrorKind::kRejected, "rejected",
                   type_.name + " has no method '" + t.method + "'");
  }
  RunningTask host(t, out_, services_, cancelled_, outranked_);
  TaskContext ctx(host, t.id, t.attempt, t.resumed ? &t.resume.data : nullptr);
  // Handles among the arguments call through this task's runtime.
  struct Running {
    explicit Running(TaskContext* c) { detail::set_running_task(c); }
    ~Running() { detail::set_running_task(nullptr); }
  } running(&ctx);
  try {
    std::string out = it->second(instance_.get(), t.args.data, &ctx);
    wire::Completion c{t.id, t.actor_id, t.epoch, true, 0, "", Blob{std::move(out)}, false, {}};
    if (type_.save) {
      c.has_actor_state = true;
      c.actor_state.data = type_.save(instance_.get());
    }
    return c;
  } catch (const TaskYielded&) {
    if (outranked_.load(std::memory_order_relaxed) && !services_.draining.load()) {
      return failure(t, ErrorKind::kPreempted, wire::kYieldedToPriority,
                     "yielded: a call of higher priority came for this actor");
    }
    return failure(t, ErrorKind::kPreempted, "preempted", "yielded: the node is draining");
  } catch (const BadArguments& e) {
    return failure(t, ErrorKind::kRejected, "rejected", e.what());
  } catch (const collective::CollectiveError& e) {
    // In an SP task a failed collective means the group lost a member: the
    // task goes back to its mailbox (no attempt used) and resumes from its
    // last commit once the head has re-formed a group.
    if (t.group.size > 0) {
      return failure(t, ErrorKind::kPreempted, "group_broken", std::string("SP group broken: ") + e.what());
    }
    return failure(t, ErrorKind::kMethod, "spotlight::collective::CollectiveError", e.what());
  } catch (const std::exception& e) {
    return failure(t, ErrorKind::kMethod, demangle(typeid(e).name()), e.what());
  } catch (...) {
    return failure(t, ErrorKind::kMethod, "unknown", "a non-standard exception was thrown");
  }
}

void ActorHost::loop() {
  wire::Placed placed{id_, incarnation_, true, ""};
  try {
    instance_ = type_.create();
  } catch (const std::exception& e) {
    placed.ok = false;
    placed.error = std::string("constructor threw: ") + e.what();
  }
  if (placed.ok && restore_) {
    try {
      if (type_.restore) type_.restore(instance_.get(), *restore_);
    } catch (const std::exception& e) {
      placed.ok = false;
      placed.error = std::string("restore threw: ") + e.what();
    }
    restore_.reset();
  }
  out_.placed(placed);
  if (!placed.ok) return;
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    transport::spin_until(l, [&] { return stop_ || !queue_.empty(); });
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    wire::Task t = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    running_id_ = t.id;
    running_priority_ = t.priority;
    running_key_ = t.run_key;
    cancelled_.store(false, std::memory_order_relaxed);
    outranked_.store(false, std::memory_order_relaxed);
    l.unlock();
    wire::Completion c = run(t);
    l.lock();
    busy_ = false;
    if (!queue_.empty()) {
      // More tasks wait (pipelined calls): the loop sends their results in
      // batches, woken once by the first.
      out_.done(std::move(c));
      continue;
    }
    // The last task queued, as every synchronous call is: its result leaves
    // now. Added before the lock is let go: idle() never misses a result in
    // flight.
    bool was_empty = out_.add_finished(std::move(c));
    l.unlock();
    out_.send_or_wake(was_empty);
    l.lock();
  }
  l.unlock();
  instance_.reset();  // the actor is destroyed on its own thread
}

}  // namespace spotlight::node

// Cancelling calls (Runtime::cancel, Ray's cancel).
//
// A cancelled call is finished at once with a kCancelled result, durably, as
// a deadline's time-out is: the caller hears of it through its future, a
// restarted head keeps it cancelled, and nothing runs it again. Where it was
// decides what else happens:
//   - waiting in its mailbox: it leaves the mailbox;
//   - leased: the lease ends here (the actor's credit comes back), and after
//     the commit the node is told (Cancel). The node drops the task if it has
//     not started; a running one sees TaskContext::cancelled(). Whatever that
//     run still sends (commits, a result, a yield) is stale and dropped.
//   - running in an SP group: the group is broken as well, so that its
//     members, which may still be inside the cancelled run's collectives,
//     re-form with a new epoch before they take another task together.
// With `children`, the unfinished calls its runs made are cancelled too.
#include <spdlog/spdlog.h>

#include "head/head.h"

namespace spotlight::head {

void Head::on_cancel(const std::string& peer, const wire::Cancel& x, uint64_t rid) {
  if (x.ids.size() > kMaxFetchIds) {
    throw std::invalid_argument("a Cancel may list at most " + std::to_string(kMaxFetchIds) +
                                " ids, not " + std::to_string(x.ids.size()));
  }
  count("cancel_requests", x.ids.size());
  Cancelling c;
  wire::CancelReply reply;
  reply.outcomes.reserve(x.ids.size());
  for (uint64_t id : x.ids) {
    auto it = state_.tasks.find(id);
    CancelOutcome o = CancelOutcome::kNotHeld;
    if (it != state_.tasks.end()) {
      Task& t = it->second;
      if (t.state != TaskState::kDone) {
        cancel_task(t, x.children, "it was cancelled (Runtime::cancel)", c);
        o = CancelOutcome::kCancelled;
      } else {
        // Asked again (a resent request after a head restart, or an id named
        // twice): what it finished with answers.
        o = !t.ok && t.kind == static_cast<int32_t>(ErrorKind::kCancelled)
                ? CancelOutcome::kCancelled
                : CancelOutcome::kFinished;
      }
    }
    reply.outcomes.push_back(static_cast<int32_t>(o));
  }
  for (auto& [mailbox, ids] : c.dequeued) {
    state_.pools[mailbox].queue.erase_if([&](uint64_t id) { return ids.count(id) > 0; });
  }
  // After the commit, as results are: a node told before it, by a head that
  // then died, would drop a task the next head still has leased to it.
  for (auto& [node_peer, tell] : c.nodes)
    to_callers_[node_peer].frames.push_back(wire::encode(tell));
  // Last: the caller's future resolves before cancel() returns.
  to_callers_[peer].last.push_back(wire::encode(reply, rid));
}

void Head::cancel_task(Task& root, bool children, const std::string& why, Cancelling& c) {
  std::vector<std::pair<uint64_t, std::string>> work{{root.id, why}};
  while (!work.empty()) {
    auto [id, reason] = std::move(work.back());
    work.pop_back();
    auto it = state_.tasks.find(id);
    if (it == state_.tasks.end() || it->second.state == TaskState::kDone) continue;
    Task& t = it->second;
    if (children) {
      // Listed while the task is open; apply_finish below forgets the list.
      if (auto k = state_.children.find(id); k != state_.children.end()) {
        for (uint64_t child : k->second) {
          work.emplace_back(child,
                            "the task that made it (" + std::to_string(id) + ") was cancelled");
        }
      }
    }
    const bool ran = t.state == TaskState::kLeased;
    if (t.state == TaskState::kQueued) {
      c.dequeued[t.mailbox].insert(id);
      if (t.deadline_ms != 0) deadlines_.erase({t.deadline_ms, id});
    } else if (ran) {
      stop_leased(t, c);
    }
    FinishEvent f{id, false, static_cast<int32_t>(ErrorKind::kCancelled), "cancelled",
                  Blob{"call " + std::to_string(id) + " was cancelled: " + reason +
                       (ran ? " after it was leased to an actor; a run that goes on has its "
                              "result dropped"
                            : " before it ran")}};
    record(EventKind::kFinish, f);
    state_.apply_finish(f);
    count(ran ? "tasks_cancelled_leased" : "tasks_cancelled_queued");
    queue_result(t);
  }
}

void Head::stop_leased(Task& t, Cancelling& c) {
  auto tell = [&](const std::string& node_id) {
    auto n = state_.nodes.find(node_id);
    if (n == state_.nodes.end() || !n->second.alive) return;  // its run ends with the node
    std::vector<uint64_t>& ids = c.nodes[n->second.peer].ids;
    if (ids.empty() || ids.back() != t.id) ids.push_back(t.id);
  };
  end_lease(t);
  tell(t.node);
  Pool& pool = state_.pools[t.mailbox];
  if (pool.rec.sp_degree > 1) {
    for (auto& [gid, g] : pool.groups) {
      if (g.task != t.id || g.lease != t.epoch) continue;
      for (uint64_t m : g.members) tell(state_.actors[m].node);
      g.task = 0;  // ended here: break_group must not re-queue it
      break_group(pool, gid, "its task was cancelled", false);
      break;
    }
    return;
  }
  // As when a result comes (on_done).
  auto nit = state_.nodes.find(t.node);
  if (nit == state_.nodes.end()) return;
  auto ait = state_.actors.find(t.actor);
  lease_ended_on(nit->second, ait != state_.actors.end() ? &ait->second : nullptr);
}

}  // namespace spotlight::head

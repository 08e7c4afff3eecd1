// Preemption by priority (Placement::preempt): a call that waits in its
// mailbox while every member of its pool is busy asks a member that runs a
// call of lower priority to yield, by leasing the waiting call to it beyond
// its credit. The node puts it first in that actor's queue and raises the
// running task's should_yield() (ActorHost::push); the task commits, yields,
// and goes back to the front of its priority, to resume from its commit.
#include <algorithm>
#include <limits>

#include "head/head.h"

namespace spotlight::head {

int64_t Head::urgency(const Task& t, int64_t aging_ms) const {
  // Lower runs first: the mailbox's order (Mailbox::pop_front).
  return aging_ms > 0 ? Mailbox::virtual_start(accepted_ms(t), t.priority, aging_ms)
                      : -int64_t{t.priority};
}

void Head::preempt_for(Pool& pool) {
  if (now_ < pool.next_preempt_check) return;
  pool.next_preempt_check = now_ + kPreemptCheck;
  const int64_t aging = pool.rec.aging_ms;
  auto accepted = [&](uint64_t queued) {
    auto q = state_.tasks.find(queued);
    return q == state_.tasks.end() ? wall_ms_ : accepted_ms(q->second);
  };
  // The members that could be asked: ready, on a node that takes work, and
  // not asked already (an asked one holds a lease beyond its credit); for
  // each, its most urgent leased call. The waiting call goes to a member
  // only if it is more urgent than every call the member holds, so more
  // urgent than the one it runs, which is then asked to yield.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::unordered_map<uint64_t, int64_t> most_urgent;  // actor -> key
  std::set<std::string> nodes;
  for (uint64_t id : pool.members) {
    const Actor& a = state_.actors[id];
    if (a.phase != ActorPhase::kReady || a.credit != 0) continue;
    auto n = state_.nodes.find(a.node);
    if (n == state_.nodes.end() || !n->second.alive || n->second.draining) continue;
    most_urgent.emplace(id, kNone);
    nodes.insert(a.node);
  }
  for (const std::string& node : nodes) {
    auto on = state_.leased_on.find(node);
    if (on == state_.leased_on.end()) continue;
    for (uint64_t tid : on->second) {
      const Task& t = state_.tasks.at(tid);
      auto m = most_urgent.find(t.actor);
      if (m == most_urgent.end() || state_.actors.at(t.actor).node != node) continue;
      m->second = std::min(m->second, urgency(t, aging));
    }
  }
  // (key, actor): the member whose calls are least urgent first.
  std::vector<std::pair<int64_t, uint64_t>> victims;
  for (const auto& [actor, k] : most_urgent) {
    if (k != kNone) victims.emplace_back(k, actor);
  }
  std::sort(victims.begin(), victims.end(), std::greater<>());
  size_t v = 0;
  while (v < victims.size() && !pool.queue.empty()) {
    auto it = state_.tasks.find(pool.queue.front(aging, accepted).first);
    if (it == state_.tasks.end()) break;
    if (urgency(it->second, aging) >= victims[v].first) break;  // no member runs a less urgent call
    Actor& a = state_.actors[victims[v].second];
    // nullptr: the call left instead (out of attempts, or past its
    // deadline); the member is still free to ask for the next one.
    if (lease(pool, a, state_.nodes[a.node])) {
      count("preemption_requests");
      ++v;
    }
  }
}

}  // namespace spotlight::head

// The head's sequence-parallel groups (DESIGN.md §3, "Elastic SP groups").
//
// A pool created with an SP degree d > 1 runs every call on a group of d of
// its members. Each turn the head breaks the groups that lost a member (its
// node died, drained, or the member's task came back as a failed collective)
// and forms new groups, each with a new epoch, from the members that are
// free. A broken group's task goes back to the front of the mailbox without
// using an attempt, and resumes in the next group from its last commit; the
// survivors keep their processes and their weights.
//
// A member whose node has notice (drain) keeps its group until the group's
// task yields at a step all members agree on, so no step is lost; then the
// group breaks and re-forms without it.
//
// Before the members of a broken group join a new one, the head probes their
// nodes: a member that died with its node never answers, so it is left out
// long before its missed heartbeats declare the node dead.
#include <spdlog/spdlog.h>

#include "head/head.h"
#include "spotlight/collective.h"

namespace spotlight::head {

bool Head::free_for_group(const Actor& a) const {
  if (a.group != 0 || a.phase != ActorPhase::kReady) return false;
  auto nit = state_.nodes.find(a.node);
  return nit != state_.nodes.end() && nit->second.alive && !nit->second.draining && nit->second.probe == 0;
}

bool Head::in_busy_group(const Actor& a) const {
  if (a.group == 0) return false;
  auto pit = state_.pools.find(a.rec.pool);
  if (pit == state_.pools.end()) return false;
  auto git = pit->second.groups.find(a.group);
  return git != pit->second.groups.end() && git->second.task != 0;
}

void Head::form_groups() {
  for (const std::string& name : state_.sp_pools) {
    Pool& pool = state_.pools[name];
    const int32_t d = pool.rec.sp_degree;
    std::vector<std::pair<uint64_t, bool>> lost;  // (group, a member crashed)
    for (const auto& [gid, g] : pool.groups) {
      bool broken = false, crashed = false;
      for (size_t r = 0; r < g.members.size(); ++r) {
        const Actor& a = state_.actors[g.members[r]];
        auto nit = state_.nodes.find(a.node);
        // A member with notice: a running task yields first (the members
        // agree on the step through SpMember::should_yield); then it breaks.
        if (a.phase != ActorPhase::kReady || a.group != gid || nit == state_.nodes.end() ||
            !nit->second.alive || (nit->second.draining && g.task == 0)) {
          broken = true;
          // Left with notice (drained, said goodbye) or crashed?
          auto was = state_.nodes.find(g.nodes[r]);
          crashed |= was == state_.nodes.end() || !was->second.draining;
        }
      }
      if (broken) lost.emplace_back(gid, crashed);
    }
    for (auto [gid, crashed] : lost) {
      break_group(pool, gid, crashed ? "a member was lost" : "a member left with notice", crashed);
    }

    std::vector<uint64_t> free;
    for (uint64_t id : pool.members) {
      if (free_for_group(state_.actors[id])) free.push_back(id);
    }
    for (size_t k = 0; k + d <= free.size(); k += d) {
      SpGroupState g;
      g.id = pool.next_group++;
      g.epoch = ++next_sp_epoch_;
      g.members.assign(free.begin() + static_cast<std::ptrdiff_t>(k),
                       free.begin() + static_cast<std::ptrdiff_t>(k + d));
      for (uint64_t id : g.members) {
        state_.actors[id].group = g.id;
        g.nodes.push_back(state_.actors[id].node);
      }
      spdlog::info("SP group {}/sp{} formed, epoch {}: {} members", name, g.id, g.epoch, d);
      count("sp_groups_formed");
      pool.groups.emplace(g.id, std::move(g));
    }
  }
}

void Head::dispatch_groups(Pool& pool) {
  for (auto& [gid, g] : pool.groups) {
    // One task at a time per group: its members run it together.
    while (g.task == 0 && !pool.queue.empty()) {
      Actor& leader = state_.actors[g.members.front()];
      if (Task* t = lease(pool, leader, state_.nodes[leader.node], &g)) {
        g.task = t->id;
        g.lease = t->epoch;
      }
    }
  }
}

void Head::break_group(Pool& pool, uint64_t group_id, const char* why, bool requeue) {
  auto git = pool.groups.find(group_id);
  if (git == pool.groups.end()) return;
  SpGroupState g = std::move(git->second);
  pool.groups.erase(git);
  if (g.task != 0 && requeue) {
    auto it = state_.tasks.find(g.task);
    if (it != state_.tasks.end() && it->second.state == TaskState::kLeased && it->second.epoch == g.lease) {
      end_lease(it->second);
      std::vector<Task*> back{&it->second};
      requeue_front(back, true);  // not the task's fault: no attempt used
      count("sp_tasks_requeued");
    }
  }
  for (uint64_t id : g.members) {
    Actor& a = state_.actors[id];
    if (a.group == group_id) a.group = 0;
    auto nit = state_.nodes.find(a.node);
    if (nit == state_.nodes.end() || !nit->second.alive || nit->second.probe != 0) continue;
    Node& n = nit->second;
    n.probe = ++next_probe_;
    to_nodes_[n.peer].frames.push_back(wire::encode_empty(wire::MsgType::kProbe, n.probe));
  }
  drop_rendezvous(group_name(pool.rec.name, group_id), g.epoch);
  count("sp_groups_broken");
  spdlog::info("SP group {}/sp{} (epoch {}) broken: {}", pool.rec.name, group_id, g.epoch, why);
}

bool Head::on_member_done(wire::Completion& c) {
  // The common case first, on every completion: the lease holder's own.
  auto it = state_.tasks.find(c.id);
  if (it != state_.tasks.end() && it->second.actor == c.actor_id) return false;
  auto ait = state_.actors.find(c.actor_id);
  if (ait == state_.actors.end()) return false;
  Actor& a = ait->second;
  Pool& pool = state_.pools[a.rec.pool];
  if (pool.rec.sp_degree <= 1) return false;
  // Another member of the group: rank 0's result is the call's; what matters
  // here is only whether the member's run failed.
  auto git = pool.groups.find(a.group);
  const bool current = it != state_.tasks.end() && it->second.state == TaskState::kLeased &&
                       it->second.epoch == c.epoch && git != pool.groups.end() && git->second.task == c.id &&
                       git->second.lease == c.epoch;
  if (!current) {
    count("sp_member_results_late");  // its group broke, or rank 0 finished first
    return true;
  }
  if (c.ok) {
    count("sp_member_results");
    return true;
  }
  if (c.kind == static_cast<int32_t>(ErrorKind::kPreempted)) {
    if (c.error_type == "group_broken") {  // its collective failed: a member may be dead
      break_group(pool, a.group, "a member's collective failed");
    } else {
      // A yield: rank 0 yields at the same step, and its completion (after
      // its last commit, on the same connection) ends the lease.
      count("sp_member_yields");
    }
    return true;
  }
  // The method itself failed on a member: the call fails with that error.
  Task& t = it->second;
  end_lease(t);
  git->second.task = 0;
  FinishEvent e{c.id, false, c.kind, std::move(c.error_type), std::move(c.payload)};
  record(EventKind::kFinish, e);
  state_.apply_finish(e);
  count("results_error");
  queue_result(t);
  return true;
}

void Head::end_lease(Task& t) {
  Pool& pool = state_.pools[t.mailbox];
  if (pool.leased > 0) pool.leased -= 1;
  auto ait = state_.actors.find(t.actor);
  if (ait != state_.actors.end()) {
    Actor& a = ait->second;
    if (a.leased > 0) a.leased -= 1;
    if (a.phase == ActorPhase::kReady && a.node == t.node) a.credit += 1;
  }
  auto nit = state_.nodes.find(t.node);
  if (nit != state_.nodes.end() && nit->second.alive && nit->second.leased > 0) nit->second.leased -= 1;
}

void Head::drop_rendezvous(const std::string& group, uint64_t epoch) {
  const std::string prefix = collective::rendezvous_prefix(group, epoch) + "/";
  auto it = kv_.lower_bound(prefix);
  size_t dropped = 0;
  while (it != kv_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    it = erase_kv(it);
    ++dropped;
  }
  count("kv_keys_dropped", dropped);
}

}  // namespace spotlight::head

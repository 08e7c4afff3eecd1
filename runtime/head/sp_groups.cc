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
// Before the members of a broken group join a new one, the head probes their
// nodes: a member that died with its node never answers, so it is left out
// long before its missed heartbeats declare the node dead.
#include <spdlog/spdlog.h>

#include "head/head.h"

namespace spotlight::head {

bool Head::free_for_group(const Actor& a) const {
  if (a.group != 0 || a.phase != ActorPhase::kReady) return false;
  auto nit = state_.nodes.find(a.node);
  return nit != state_.nodes.end() && nit->second.alive && !nit->second.draining && nit->second.probe == 0;
}

void Head::form_groups() {
  for (auto& [name, pool] : state_.pools) {
    const int32_t d = pool.rec.sp_degree;
    if (d <= 1) continue;
    std::vector<uint64_t> lost;
    for (const auto& [gid, g] : pool.groups) {
      for (uint64_t id : g.members) {
        const Actor& a = state_.actors[id];
        auto nit = state_.nodes.find(a.node);
        if (a.phase != ActorPhase::kReady || a.group != gid || nit == state_.nodes.end() ||
            !nit->second.alive || nit->second.draining) {
          lost.push_back(gid);
          break;
        }
      }
    }
    for (uint64_t gid : lost) break_group(pool, gid, "a member was lost");

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
      for (uint64_t id : g.members) state_.actors[id].group = g.id;
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

void Head::break_group(Pool& pool, uint64_t group_id, const char* why) {
  auto git = pool.groups.find(group_id);
  if (git == pool.groups.end()) return;
  SpGroupState g = std::move(git->second);
  pool.groups.erase(git);
  if (g.task != 0) {
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
  count("sp_groups_broken");
  spdlog::info("SP group {}/sp{} (epoch {}) broken: {}", pool.rec.name, group_id, g.epoch, why);
}

bool Head::on_member_done(wire::Completion& c) {
  auto ait = state_.actors.find(c.actor_id);
  if (ait == state_.actors.end()) return false;
  Actor& a = ait->second;
  Pool& pool = state_.pools[a.rec.pool];
  if (pool.rec.sp_degree <= 1) return false;
  auto it = state_.tasks.find(c.id);
  if (it != state_.tasks.end() && it->second.actor == c.actor_id) return false;  // the lease holder
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
    break_group(pool, a.group, "a member gave its task back");
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

}  // namespace spotlight::head

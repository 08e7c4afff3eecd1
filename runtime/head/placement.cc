// Placing actors on nodes: which node takes a pool's waiting member
// (Placement: market, slots, type, strategy, a pinned or preferred node, a
// limit per node, pools to be beside or away from), and, for `spotlight
// status`, why members still wait.
#include <spdlog/spdlog.h>

#include "head/head.h"

namespace spotlight::head {

void Head::place() {
  // Pools placed beside (or near) another go after the others, so that a
  // neighbour placed in the same turn is there to be found. One whose
  // neighbour is itself beside a third may need another pass: made while a
  // pass places something and a pool that must be beside another waits.
  bool placed = false;
  bool follows = false;
  for (auto pit = state_.unplaced.begin(); pit != state_.unplaced.end();) {
    if (state_.beside_pools.count(pit->first)) {
      ++pit;
      continue;
    }
    pit = place_members(pit, placed, follows);
  }
  if (state_.beside_pools.empty()) return;
  do {
    placed = follows = false;
    for (const std::string& name : state_.beside_pools) {
      auto pit = state_.unplaced.find(name);
      if (pit != state_.unplaced.end()) place_members(pit, placed, follows);
    }
  } while (placed && follows);
}

std::map<std::string, std::set<uint64_t>>::iterator Head::place_members(
    std::map<std::string, std::set<uint64_t>>::iterator pit, bool& placed, bool& follows) {
  const std::string& name = pit->first;
  std::set<uint64_t>& pending = pit->second;
  Pool& pool = state_.pools[name];
  // Advanced before set_phase drops the id from `pending`.
  for (auto it = pending.begin(); it != pending.end();) {
    Actor& a = state_.actors[*it++];
    if (!grace_over_ && a.rec.incarnation > 0) continue;  // its node may still come back
    Node* best = pick_node(name, pool.rec);
    if (!best) {  // no node takes this pool's members now: nor its next one
      follows = follows || (!pool.rec.beside.empty() && !pool.rec.beside_soft);
      break;
    }
    placed = true;
    store::ActorRecord rec = a.rec;
    rec.incarnation += 1;
    record(EventKind::kActor, rec);
    state_.apply_actor(rec);
    state_.set_phase(a, ActorPhase::kPlacing);
    a.node = best->id;
    a.credit = 0;
    best->used += pool.rec.slots_per_actor;
    best->actors.insert(a.rec.id);
    wire::Place msg{a.rec.id,          name,          pool.rec.type, rec.incarnation,
                    pool.rec.prefetch, rec.has_state, rec.state};
    to_nodes_[best->peer].frames.push_back(wire::encode(msg));
    spdlog::debug("placing actor {} ({}) on {}", a.rec.id, name, best->id);
  }
  return pending.empty() ? state_.unplaced.erase(pit) : std::next(pit);
}

Head::Unfit Head::fit(const Node& n, const std::string& pool_name, const store::PoolRecord& p,
                      bool count, Seen& seen) const {
  seen = Seen{};
  int& members = seen.members;
  if (!n.alive) return Unfit::kGone;
  if (n.draining) return Unfit::kDraining;
  if (p.market != "any" && n.market != p.market) return Unfit::kMarket;
  if (!p.node.empty() && n.id != p.node) return Unfit::kPinned;
  if (!n.types.count(p.type)) return Unfit::kType;
  if (n.slots - n.used < p.slots_per_actor) return Unfit::kSlots;
  // The node's actors, visited only where a rule asks: the pool's members
  // there, a member of the pool to be beside, one of a pool to keep away from.
  auto shunned = state_.shunned_by.find(pool_name);
  const bool shunning = !p.away_from.empty() || shunned != state_.shunned_by.end();
  bool clash = false;
  if (count || p.max_per_node > 0 || !p.beside.empty() || shunning) {
    for (uint64_t id : n.actors) {
      auto a = state_.actors.find(id);
      if (a == state_.actors.end()) continue;
      const std::string& q = a->second.rec.pool;
      if (q == pool_name) {
        ++members;
        continue;
      }
      seen.neighbour = seen.neighbour || q == p.beside;
      clash = clash || (shunning && (q == p.away_from || (shunned != state_.shunned_by.end() &&
                                                          shunned->second.count(q))));
    }
  }
  if (p.max_per_node > 0 && members >= p.max_per_node) return Unfit::kPerNode;  // anti-affinity
  if (clash) return Unfit::kAway;
  if (!seen.neighbour && !p.beside.empty() && !p.beside_soft) return Unfit::kBeside;
  return Unfit::kFits;
}

Node* Head::pick_node(const std::string& pool_name, const store::PoolRecord& p) {
  const bool pack = p.strategy == "pack";
  Node* best = nullptr;
  int best_members = 0;
  bool best_near = false;
  for (auto& [nid, n] : state_.nodes) {
    Seen seen;
    if (fit(n, pool_name, p, pack, seen) != Unfit::kFits) continue;
    if (!p.prefer.empty() && n.id == p.prefer) return &n;  // soft affinity: it fits
    const int free = n.slots - n.used;
    // Near a pool (Placement::beside_soft): a node with its member first.
    const bool near = p.beside_soft && seen.neighbour;
    bool better;
    if (best && near != best_near) {
      better = near;
    } else if (!pack) {
      better = !best || free > best->slots - best->used;
    } else {  // pack: beside the pool's members first, then the tightest fit
      better = !best || seen.members > best_members ||
               (seen.members == best_members && free < best->slots - best->used);
    }
    if (better) {
      best = &n;
      best_members = seen.members;
      best_near = near;
    }
  }
  return best;
}

std::string Head::placement_rules(const store::PoolRecord& p) {
  std::vector<std::string> rules;
  if (p.strategy != "spread") rules.push_back(p.strategy);
  if (p.slots_per_actor != 1) rules.push_back(std::to_string(p.slots_per_actor) + " slots each");
  if (!p.node.empty()) rules.push_back("on node " + p.node);
  if (!p.prefer.empty()) rules.push_back("prefers node " + p.prefer);
  if (p.max_per_node > 0)
    rules.push_back("at most " + std::to_string(p.max_per_node) + " per node");
  if (!p.beside.empty())
    rules.push_back((p.beside_soft ? "near pool " : "beside pool ") + p.beside);
  if (!p.away_from.empty()) rules.push_back("away from pool " + p.away_from);
  if (p.preempt) rules.push_back("preemptive");
  std::string out;
  for (const auto& r : rules) out += (out.empty() ? "" : ", ") + r;
  return out;
}

std::string Head::why_waiting(const std::string& pool_name, const store::PoolRecord& p,
                              const std::set<uint64_t>& waiting) const {
  size_t held_for_restart = 0;
  for (uint64_t id : waiting) {
    auto a = state_.actors.find(id);
    held_for_restart += !grace_over_ && a != state_.actors.end() && a->second.rec.incarnation > 0;
  }
  const std::string members = std::to_string(waiting.size()) + " member(s) wait";
  if (held_for_restart == waiting.size()) {
    return members + " for the nodes they ran on before the head restarted (grace period)";
  }
  if (!p.node.empty()) {
    auto n = state_.nodes.find(p.node);
    if (n == state_.nodes.end() || !n->second.alive) {
      return members + " for node " + p.node +
             ", which the pool is pinned to and which is not here";
    }
  }
  if (!p.beside.empty() && !p.beside_soft && !state_.pools.count(p.beside)) {
    return members + " for pool " + p.beside +
           ", which they are to be beside and which does not exist";
  }
  // Each node's first reason, in the order fit() asks.
  std::map<Unfit, size_t> by_reason;
  size_t alive = 0;
  for (const auto& [nid, n] : state_.nodes) {
    Seen there;
    const Unfit why = fit(n, pool_name, p, false, there);
    if (why == Unfit::kGone) continue;
    ++alive;
    by_reason[why] += 1;
  }
  if (alive == 0) return members + ": no node has joined";
  if (by_reason.count(Unfit::kFits)) return members + ": a node fits, placing on the next turn";
  std::string out = members + ": none of " + std::to_string(alive) + " node(s) fits (";
  auto reason = [&](Unfit k) -> std::string {
    switch (k) {
      case Unfit::kDraining:
        return "draining";
      case Unfit::kMarket:
        return "not on market " + p.market;
      case Unfit::kPinned:
        return "not node " + p.node + " (pinned)";
      case Unfit::kType:
        return "without " + p.type + " loaded";
      case Unfit::kSlots:
        return "fewer than " + std::to_string(p.slots_per_actor) + " free slot(s)";
      case Unfit::kPerNode:
        return "holding " + std::to_string(p.max_per_node) + " member(s), the most per node";
      case Unfit::kAway:
        return "hosting a member of a pool it must not share a node with (away from)";
      case Unfit::kBeside:
        return "without a member of pool " + p.beside + " (beside)";
      default:
        return "";
    }
  };
  bool first = true;
  for (const auto& [k, n] : by_reason) {
    out += (first ? "" : ", ") + std::to_string(n) + " " + reason(k);
    first = false;
  }
  return out + ")";
}

}  // namespace spotlight::head

#include "head/state.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>

namespace spotlight::head {

const char* to_string(ActorPhase p) {
  switch (p) {
    case ActorPhase::kPending: return "pending";
    case ActorPhase::kPlacing: return "placing";
    case ActorPhase::kReady: return "ready";
  }
  return "?";
}

void State::apply_client(const ClientRecord& c) {
  next_client = std::max(next_client, c.num + 1);
  if (c.uuid.rfind(kRetiredPrefix, 0) == 0) {  // a retired number's row, as loaded
    uint64_t& seq = retired_seqs[c.num];
    seq = std::max(seq, c.max_seq);
    return;
  }
  if (auto r = retired_seqs.find(c.num); r != retired_seqs.end()) {  // given out again
    retired_seqs.erase(r);
    dirty_retired.erase(c.num);
    erased_clients.push_back(retired_uuid(c.num));
  }
  auto& cl = clients[c.uuid];
  cl.rec = c;
  client_by_num[c.num] = c.uuid;
  dirty_clients.insert(c.uuid);
}

void State::apply_pool(const PoolRecord& p) {
  pools[p.name].rec = p;
  if (p.sp_degree > 1) sp_pools.insert(p.name);
  if (!p.away_from.empty()) shunned_by[p.away_from].insert(p.name);
  if (!p.beside.empty()) beside_pools.insert(p.name);
  dirty_pools.insert(p.name);
}

void State::apply_remove_pool(const std::string& name) {
  auto it = pools.find(name);
  if (it == pools.end()) return;
  if (auto sh = shunned_by.find(it->second.rec.away_from); sh != shunned_by.end()) {
    sh->second.erase(name);
    if (sh->second.empty()) shunned_by.erase(sh);
  }
  beside_pools.erase(name);
  for (uint64_t a : it->second.members) {
    actors.erase(a);
    dirty_actors.erase(a);
    erased_actors.push_back(a);
  }
  pools.erase(it);
  unplaced.erase(name);
  waiting.erase(name);
  sp_pools.erase(name);
  dirty_pools.erase(name);
  erased_pools.push_back(name);
}

void State::apply_actor(const ActorRecord& a) {
  auto [it, fresh] = actors.try_emplace(a.id);
  it->second.rec = a;
  if (fresh) {  // a new member, pending until placed (a known one keeps its place)
    pools[a.pool].members.push_back(a.id);
    unplaced[a.pool].insert(a.id);
  }
  next_actor = std::max(next_actor, a.id + 1);
  dirty_actors.insert(a.id);
}

void State::set_phase(Actor& a, ActorPhase phase) {
  if (phase == ActorPhase::kPending) {
    unplaced[a.rec.pool].insert(a.rec.id);
  } else if (a.phase == ActorPhase::kPending) {
    // The entry stays, perhaps empty: place() may be walking it.
    if (auto it = unplaced.find(a.rec.pool); it != unplaced.end()) it->second.erase(a.rec.id);
  }
  a.phase = phase;
}

void State::enqueue(Pool& p, int32_t priority, uint64_t id, bool front) {
  if (front) {
    p.queue.push_front(priority, id);
  } else {
    p.queue.push_back(priority, id);
  }
  waiting.insert(p.rec.name);
}

Task& State::apply_accept(TaskRecord t, ClientRecord* maker) {
  const uint64_t id = t.id;
  auto [it, fresh] = tasks.try_emplace(id);
  Task& task = it->second;
  if (!fresh) {  // a row the journal repeats
    uncount_call(task.caller);
    count_foreign(id, task.caller, -1);
  }
  calls_of[t.caller] += 1;
  count_foreign(id, t.caller, +1);
  unindex_lease(task);
  will_change(id, task);
  // Moved, not copied: a million records loaded at a restart, or taken in
  // per second, each copy of the arguments an allocation.
  static_cast<TaskRecord&>(task) = std::move(t);
  if (task.accepted_ms == 0) task.accepted_ms = clock_ms;
  if (task.state == TaskState::kLeased)
    leased_on[task.node].insert(id);                     // a row loaded at a restart
  if (task.state == TaskState::kDone) index_done(task);  // the same, finished
  next_ord = std::max(next_ord, task.ord + 1);
  if (task.parent != 0) {
    // Indexed only while the parent may run again; a call whose parent is
    // done or gone (not held) is forgotten like any other once received.
    auto p = tasks.find(task.parent);
    if (p != tasks.end() && p->second.state != TaskState::kDone)
      children[task.parent].push_back(id);
  }
  if (id >> 63) return task;  // a child id: no client's high-water mark
  // The maker's high-water mark (the id's prefix: a fetch changes the caller, not the maker).
  if (!maker) {
    auto m = client_by_num.find(static_cast<uint32_t>(id >> 40));
    if (m == client_by_num.end()) return task;
    maker = &clients[m->second].rec;
  }
  const uint64_t seq = id & ((uint64_t{1} << 40) - 1);
  if (seq > maker->max_seq) {
    maker->max_seq = seq;
    dirty_clients.insert(maker->uuid);
  }
  return task;
}

void State::apply_lease(const LeaseEvent& e) {
  auto it = tasks.find(e.id);
  if (it == tasks.end()) return;
  Task& t = it->second;
  will_change(e.id, t);
  unindex_lease(t);
  t.state = TaskState::kLeased;
  t.epoch = e.epoch;
  t.actor = e.actor;
  t.node = e.node;
  leased_on[t.node].insert(e.id);
  t.attempts += 1;
  next_epoch = std::max(next_epoch, e.epoch + 1);
}

void State::apply_finish(const FinishEvent& e) {
  auto it = tasks.find(e.id);
  if (it == tasks.end()) return;
  Task& t = it->second;
  will_change(e.id, t);
  unindex_lease(t);
  if (t.state != TaskState::kDone) {
    t.state = TaskState::kDone;
    index_done(t);
  }
  t.ok = e.ok;
  t.kind = e.kind;
  t.error_type = e.error_type;
  t.result = e.result;
  t.args.data.clear();  // arguments and checkpoint are not needed once the result is stored
  t.checkpoint.data.clear();
  t.has_checkpoint = false;
  // The task will not run again: the calls it made and whose results it
  // received are no longer needed; the others go when received.
  if (auto c = children.find(e.id); c != children.end()) {
    for (uint64_t child : c->second) {
      auto ct = tasks.find(child);
      if (ct != tasks.end() && ct->second.received) erase_task(ct);
    }
    children.erase(c);
  }
}

void State::apply_requeue(const RequeueEvent& e) {
  auto it = tasks.find(e.id);
  if (it == tasks.end()) return;
  Task& t = it->second;
  will_change(e.id, t);
  unindex_lease(t);
  t.state = TaskState::kQueued;
  t.epoch = 0;
  t.node.clear();
  if (e.handed_back && t.attempts > 0) t.attempts -= 1;
}

void State::apply_commit(const CommitEvent& e) {
  auto it = tasks.find(e.id);
  if (it == tasks.end()) return;
  Task& t = it->second;
  if (t.state != TaskState::kLeased || t.epoch != e.epoch) return;  // a stale lease's commit
  will_change(e.id, t);
  t.has_checkpoint = true;
  t.checkpoint = e.state;
}

void State::apply_claim(const ClaimEvent& e) {
  auto it = tasks.find(e.id);
  if (it == tasks.end()) return;
  will_change(e.id, it->second);
  uncount_call(it->second.caller);
  count_foreign(e.id, it->second.caller, -1);
  calls_of[e.caller] += 1;
  count_foreign(e.id, e.caller, +1);
  it->second.caller = e.caller;
  if (it->second.state == TaskState::kDone) index_done(it->second);  // now the claimer's to receive
}

std::vector<uint64_t> State::apply_forget(const std::vector<uint64_t>& ids, uint32_t caller) {
  std::vector<uint64_t> forgotten;
  forgotten.reserve(ids.size());
  for (uint64_t id : ids) {
    auto it = tasks.find(id);
    if (it == tasks.end() || it->second.state != TaskState::kDone) continue;
    if (caller != 0 && it->second.caller != caller) continue;
    forgotten.push_back(id);
    if (Task& t = it->second; t.parent != 0 && children.count(t.parent)) {
      will_change(id, t);
      t.received = true;  // its parent may run again and ask for it
      continue;
    }
    erase_task(it);
  }
  return forgotten;
}

void State::unindex_lease(const Task& t) {
  if (t.state != TaskState::kLeased) return;
  auto it = leased_on.find(t.node);
  if (it == leased_on.end()) return;
  it->second.erase(t.id);
  if (it->second.empty()) leased_on.erase(it);
}

void State::index_done(const Task& t) {
  DoneList& d = done_of[t.caller];
  d.ids.push_back(t.id);
  if (d.ids.size() >= d.trim_at) trim(t.caller, d);
}

void State::trim(uint32_t caller, DoneList& d) {
  std::erase_if(d.ids, [&](uint64_t id) {
    auto it = tasks.find(id);
    return it == tasks.end() || it->second.state != TaskState::kDone || it->second.caller != caller;
  });
  std::sort(d.ids.begin(), d.ids.end());  // an id listed twice (claimed back, say) once
  d.ids.erase(std::unique(d.ids.begin(), d.ids.end()), d.ids.end());
  // At least half of what the next trim reads goes: each listing is read a
  // bounded number of times, however the list grows.
  d.trim_at = std::max<size_t>(1024, 2 * d.ids.size());
}

std::vector<uint64_t> State::done_ids(uint32_t caller) {
  auto it = done_of.find(caller);
  if (it == done_of.end()) return {};
  trim(caller, it->second);
  if (it->second.ids.empty()) {
    done_of.erase(it);
    return {};
  }
  return it->second.ids;
}

std::vector<uint64_t> State::leased_ids(const std::string& node) const {
  auto it = leased_on.find(node);
  return it == leased_on.end() ? std::vector<uint64_t>{}
                               : std::vector<uint64_t>(it->second.begin(), it->second.end());
}

void State::count_foreign(uint64_t id, uint32_t caller, int delta) {
  if (id >> 63) return;  // a child id: under no client's number
  const auto num = static_cast<uint32_t>(id >> 40);
  if (num == caller) return;  // its maker's own: the maker's record holds the number
  if (delta > 0) {
    ids_under[num] += 1;
    return;
  }
  auto u = ids_under.find(num);
  if (u != ids_under.end() && --u->second == 0) ids_under.erase(u);
}

void State::uncount_call(uint32_t caller) {
  auto it = calls_of.find(caller);
  if (it == calls_of.end()) return;
  if (--it->second == 0) calls_of.erase(it);
}

void State::apply_retire_client(const std::string& uuid) {
  auto it = clients.find(uuid);
  if (it == clients.end()) return;
  const uint32_t num = it->second.rec.num;
  uint64_t& seq = retired_seqs[num];
  seq = std::max(seq, it->second.rec.max_seq);
  dirty_retired.insert(num);  // also erased, if given out since: the store erases, then writes
  client_by_num.erase(num);
  done_of.erase(num);
  calls_of.erase(num);
  dirty_clients.erase(uuid);
  erased_clients.push_back(uuid);
  clients.erase(it);
}

void State::erase_task(TaskTable::iterator it) {
  // Owed to the snapshot being taken: its row must hold the task as it was
  // at the cut, since the journal after the cut replays this erasure.
  copy_if_owed(it->second);
  uncount_call(it->second.caller);
  count_foreign(it->first, it->second.caller, -1);
  unindex_lease(it->second);
  if (it->second.in_snapshot) erased_tasks.push_back(it->first);
  children.erase(it->first);
  tasks.erase(it);
}

void State::replay(std::string_view entry) {
  size_t off = 0;
  clock_ms = 0;  // an entry written before kClock existed has none
  while (off < entry.size()) {
    msgpack::object_handle oh = msgpack::unpack(entry.data(), entry.size(), off);
    const msgpack::object& o = oh.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) {
      throw std::runtime_error("journal entry is corrupt");
    }
    auto kind = static_cast<EventKind>(o.via.array.ptr[0].as<uint8_t>());
    const msgpack::object& body = o.via.array.ptr[1];
    switch (kind) {
      case EventKind::kClient: apply_client(body.as<ClientRecord>()); break;
      case EventKind::kRetireClient:
        apply_retire_client(body.as<std::string>());
        break;
      case EventKind::kPool: apply_pool(body.as<PoolRecord>()); break;
      case EventKind::kActor: apply_actor(body.as<ActorRecord>()); break;
      case EventKind::kAccept: apply_accept(body.as<TaskRecord>()); break;
      case EventKind::kLease: apply_lease(body.as<LeaseEvent>()); break;
      case EventKind::kFinish: apply_finish(body.as<FinishEvent>()); break;
      case EventKind::kRequeue: apply_requeue(body.as<RequeueEvent>()); break;
      case EventKind::kCommit: apply_commit(body.as<CommitEvent>()); break;
      case EventKind::kForget: apply_forget(body.as<std::vector<uint64_t>>()); break;
      case EventKind::kClaim:
        apply_claim(body.as<ClaimEvent>());
        break;
      case EventKind::kRemovePool:
        apply_remove_pool(body.as<std::string>());
        break;
      case EventKind::kClock:
        clock_ms = body.as<int64_t>();
        break;
      default: throw std::runtime_error("journal entry has an unknown event kind");
    }
  }
}

void State::recover(store::Loaded&& loaded) {
  for (auto& c : loaded.clients) apply_client(c);
  for (auto& p : loaded.pools) apply_pool(p);
  for (auto& a : loaded.actors) apply_actor(a);
  for (auto& t : loaded.tasks) {
    Task& held = apply_accept(std::move(t));
    // Its row holds it as it is: written again only once it changes (a
    // restarted head with a million waiting calls used to write them all
    // again at its first compaction).
    held.in_snapshot = true;
    held.dirty_gen = 0;
  }
  dirty_tasks.clear();  // only the rows just loaded were listed: the journal lists its own
  loaded.tasks = {};
  // Rows load in no particular order, so a child may have come before its
  // parent: index them again now that all are here.
  children.clear();
  std::vector<uint64_t> orphans;  // received, and their parent will not ask again
  for (const auto& [id, t] : tasks) {
    if (t.parent == 0) continue;
    auto p = tasks.find(t.parent);
    if (p != tasks.end() && p->second.state != TaskState::kDone) {
      children[t.parent].push_back(id);
    } else if (t.received) {
      orphans.push_back(id);
    }
  }
  for (uint64_t id : orphans) erase_task(tasks.find(id));
  for (const auto& entry : loaded.journal) replay(entry);
  // Leased tasks stay leased: their nodes may still run them and come back
  // (the head re-queues those whose node does not). Every mailbox is rebuilt
  // in arrival order within each priority.
  std::vector<const Task*> queued;
  for (auto& [id, t] : tasks) {
    if (t.state == TaskState::kQueued) queued.push_back(&t);
  }
  std::sort(queued.begin(), queued.end(), [](const Task* a, const Task* b) { return a->ord < b->ord; });
  for (const Task* t : queued) {
    auto p = pools.find(t->mailbox);
    if (p != pools.end()) enqueue(p->second, t->priority, t->id);
  }
}

void State::begin_snapshot() {
  if (snapshot_pending()) throw std::logic_error("a snapshot is already being taken");
  store::Compaction& c = snap_;
  c = store::Compaction{};
  for (const auto& name : dirty_pools) c.pools.push_back(pools.at(name).rec);
  for (uint64_t id : dirty_actors) c.actors.push_back(actors.at(id).rec);
  for (const auto& uuid : dirty_clients) c.clients.push_back(clients.at(uuid).rec);
  for (uint32_t num : dirty_retired) {
    c.clients.push_back(ClientRecord{retired_uuid(num), num, retired_seqs.at(num)});
  }
  c.erase_pools = std::move(erased_pools);
  c.erase_actors = std::move(erased_actors);
  c.erase_clients = std::move(erased_clients);
  dirty_pools.clear();
  dirty_actors.clear();
  dirty_clients.clear();
  dirty_retired.clear();
  erased_pools.clear();
  erased_actors.clear();
  erased_clients.clear();
  c.erase = std::move(erased_tasks);
  erased_tasks.clear();
  // A million records grown by doubling cost the head ~100 ms more.
  c.upsert.reserve(dirty_tasks.size());
  owed_ = std::move(dirty_tasks);
  dirty_tasks.clear();
  owed_next_ = 0;
  snap_gen = gen;
  gen = gen == UINT32_MAX ? 1 : gen + 1;  // 0 means "up to date"
}

void State::copy_to_snapshot(Task& t) {
  snap_.upsert.push_back(t);
  t.in_snapshot = true;
  t.dirty_gen = 0;
}

bool State::snapshot_step(std::chrono::microseconds budget, size_t max_records) {
  const auto start = std::chrono::steady_clock::now();
  const size_t last = owed_next_ + std::min(max_records, snapshot_left());
  while (owed_next_ < last) {
    // Looks at the clock every 1,024 records (about 0.2 ms).
    const size_t end = std::min(last, owed_next_ + 1024);
    for (; owed_next_ < end; ++owed_next_) {
      auto it = tasks.find(owed_[owed_next_]);
      // Gone (its row, if any, is erased), listed twice, or copied before it changed.
      if (it == tasks.end() || it->second.dirty_gen != snap_gen) continue;
      copy_to_snapshot(it->second);
    }
    // In microseconds: `budget` may be microseconds::max(), which nanoseconds overflow.
    const auto spent = std::chrono::steady_clock::now() - start;
    if (std::chrono::duration_cast<std::chrono::microseconds>(spent) >= budget) break;
  }
  return owed_next_ == owed_.size();
}

store::Compaction State::take_snapshot() {
  if (!snapshot_pending() || owed_next_ != owed_.size())
    throw std::logic_error("the snapshot is not complete");
  snap_gen = 0;
  owed_ = {};
  owed_next_ = 0;
  return std::move(snap_);
}

store::Compaction State::compaction() {
  begin_snapshot();
  snapshot_step(std::chrono::microseconds::max());
  return take_snapshot();
}

}  // namespace spotlight::head

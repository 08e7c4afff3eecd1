// The head's working state and the journal events that change it.
//
// Every durable change is an event: the live head records the event in the
// turn's journal entry and applies it; a restarting head applies the journal
// entries again after loading the compacted tables. Queues, credits and
// connections are not durable: they are rebuilt from the tasks and from the
// peers that say hello.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "head/latency.h"
#include "head/mailbox.h"
#include "head/sharded_map.h"
#include "store/store.h"
#include "transport/socket.h"

namespace spotlight::head {

using store::ActorRecord;
using store::ClientRecord;
using store::PoolRecord;
using store::TaskRecord;
using store::TaskState;

// ---- journal events --------------------------------------------------------
enum class EventKind : uint8_t {
  kClient = 1,   // ClientRecord
  kPool = 2,     // PoolRecord
  kActor = 3,    // ActorRecord (created, or placed with a new incarnation)
  kAccept = 4,   // TaskRecord as accepted
  kLease = 5,    // LeaseEvent
  kFinish = 6,   // FinishEvent
  kRequeue = 7,  // RequeueEvent: lease revoked or handed back, to the front of its mailbox
  kForget = 8,   // task ids whose results the caller has received
  kCommit = 9,   // CommitEvent: in-flight state of a leased task
  kClaim = 10,   // ClaimEvent: another client fetched the task and now receives its result
  kRemovePool =
      11,  // a pool's name: the pool and its actors are gone (its open tasks finished before)
  kRetireClient =
      12,  // a client's uuid: gone past the result TTL and holding no call, its record goes
  // int64 wall-clock ms: the accept time of the kAccept events after it in
  // the entry, whose records leave accepted_ms 0 (one stamp per turn, not
  // eight bytes per call on the hot path).
  kClock = 13,
};

struct LeaseEvent {
  uint64_t id = 0;
  uint64_t epoch = 0;
  uint64_t actor = 0;
  std::string node;
  MSGPACK_DEFINE(id, epoch, actor, node)
};

struct RequeueEvent {
  uint64_t id = 0;
  bool handed_back = false;  // a yield: the run does not count as an attempt
  MSGPACK_DEFINE(id, handed_back)
};

struct CommitEvent {
  uint64_t id = 0;
  uint64_t epoch = 0;
  Blob state;
  MSGPACK_DEFINE(id, epoch, state)
};

struct ClaimEvent {
  uint64_t id = 0;
  uint32_t caller = 0;  // the client number that now receives the result
  MSGPACK_DEFINE(id, caller)
};

struct FinishEvent {
  uint64_t id = 0;
  bool ok = false;
  int32_t kind = 0;
  std::string error_type;
  Blob result;
  MSGPACK_DEFINE(id, ok, kind, error_type, result)
};

// The events of one turn, packed back to back as [kind, body] arrays.
class Journal {
 public:
  template <class T>
  void add(EventKind k, const T& body) {
    pk_.pack_array(2);
    pk_.pack(static_cast<uint8_t>(k));
    pk_.pack(body);
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  std::string_view bytes() const { return {buf_.data(), buf_.size()}; }
  void clear() {
    buf_.clear();
    count_ = 0;
  }

 private:
  msgpack::sbuffer buf_;
  msgpack::packer<msgpack::sbuffer> pk_{buf_};
  size_t count_ = 0;
};

// ---- in-memory model -------------------------------------------------------
enum class ActorPhase { kPending, kPlacing, kReady };
const char* to_string(ActorPhase p);

struct Task : TaskRecord {
  // A row exists in the tasks table (or will, once the snapshot taken is written).
  bool in_snapshot = false;
  // The generation (State::gen) in which it last changed, listed in
  // State::dirty_tasks then; 0 when its row is up to date. A task of the
  // generation a snapshot is being taken of (State::snap_gen) is owed to it.
  uint32_t dirty_gen = 0;
  // For the pool's latency histograms (Pool::latency), not durable: when
  // this boot accepted the call, and when it last entered its mailbox or
  // its lease. Unset (epoch) for a call a restarted head took over.
  transport::Clock::time_point accepted_at{}, since{};
};

// A sequence-parallel group: sp_degree actors of one pool that run each of
// its tasks together, rank 0 (members[0]) holding the lease. Not durable: a
// restarted head forms its groups again, with new epochs.
struct SpGroupState {
  uint64_t id = 0;      // the group is named "<pool>/sp<id>"
  uint64_t epoch = 0;   // this formation; unique in the head's life and beyond (boot in the high bits)
  std::vector<uint64_t> members;  // actor ids, by rank
  std::vector<std::string> nodes;  // where each member was when the group formed
  uint64_t task = 0;    // the task it runs, 0 when idle
  uint64_t lease = 0;   // that task's lease epoch
};

struct Pool {
  PoolRecord rec;
  std::map<uint64_t, SpGroupState> groups;  // SP pools only
  uint64_t next_group = 1;
  Mailbox queue;  // accepted, not leased: the mailbox
  std::vector<uint64_t> members;
  uint64_t leased = 0;
  size_t cursor = 0;  // round-robin position over members
  PoolLatency latency;  // not durable
  // Placement::preempt: when the head may next look for running calls of
  // lower priority to ask to yield (at most every kPreemptCheck).
  transport::Clock::time_point next_preempt_check{};
};

struct Actor {
  ActorRecord rec;
  ActorPhase phase = ActorPhase::kPending;
  std::string node;  // node id while placing or ready
  int32_t credit = 0;  // tasks the actor asked for and has not been given
  uint64_t leased = 0;
  uint64_t completed = 0;
  uint64_t group = 0;  // the SP group it belongs to (its pool's), 0: none
};

struct Node {
  std::string id;
  std::string peer;  // ZeroMQ routing id
  std::string host;
  std::string market;
  std::string object_address;
  int64_t pid = 0;
  uint32_t session = 0;
  int32_t slots = 0;
  int32_t used = 0;
  std::set<std::string> types;
  bool alive = true;
  bool draining = false;  // had notice: gets no new work, its actors move away
  uint64_t leased = 0;    // tasks leased to it and not yet back
  transport::Clock::time_point last_seen;
  std::optional<transport::Clock::time_point> notice_at, emptied_at, gone_at;
  std::set<uint64_t> actors;
  // A probe the node has not answered yet (its request id): after an SP group
  // broke, its actors join a new group only once their node proved alive.
  uint64_t probe = 0;
  // The highest Done seq taken in, and the highest whose turn is committed:
  // frames to the node carry the latter, and the node forgets those results.
  uint64_t done_seen = 0, done_committed = 0;
};

struct Client {
  ClientRecord rec;
  std::string peer;  // empty while not connected in this boot
  std::string node;  // a node's connection for its tasks' calls: that node's id (from its hello)
  transport::Clock::time_point last_seen;
  // Since when it has been gone (peer empty; set by the first sweep after a
  // restart), and whether that is past the head's result_ttl: its stored
  // results then expire (Head::expire_results). Not durable.
  std::optional<transport::Clock::time_point> gone_since;
  bool expired = false;
};

// What the head knows. apply_* are the only mutators of durable fields.
class State {
 public:
  std::map<std::string, Pool> pools;
  std::unordered_map<uint64_t, Actor> actors;
  using TaskTable = ShardedMap<uint64_t, Task>;  // grows a part at a time, not in one stall
  TaskTable tasks;
  // The calls each running task made (TaskRecord::parent), while it is not done.
  std::unordered_map<uint64_t, std::vector<uint64_t>> children;
  std::map<std::string, Client> clients;  // by uuid
  std::unordered_map<uint32_t, std::string> client_by_num;
  std::map<std::string, Node> nodes;  // by node id
  std::unordered_map<std::string, std::string> node_by_peer;

  // Indexes that let the head's turn cost what waits, not what exists (a
  // cluster may hold 10,000 idle actors): the pending actors of each pool,
  // which place() visits; the pools whose mailboxes may hold calls, which
  // dispatch() visits; and the SP pools, which form_groups() visits. Kept in
  // step by apply_pool, apply_actor, apply_remove_pool, set_phase and enqueue;
  // an entry of `unplaced` or `waiting` may be empty until its visitor drops it.
  std::map<std::string, std::set<uint64_t>> unplaced;
  std::set<std::string> waiting;
  std::set<std::string> sp_pools;
  // The pools that keep away from each pool (Placement::away_from, under the
  // name they give): a member of pool X also avoids the nodes of every pool
  // in shunned_by[X], so the rule holds whichever of two pools is placed
  // first. Kept by apply_pool and apply_remove_pool.
  std::map<std::string, std::set<std::string>> shunned_by;
  // The pools placed beside or near another (Placement::beside), which
  // place() visits after the others. Kept by apply_pool and apply_remove_pool.
  std::set<std::string> beside_pools;
  // The leased tasks of each node (Task::node): what a node's hello, its
  // death and the end of a restart's grace period look at, without a walk
  // over every task the head holds. Kept by apply_accept, apply_lease,
  // apply_finish, apply_requeue and erase_task.
  std::unordered_map<std::string, std::unordered_set<uint64_t>> leased_on;
  // The ids leased on `node` now (a copy: requeueing them changes the index).
  std::vector<uint64_t> leased_ids(const std::string& node) const;
  // The finished tasks of each caller (TaskRecord::caller): what a client's
  // hello and the expiry of a gone client's results look at. Walking every
  // task instead took 60–340 ms per hello with a million calls queued, and a
  // restarted head hears every client and node again. Appended by
  // apply_accept, apply_finish and apply_claim and never trimmed on the hot
  // path: entries forgotten or claimed since are dropped when the list is
  // read, or when it has doubled since it was last trimmed.
  struct DoneList {
    std::vector<uint64_t> ids;
    size_t trim_at = 1024;
  };
  std::unordered_map<uint32_t, DoneList> done_of;
  // How many tasks each caller has (TaskRecord::caller), in any state: a
  // client with none left, gone past the result TTL, is retired (its record
  // dropped), so the head holds records of the clients that matter, not of
  // every driver that ever ran. Kept by apply_accept, apply_claim and erase_task.
  std::unordered_map<uint32_t, uint64_t> calls_of;
  uint64_t calls_by(uint32_t caller) const {
    auto it = calls_of.find(caller);
    return it == calls_of.end() ? 0 : it->second;
  }
  // The finished tasks whose result `caller` is to receive now.
  std::vector<uint64_t> done_ids(uint32_t caller);

  // The accept time given to a record that carries none (accepted_ms 0):
  // the entry's kClock, or the live head's turn. 0 while loading tables.
  int64_t clock_ms = 0;
  uint64_t next_ord = 1;
  uint64_t next_epoch = 1;
  uint64_t next_actor = 1;
  uint32_t next_client = 1;

  // Ids touched since the last snapshot began (Task::dirty_gen keeps each
  // listed once; forgotten ones are skipped), and rows to delete.
  std::vector<uint64_t> dirty_tasks;
  std::vector<uint64_t> erased_tasks;
  // Generations of change: gen is the current one; snap_gen, while a
  // snapshot is being taken, the one it is of (0: none).
  uint32_t gen = 1;
  uint32_t snap_gen = 0;
  // Tasks copied into a snapshot because they were about to change or go.
  uint64_t snapshot_copied_early = 0;
  // The same for pools, actors and clients (by name, id and uuid).
  std::set<std::string> dirty_pools;
  std::set<uint64_t> dirty_actors;
  std::set<std::string> dirty_clients;
  std::vector<std::string> erased_pools;
  std::vector<uint64_t> erased_actors;
  std::vector<std::string> erased_clients;
  bool meta_dirty() const {
    return !dirty_pools.empty() || !dirty_actors.empty() || !dirty_clients.empty() ||
           !dirty_retired.empty() || !erased_pools.empty() || !erased_actors.empty() ||
           !erased_clients.empty();
  }

  // A ClientRecord under this uuid prefix is no client: it keeps, for a
  // retired client's number, the highest sequence used under it
  // (retired_seqs), in the clients table, until the number is given out again.
  static constexpr const char* kRetiredPrefix = "~retired-";
  static std::string retired_uuid(uint32_t num) { return kRetiredPrefix + std::to_string(num); }
  // Retired numbers, with the highest sequence used under each; kept by
  // apply_retire_client and apply_client, written by compaction().
  std::map<uint32_t, uint64_t> retired_seqs;
  std::set<uint32_t> dirty_retired;
  // Tasks held under a number (their id's prefix; child ids aside) whose
  // result goes to another client (one fetched them): they outlive their
  // maker's record, and a number is given out again only when no record
  // holds it and no such task is left (its maker's own calls keep its
  // record: State::calls_of). Only fetched calls are counted, so a call's
  // path pays a comparison. Kept by apply_accept, apply_claim, erase_task.
  std::unordered_map<uint32_t, uint64_t> ids_under;
  void count_foreign(uint64_t id, uint32_t caller, int delta);
  void apply_client(const ClientRecord& c);
  // Drops a client's record (it holds no task; see calls_of). Its number is
  // not given out again: ids with its prefix may still be in flight somewhere.
  void apply_retire_client(const std::string& uuid);
  void apply_pool(const PoolRecord& p);
  // Drops the pool and its actors' records (its open tasks were finished first).
  void apply_remove_pool(const std::string& name);
  void apply_actor(const ActorRecord& a);
  // The only way an actor's phase changes (keeps `unplaced` in step).
  void set_phase(Actor& a, ActorPhase phase);
  // Puts a call in its pool's mailbox, at the back of its priority or, for a
  // lease that came back, at the front (keeps `waiting` in step).
  void enqueue(Pool& p, int32_t priority, uint64_t id, bool front = false);
  // `maker`: the record of the client that made the call (the live head has
  // it at hand), else found by the id's prefix.
  Task& apply_accept(TaskRecord t, ClientRecord* maker = nullptr);
  void apply_lease(const LeaseEvent& e);
  void apply_finish(const FinishEvent& e);
  void apply_requeue(const RequeueEvent& e);
  void apply_commit(const CommitEvent& e);
  void apply_claim(const ClaimEvent& e);
  // Drops the finished tasks among `ids` (with `caller`, only that client's);
  // returns the ids it dropped, or kept as received: a task's child call stays
  // until its parent is done (TaskRecord::parent).
  std::vector<uint64_t> apply_forget(const std::vector<uint64_t>& ids, uint32_t caller = 0);
  // Drops a finished task for good.
  void erase_task(TaskTable::iterator it);
  void uncount_call(uint32_t caller);
  // Takes a task out of leased_on if it is leased (before its state changes).
  void unindex_lease(const Task& t);
  // Lists a finished task under its caller (done_of).
  void index_done(const Task& t);
  void trim(uint32_t caller, DoneList& d);
  // Called before a task's durable fields change: a task still owed to the
  // snapshot being taken goes into it first, as it was at the snapshot's cut.
  void will_change(uint64_t id, Task& t) {
    if (t.dirty_gen == gen) return;
    copy_if_owed(t);
    dirty_tasks.push_back(id);
    t.dirty_gen = gen;
  }

  // Loads tables and replays the journal; then puts every queued task back in
  // its mailbox in arrival order. Leased tasks keep their leases.
  void recover(store::Loaded&& loaded);
  // Replays one journal entry; throws on a corrupt entry.
  void replay(std::string_view entry);
  // A compaction's snapshot, taken over several turns so that a million
  // changed tasks do not stop the head for a fifth of a second in one.
  // begin_snapshot() is called at the cut, right after a commit (the store
  // starts a new journal file there): it takes the pools, actors, clients and
  // erased rows at once and lists the changed tasks as owed. Each
  // snapshot_step() copies owed tasks for about `budget`; a task about to
  // change or be erased first is copied by will_change/erase_task, so every
  // row holds the task as it was at the cut, which the journal files after
  // the cut then replay from. take_snapshot() hands it over once no task is
  // owed. compaction() does all three at once.
  void begin_snapshot();
  bool snapshot_pending() const { return snap_gen != 0; }
  // Returns true once no task is owed. `max_records` caps the tasks it looks
  // at (tests, HeadOptions::snapshot_records).
  bool snapshot_step(std::chrono::microseconds budget, size_t max_records = SIZE_MAX);
  // The tasks listed as owed that snapshot_step has not looked at yet.
  size_t snapshot_left() const { return owed_.size() - owed_next_; }
  store::Compaction take_snapshot();
  store::Compaction compaction();

 private:
  void copy_to_snapshot(Task& t);
  // Before a task changes or goes: copies it if the snapshot still owes it.
  void copy_if_owed(Task& t) {
    if (!snapshot_pending() || t.dirty_gen != snap_gen) return;
    copy_to_snapshot(t);
    ++snapshot_copied_early;
  }
  store::Compaction snap_;      // the snapshot being taken
  std::vector<uint64_t> owed_;  // the ids listed as changed at its cut
  size_t owed_next_ = 0;        // how far snapshot_step has gone through them
};

}  // namespace spotlight::head

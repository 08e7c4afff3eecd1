// The head's durable store. The head keeps its working state in memory and
// writes every change to the store before acknowledging it: each event-loop
// turn appends ONE journal entry (all events of the turn, group-committed in
// one transaction); from time to time the live state is compacted into
// tables and the journal is dropped. Opening a store reads the tables and
// the journal back, so a restarted head resumes where the last commit left it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spotlight/codec.h"

namespace spotlight::store {

struct PoolRecord {
  std::string name;
  std::string type;
  std::string market;
  int32_t size = 1;
  int32_t slots_per_actor = 1;
  int32_t prefetch = 16;
  int32_t sp_degree = 1;  // > 1: members run calls in SP groups of this degree
  // Placement::strategy and node. Last, so that rows written before they
  // existed still load (as "spread" and any node).
  std::string strategy = "spread";
  std::string node{};  // an initializer, so that brace lists may leave it out
  // Placement::aging, max_per_node, prefer, beside, away_from, preempt and
  // beside_soft; last, for the same reason.
  int64_t aging_ms = 0;
  int32_t max_per_node = 0;
  std::string prefer{};
  std::string beside{};
  std::string away_from{};
  bool preempt = false;
  bool beside_soft = false;
  MSGPACK_DEFINE(name, type, market, size, slots_per_actor, prefetch, sp_degree, strategy, node,
                 aging_ms, max_per_node, prefer, beside, away_from, preempt, beside_soft)
};

struct ActorRecord {
  uint64_t id = 0;
  std::string pool;
  uint32_t index = 0;
  uint32_t incarnation = 0;  // grows on every placement
  bool has_state = false;    // the latest save() of a checkpointable actor
  Blob state;
  MSGPACK_DEFINE(id, pool, index, incarnation, has_state, state)
};

struct ClientRecord {
  std::string uuid;
  uint32_t num = 0;
  // The highest sequence (task id & 2^40 - 1) of its calls ever accepted: a
  // resubmission at or below it that the head no longer holds was received
  // (by this client or one that fetched it) and must not run again. Last, so
  // that rows written before it existed load (as 0).
  uint64_t max_seq = 0;
  MSGPACK_DEFINE(uuid, num, max_seq)
};

enum class TaskState : int32_t { kQueued = 0, kLeased = 1, kDone = 2 };
}  // namespace spotlight::store
MSGPACK_ADD_ENUM(spotlight::store::TaskState);
namespace spotlight::store {

struct TaskRecord {
  uint64_t id = 0;
  uint64_t ord = 0;  // arrival order at the head: FIFO within a mailbox
  uint32_t caller = 0;
  std::string mailbox;
  std::string method;
  Blob args;
  TaskState state = TaskState::kQueued;
  uint64_t epoch = 0;  // lease epoch while leased
  uint64_t actor = 0;
  std::string node;
  uint32_t attempts = 0;      // runs started and not handed back by a yield
  uint32_t max_attempts = 3;  // runs lost to crashes before the task fails
  bool has_checkpoint = false;
  Blob checkpoint;  // the last TaskContext::commit of any attempt
  bool ok = false;
  int32_t kind = 0;
  std::string error_type;
  Blob result;
  // Wall-clock time (ms since the epoch) by which a run must start; 0: none.
  // Last, so that rows written before it existed still load (as 0).
  int64_t deadline_ms = 0;
  // A call made by a running task: that task's id (wire/child_ids.h). While
  // the parent is not done, its children stay after their results are
  // received (`received`), so that a second run of the parent gets the same
  // answers instead of running them again. Last, for the same reason.
  uint64_t parent = 0;
  bool received = false;
  // CallOptions::priority: higher is leased first (head/mailbox.h). Last, for
  // the same reason.
  int32_t priority = 0;
  // Wall-clock time (ms since the epoch) the head accepted the call: how long
  // it has waited, for priority aging (Placement::aging) and listings, across
  // restarts. Last, for the same reason (0: accepted before it existed).
  int64_t accepted_ms = 0;
  MSGPACK_DEFINE(id, ord, caller, mailbox, method, args, state, epoch, actor, node, attempts,
                 max_attempts, has_checkpoint, checkpoint, ok, kind, error_type, result,
                 deadline_ms, parent, received, priority, accepted_ms)
};

struct Loaded {
  uint64_t boot = 0;  // this start's number: one more than the last
  std::vector<PoolRecord> pools;
  std::vector<ActorRecord> actors;
  std::vector<ClientRecord> clients;
  std::vector<TaskRecord> tasks;
  std::vector<std::string> journal;  // entries after the last compaction, oldest first
};

// What changed since the last compaction. Rows of pools, actors and clients
// are written when they changed, as tasks are: rewriting all of them each
// time cost 10,000 idle actors a fifth of the synchronous call rate.
struct Compaction {
  std::vector<PoolRecord> pools;         // created or changed
  std::vector<ActorRecord> actors;       // created or changed
  std::vector<ClientRecord> clients;     // created or changed
  std::vector<std::string> erase_pools;  // removed (deleted before the upserts)
  std::vector<uint64_t> erase_actors;    // removed with their pool
  std::vector<std::string> erase_clients;  // retired (State::apply_retire_client)
  std::vector<TaskRecord> upsert;  // live tasks changed since the last compaction
  std::vector<uint64_t> erase;     // tasks gone since the last compaction
};

class Store {
 public:
  virtual ~Store() = default;
  // Reads everything back and records a new boot.
  virtual Loaded open() = 0;
  // Appends one journal entry and commits it.
  virtual void append(std::string_view entry) = 0;
  // Folds everything appended so far into the tables: appends continue at
  // once, in a new journal file, while a thread writes the tables (one
  // transaction) and then drops the older files. Waits for a compaction still
  // running first. A compaction that failed leaves the store refusing every
  // write (append, compact, finish_compaction throw), since the head has
  // let go of that snapshot; a restart replays what the files hold.
  virtual void compact(Compaction c) = 0;
  // The first half of compact(), for a head that takes its snapshot over
  // several turns: what was appended so far is to be folded by the next
  // compact(), and appends go to a new journal file from here. Waits for a
  // compaction still running first. compact() called later writes the tables
  // as of this cut; the snapshot handed to it must be the state at the cut.
  virtual void begin_compaction() = 0;
  virtual bool compacting() const = 0;
  // Waits for the running compaction, if any; throws if one failed.
  virtual void finish_compaction() = 0;
  virtual size_t journal_entries() const = 0;
  virtual size_t journal_bytes() const = 0;  // of the entries since the last compaction
  virtual std::string path() const = 0;
};

enum class Durability {
  kProcess,  // survives kill -9 of the head (WAL, synchronous=NORMAL)
  kMachine,  // also survives power loss: fsync on every commit (synchronous=FULL)
};

// Throws std::runtime_error with the reason when the file cannot be used
// (unreadable, not a Spotlight store, or held by another running head).
std::unique_ptr<Store> open_sqlite(const std::string& path, Durability d = Durability::kProcess);

}  // namespace spotlight::store

// What `spotlight status` shows: the cluster as the head sees it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <msgpack.hpp>
#include <string>
#include <utility>
#include <vector>

namespace spotlight {

struct NodeStatus {
  std::string id;
  std::string host;
  std::string market;
  std::string state;  // alive, dead
  int32_t slots = 0;
  int32_t used = 0;
  int64_t pid = 0;
  int64_t last_heartbeat_ms = 0;  // milliseconds since the head last heard from it
  uint64_t running = 0;           // tasks leased to it
  // Milliseconds since: it had notice (began to drain); its last lease went
  // after the notice; it was declared gone. -1: not (yet).
  int64_t notice_ms_ago = -1;
  int64_t emptied_ms_ago = -1;
  int64_t gone_ms_ago = -1;
  std::string object_address{};  // HOST:PORT of its object server
  MSGPACK_DEFINE(id, host, market, state, slots, used, pid, last_heartbeat_ms, running,
                 notice_ms_ago, emptied_ms_ago, gone_ms_ago, object_address)
};

struct ActorStatus {
  uint64_t id = 0;
  std::string pool;
  std::string node;   // empty while waiting for a slot
  std::string state;  // pending, placing, ready
  uint32_t incarnation = 0;
  uint64_t leased = 0;
  uint64_t completed = 0;
  MSGPACK_DEFINE(id, pool, node, state, incarnation, leased, completed)
};

// Upper bounds (seconds) of the latency buckets: from what a head's turn
// can tell apart to a rollout or a training step.
inline constexpr std::array<double, 20> kLatencyBoundsS = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    300,  1800};

// How long some step of a pool's calls took, as the head saw it (its own
// clock, in this boot: a call accepted before a restart is not counted).
struct Latency {
  // Calls per bucket: buckets[i] took at most kLatencyBoundsS[i] seconds
  // and more than the bound before; the last, more than every bound. Empty
  // while count is 0.
  std::vector<uint64_t> buckets;
  double sum_s = 0;
  uint64_t count = 0;
  // The q-quantile (0 <= q <= 1) in seconds, by linear interpolation within
  // its bucket (so at most one bucket off); 0 with no samples; the last
  // bound for calls beyond it.
  double quantile(double q) const;
  MSGPACK_DEFINE(buckets, sum_s, count)
};
// "850 us", "12.5 ms", "3.20 s".
std::string human_seconds(double seconds);
// "p50 / p99" of `l` in human_seconds, or "-" with no samples.
std::string p50_p99(const Latency& l);

struct PoolStatus {
  std::string name;
  std::string type;
  std::string market;
  int32_t size = 0;
  int32_t placed = 0;
  uint64_t queued = 0;  // mailbox depth: accepted, not yet leased
  uint64_t leased = 0;
  // The queued calls per priority (CallOptions::priority), highest first;
  // only priorities with calls waiting.
  std::vector<std::pair<int32_t, uint64_t>> by_priority;
  // Each time a call left the mailbox: how long it had waited there (since
  // it was accepted, or put back after a lost or handed-back lease).
  Latency waited{};
  // Each result from an actor (its value or the method's error): how long
  // since the lease, and since the call was accepted.
  Latency ran{};
  Latency answered{};
  int64_t aging_ms = 0;  // Placement::aging; 0: strict priorities
  // Why members wait for a node, by the head's rules ("2 member(s) wait:
  // none of 3 node(s) fits (1 not on market spot, 2 fewer than 2 free
  // slot(s))"); empty when none waits.
  std::string waiting_for{};  // (an initializer: brace lists may leave it out)
  // Its placement rules beyond the market and the default spread ("pack, at
  // most 1 per node, beside pool explorers"); empty when there are none.
  std::string placement{};
  MSGPACK_DEFINE(name, type, market, size, placed, queued, leased, by_priority, waited, ran,
                 answered, aging_ms, waiting_for, placement)
};

// A sequence-parallel group as the head formed it.
struct SpGroupStatus {
  std::string pool;
  std::string name;
  uint64_t epoch = 0;
  std::vector<uint64_t> members;  // actor ids, by rank
  uint64_t task = 0;              // the task it runs, 0 when idle
  MSGPACK_DEFINE(pool, name, epoch, members, task)
};

struct ClusterStatus {
  uint64_t boot = 0;  // grows on every head start over the same store
  std::string store;
  std::vector<NodeStatus> nodes;
  std::vector<PoolStatus> pools;
  std::vector<ActorStatus> actors;
  uint64_t tasks_live = 0;  // accepted and not yet acknowledged by their caller
  std::map<std::string, uint64_t> counters;  // bad frames by reason, calls, results...
  std::vector<SpGroupStatus> groups;
  // HOST:PORT of the head's HTTP endpoint (/metrics, /healthz); empty when off.
  std::string metrics_address;
  MSGPACK_DEFINE(boot, store, nodes, pools, actors, tasks_live, counters, groups, metrics_address)
};

// The status as one JSON object: what `spotlight status --json` prints and
// the head's HTTP endpoint serves at /status.json (`--metrics-port`).
std::string status_json(const ClusterStatus& s);

// One call as the head holds it (Runtime::tasks, `spotlight tasks`).
struct TaskInfo {
  uint64_t id = 0;      // what Runtime::cancel and Runtime::fetch take
  std::string mailbox;  // the actor or pool called
  std::string method;
  std::string state;  // queued, leased, done
  int32_t priority = 0;
  uint32_t attempts = 0;  // runs started and not handed back by a yield
  uint32_t max_attempts = 0;
  uint32_t caller = 0;  // the number of the client that receives its result
  uint64_t parent = 0;  // the task whose run made this call; 0: a driver's
  std::string node;     // leased: the node and actor that hold it
  uint64_t actor = 0;
  bool has_checkpoint = false;  // an attempt committed state (TaskContext::commit)
  int64_t deadline_ms = 0;      // must start by (ms since the epoch); 0: no deadline
  std::string outcome;          // done: "ok", or the error kind (cancelled, method...)
  uint64_t args_bytes = 0;
  // Milliseconds since the head accepted it (by the wall clock for a call an
  // earlier boot accepted), and, while queued or leased, since it entered
  // that state in this boot (its mailbox again after a lost lease, or its
  // current lease): a straggler stands out. -1 where the head does not know
  // (in_state_ms: done, or unchanged since a restart).
  int64_t age_ms = -1;
  int64_t in_state_ms = -1;
  MSGPACK_DEFINE(id, mailbox, method, state, priority, attempts, max_attempts, caller, parent, node,
                 actor, has_checkpoint, deadline_ms, outcome, args_bytes, age_ms, in_state_ms)
};

// Which calls Runtime::tasks lists: every filter left empty matches all.
struct TaskQuery {
  std::string mailbox{};  // (initializers: a designated list may name only some fields)
  std::string state{};    // queued, leased or done
  uint32_t limit = 100;  // at most this many, the earliest accepted first (1..100,000)
  std::string method{};  // calls of this method
  std::string node{};    // calls leased on this node (implies state leased)
  // Finished calls that ended so (implies state done): "ok", "error" (any
  // failure), or one error kind as TaskInfo::outcome names it ("cancelled",
  // "method", "crashed", ...).
  std::string outcome{};
  uint32_t caller = 0;  // calls whose result goes to this client number (TaskInfo::caller); 0: any
  MSGPACK_DEFINE(mailbox, state, limit, method, node, outcome, caller)
};

struct TaskList {
  std::vector<TaskInfo> tasks;  // in the order the head accepted them
  uint64_t matching = 0;        // calls that matched, listed or not
  MSGPACK_DEFINE(tasks, matching)
};

}  // namespace spotlight

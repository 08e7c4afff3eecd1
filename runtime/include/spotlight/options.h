// Placement and call options.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace spotlight {

// Where the members of a pool (or a lone actor) may run.
struct Placement {
  std::string market = "any";  // "reserved", "spot" or "any"
  int slots_per_actor = 1;     // slots one member occupies on its node
  int size = 1;                // members in the pool; a lone actor is a pool of one
  int prefetch = 16;           // tasks a member may hold leased ahead of running them
  // Members per sequence-parallel group: with d > 1 the head forms groups of
  // d members, and each call runs on every member of one group (TaskContext::group()).
  int sp_degree = 1;
  // How members are spread over the nodes that fit: "spread" puts each on
  // the node with the most free slots; "pack" on a node that already hosts
  // members of the pool, else the one with the fewest free slots that fit
  // (Ray's PACK): an SP group's members, or siblings that copy weights from
  // each other, then share a machine.
  std::string strategy = "spread";
  // Only on this node (its id, as `spotlight status` shows it): members
  // wait for a free slot there, and for the node if it has not joined.
  std::string node;
  // Anti-affinity: at most this many members on one node (0: no limit).
  // Members beyond it wait for another node rather than double up, so one
  // preemption takes at most this many of the pool (Ray's STRICT_SPREAD, at 1).
  int max_per_node = 0;
  // Soft affinity: members go to this node while it fits them (market, type,
  // free slots, max_per_node), and elsewhere by the strategy when it does
  // not or has not joined: beside the data it caches, say.
  std::string prefer;
  // Affinity between pools: members go only to nodes that host a member of
  // the pool named here (placed or being placed), and wait while none does:
  // reward actors beside the explorers whose images they score, so that no
  // image crosses the network. It holds when a member is placed: one whose
  // neighbour later moves stays where it is (Kubernetes' "required during
  // scheduling, ignored during execution").
  std::string beside;
  // `beside` as a preference only (near_pool): members go to a node with a
  // member of that pool while one fits them, and elsewhere by the strategy
  // when none does, rather than wait (a neighbour's node may be full).
  bool beside_soft = false;
  // Anti-affinity between pools: members never share a node with a member of
  // the pool named here, whichever of the two is placed first, so that one
  // preemption takes members of at most one of them (a trainer and the
  // explorers that hold the only other copy of its weights, say).
  std::string away_from;
  // Preemption by priority: a call that waits for a member while members run
  // calls of lower priority (with aging, of a later virtual start) asks one
  // of them to yield: its TaskContext::should_yield() turns true, and a task
  // that yields (after a commit) goes back to the front of its priority in
  // the mailbox and resumes later from that commit; the waiting call runs on
  // that member next. Each waiting call asks at most one running call. For
  // pools whose tasks check should_yield() between steps (a task that never
  // does runs to its end, and the call it was asked for waits behind it).
  // Not with sequence parallelism.
  bool preempt = false;
  // Priority aging: a call waiting in the mailbox gains one priority level
  // per `aging` it has waited since the head accepted it, so a call of
  // priority p runs before every call of priority p + k that came more than
  // k × aging after it, however many of those keep coming. The head leases,
  // and each member runs the calls it holds, in that order (the earliest
  // `accepted - priority × aging` first); the wait counts across head
  // restarts. 0: strict priorities (CallOptions::priority), where a
  // low-priority call waits as long as higher ones keep coming. At most 30 days.
  std::chrono::milliseconds aging{0};

  Placement& slots(int n) { slots_per_actor = n; return *this; }
  Placement& members(int n) { size = n; return *this; }
  Placement& ahead(int n) { prefetch = n; return *this; }
  Placement& sequence_parallel(int d) { sp_degree = d; return *this; }
  Placement& pack() {
    strategy = "pack";
    return *this;
  }
  Placement& on_node(std::string id) {
    node = std::move(id);
    return *this;
  }
  Placement& at_most_per_node(int n) {
    max_per_node = n;
    return *this;
  }
  Placement& prefer_node(std::string id) {
    prefer = std::move(id);
    return *this;
  }
  Placement& beside_pool(std::string pool) {
    beside = std::move(pool);
    beside_soft = false;
    return *this;
  }
  Placement& near_pool(std::string pool) {
    beside = std::move(pool);
    beside_soft = true;
    return *this;
  }
  Placement& away_from_pool(std::string pool) {
    away_from = std::move(pool);
    return *this;
  }
  Placement& preemptive(bool on = true) {
    preempt = on;
    return *this;
  }
  Placement& age_priorities(std::chrono::milliseconds per_level) {
    aging = per_level;
    return *this;
  }
};

inline Placement on_market(std::string market) {
  Placement p;
  p.market = std::move(market);
  return p;
}

// Per-call options (ActorHandle::with).
struct CallOptions {
  // Runs lost with their node before the call fails with CrashedError; 0: the
  // head's default (3). Yields on notice never count.
  uint32_t max_attempts = 0;
  // Every run of the call must start within this long of the head accepting
  // it, or the call fails with TimeoutError and does not run (again): a
  // rollout for an iteration the trainer has left behind is not worth a GPU.
  // A run that started goes on to its end. 0: no deadline.
  std::chrono::milliseconds deadline{0};
  // Calls of higher priority leave their mailbox first; equal priorities keep
  // arrival order (a lone actor: per-caller FIFO). It orders waiting calls,
  // and the calls an actor holds leased ahead (Placement::prefetch); it
  // never stops a run that started. A pool's rollouts that an iteration
  // needs can thus overtake speculative ones (seed exploration, say).
  // Placement::aging bounds how long a lower priority can be overtaken.
  int32_t priority = 0;
};

struct ConnectOptions {
  std::chrono::milliseconds heartbeat{250};
  // How long connect() waits for the head to answer before throwing ConnectionError.
  std::chrono::milliseconds connect_timeout{10000};
  // Calls this client keeps in flight at most (each holds its arguments until
  // its result comes). A call over the bound waits for room, or, with
  // `wait_when_full = false`, fails at once with RejectedError.
  size_t max_pending = 100000;
  bool wait_when_full = true;
  // The cluster key (64 hex digits, as `spotlight head` printed it); "none"
  // for a head started with --insecure; empty: the process's key
  // (spotlight::use_cluster_key, else $SPOTLIGHT_CLUSTER_KEY, else none).
  std::string cluster_key;
  // The most bytes Runtime::objects() keeps in this process (its puts, and
  // the copies its gets made).
  uint64_t object_store_mb = 2048;
};

// A head and N nodes started as child processes on loopback.
struct ClusterOptions {
  int nodes = 2;
  int slots = 2;                       // per node
  std::string market = "reserved";     // of every node started here
  std::vector<std::string> load;       // actor libraries each node loads (paths)
  std::string store;                   // head store path; empty: a fresh temporary file
  std::string spotlight_bin;           // path of the `spotlight` binary; empty: found beside this program
  std::vector<std::string> head_args;  // extra `spotlight head` arguments
  bool quiet = true;                   // send children's logs to files instead of stderr
  // Without a cluster key: plain TCP, anyone on this machine may connect. By
  // default the cluster uses this process's key, or makes one that becomes it.
  bool insecure = false;
};

}  // namespace spotlight

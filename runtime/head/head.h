// The head: one process that owns the cluster's truth (nodes, actors,
// mailboxes, leases, results). A single-threaded event loop over a ZeroMQ
// ROUTER; every turn drains the waiting frames, applies them, places actors,
// leases tasks to actors that asked for work, commits the turn's journal
// entry, and only then answers callers.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "head/metrics.h"
#include "head/metrics_server.h"
#include "head/state.h"
#include "spotlight/errors.h"
#include "store/store.h"
#include "transport/handshake_monitor.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight::head {

struct HeadOptions {
  std::string bind_host = "0.0.0.0";
  int port = 6380;  // 0: a free port
  std::string advertise_host;  // the host printed in the join command; default: hostname
  std::string store_path = "spotlight-head.db";
  store::Durability durability = store::Durability::kProcess;
  size_t max_frame = transport::kDefaultMaxFrame;
  // Calls one mailbox may hold waiting; a call over the bound is refused with
  // a clear error, so the head's memory never grows without bound.
  size_t max_mailbox = 1000000;
  std::chrono::milliseconds heartbeat{250};
  // A node silent this long is dead. With heartbeats every 250 ms and the
  // check every 50 ms, a killed node is declared dead 600-900 ms after it died.
  std::chrono::milliseconds liveness{850};
  // A compaction folds the journal into tables when either bound is reached;
  // the bytes bound keeps each one short (and a restart's replay) under load.
  size_t compact_every = 4096;               // journal entries between compactions
  size_t compact_bytes = 64u << 20;          // journal bytes between compactions
  // For tests: a compaction's snapshot copies at most this many tasks per
  // turn (0: as many as about 2 ms allow), so that it spans many turns.
  size_t snapshot_records = 0;
  std::string port_file;                     // written with the bound port once listening
  // Who may connect (transport/cluster_key.h): 64 hex digits, "none" (no
  // CURVE: anyone who reaches the port), or empty: the key kept beside the
  // store in STORE.key, made there on first start. A key given is kept there too.
  std::string cluster_key;
  // Results nobody receives: those of a client gone this long (its process
  // died, or it closed before they came) are dropped, unless another client
  // fetched them first (Runtime::fetch). 0: kept until fetched.
  std::chrono::milliseconds result_ttl{std::chrono::hours(24)};
  // Client numbers (a client's number is its task ids' prefix): once this
  // many were given out, the numbers of retired clients (gone past
  // result_ttl, holding no call) are given out again, so the head serves
  // new drivers for ever and holds at most this many client records at once.
  // 2 to 2^23 - 1 (a number must fit 23 bits: bit 63 of a task id marks
  // child calls).
  uint32_t max_clients = (uint32_t{1} << 23) - 1;
  // The HTTP endpoint (GET /metrics in Prometheus's format, /healthz): off
  // when < 0, 0 picks a free port. It has no key: by default only this
  // machine reaches it.
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
};

class Head {
 public:
  explicit Head(HeadOptions options);
  ~Head();
  int port() const { return port_; }
  uint64_t boot() const { return boot_; }
  const transport::ClusterKey& key() const { return key_; }
  // HOST:PORT of the metrics endpoint; empty when off.
  std::string metrics_address() const;
  // Serves until a Stop message or request_stop().
  void run();
  // Async-signal-safe.
  void request_stop() { stop_requested_.store(true); }

 private:
  struct Outbox {
    std::vector<std::string> frames;  // sent first, in order
    wire::Tasks tasks;
    wire::Results results;
    wire::Accepted accepted;
    std::vector<std::string> last;  // sent after everything else (Sync replies)
    size_t batch_bytes = 0;
  };

  void turn();
  void check_handshakes();
  void handle(transport::RoutedMessage& m);
  void on_hello_node(const std::string& peer, const wire::HelloNode& h, uint64_t rid);
  void on_hello_client(const std::string& peer, const wire::HelloClient& h, uint64_t rid);
  // Forgets stored results of `caller` that it no longer awaits.
  void forget_received(uint32_t caller, const std::vector<uint64_t>& awaiting);
  void on_create_pool(const std::string& peer, const wire::CreatePool& c, uint64_t rid);
  void on_calls(Client& c, wire::Calls& calls);
  void on_ack(const Client& c, const wire::AckResults& a);
  // Makes `c` the caller of each call fetched, durably, and sends the results
  // it has (the rest follow when they are stored).
  void on_fetch(Client& c, const wire::Fetch& f);
  // Makes `c` the caller of `t`, durably (a Claim event); the previous
  // caller, if connected, gets a rejection saying `why`.
  void claim(Task& t, const Client& c, const std::string& why);
  // A call made by a running task, if the head holds it already (the parent
  // runs again): `c` becomes its caller and hears of it as a resubmission.
  // Returns false for a call to accept as new; rejects a forged id, and a
  // call from a node that does not run the parent now.
  bool on_known_child_call(Client& c, const wire::Call& call, std::vector<uint64_t>& accepted);
  // Task `task_id` holds a lease on `node` now (or runs there in its SP group).
  bool runs_on(uint64_t task_id, const std::string& node) const;
  // A kRejected result for call `id` to `peer`, in its batch of results.
  void queue_rejection(const std::string& peer, uint64_t id, const std::string& why);
  // Adds `r` to the caller's batch of results, closing the batch at about kBatchBytes.
  void queue_to_caller(const std::string& peer, wire::Result r);
  // Why the head does not hold call `id`, as far as its client's high-water mark tells.
  std::string not_held_message(uint64_t id) const;
  static constexpr uint64_t kSeqMask =
      (uint64_t{1} << 40) - 1;  // task id: client number << 40 | sequence
  static constexpr uint32_t kMaxClients = uint32_t{1} << 23;  // keeps bit 63 for child ids
  // A number for a new client: the next never given, else one a retired
  // client left (HeadOptions::max_clients); 0 when every number is held.
  uint32_t free_client_number();
  uint32_t reuse_cursor_ = 1;  // where the search for a retired number goes on
  static constexpr int64_t kMaxDeadlineMs = int64_t{365} * 24 * 3600 * 1000;
  static constexpr int64_t kMaxAgingMs = int64_t{30} * 24 * 3600 * 1000;  // Mailbox::pop_front
  static constexpr size_t kMaxFetchIds = size_t{1} << 20;
  static std::string claimed_message(uint64_t id) {
    return "call " + std::to_string(id) +
           " was fetched by another client, which receives its result";
  }
  // Cancelling calls (cancel.cc): what one Cancel request changes besides
  // the tasks themselves.
  struct Cancelling {
    std::map<std::string, std::unordered_set<uint64_t>> dequeued;  // by mailbox
    // By a node's routing id: the tasks it must drop or stop.
    std::map<std::string, wire::Cancel> nodes;
  };
  void on_cancel(const std::string& peer, const wire::Cancel& x, uint64_t rid);
  // Finishes `t` (and, with `children`, the open calls its runs made) as
  // kCancelled, durably, saying `why`.
  void cancel_task(Task& t, bool children, const std::string& why, Cancelling& c);
  // Ends a cancelled task's lease and lists the nodes that run it.
  void stop_leased(Task& t, Cancelling& c);
  void on_placed(Node& n, const wire::Placed& p);
  // Fails a call whose run could not start before its deadline (kTimedOut).
  void time_out(Task& t);
  // Times out the queued calls whose deadline passed and takes them out of their mailboxes.
  void expire_deadlines();
  // Drops the stored results of clients gone for longer than result_ttl.
  void expire_results();
  void on_done(Node& n, wire::Done& d);
  void on_commits(Node& n, const wire::Commits& c);
  void on_drain(const std::string& peer, Node* from_node, const wire::Drain& d, uint64_t rid);
  // Fails the pool's open calls, frees its actors' slots (Unplace to their
  // nodes) and drops it, durably; answers Ok after the commit.
  void on_remove_pool(const std::string& peer, const wire::RemovePool& r, uint64_t rid);
  void start_drain(Node& n);
  // Takes an actor off its node so that place() puts it elsewhere.
  void move_actor(Actor& a);
  // After a lease on `n` ended (a result, a cancel): a draining node with no
  // lease left is empty, and `a`, if it holds no lease there, moves.
  void lease_ended_on(Node& n, Actor* a);
  void hand_back(std::vector<Task*>& tasks);
  void on_stop(const std::string& peer, uint64_t rid);
  void on_kv_set(const std::string& peer, wire::KvSet& s, uint64_t rid);
  void on_kv_get(const std::string& peer, const wire::KvGet& g, uint64_t rid);
  void on_kv_delete(const std::string& peer, const wire::KvDelete& d, uint64_t rid);
  void expire_kv_waiters();
  // A get by key that may wait (the KV, the object directory): false, with
  // an error sent, when the key or the wait is out of range.
  bool check_keyed_get(const std::string& peer, uint64_t rid, const char* what, const std::string& key,
                       int64_t wait_ms);
  // The object directory (objects.cc): locations only, in memory.
  void on_object_add(const std::string& peer, const wire::ObjectAdd& a, uint64_t rid);
  // A node that is alive, or a driver's store whose client is connected.
  bool holder_alive(const std::string& holder) const;
  void on_object_drop(const wire::ObjectDrop& d);
  void on_object_where(const std::string& peer, const wire::ObjectWhere& w, uint64_t rid);
  void expire_object_waiters();
  // Forgets every copy `node_id` held (it died or started a new session).
  void drop_objects_of(const std::string& node_id);
  ClusterStatus status() const;
  // The calls that match `q` (task_list.cc); throws std::invalid_argument for a bad query.
  TaskList list_tasks(const TaskQuery& q) const;
  static constexpr uint32_t kMaxTaskList = 100000;

  void place();
  // Places the waiting members of one pool (an entry of state_.unplaced)
  // while nodes take them: `placed` when it placed one, `follows` when a
  // pool that must be beside another found no node. The next entry.
  std::map<std::string, std::set<uint64_t>>::iterator place_members(
      std::map<std::string, std::set<uint64_t>>::iterator pit, bool& placed, bool& follows);
  // The node a member of pool `p` goes to now (Placement::strategy, node), or nullptr.
  Node* pick_node(const std::string& pool_name, const store::PoolRecord& p);
  // Why node `n` cannot take a member of pool `p` now, the first reason in
  // this order; `members` gets the pool's members there when `count` or a
  // rule that looks at the node's actors needs them (placement.cc).
  enum class Unfit {
    kGone,
    kDraining,
    kMarket,
    kPinned,
    kType,
    kSlots,
    kPerNode,
    kAway,    // hosts a pool it must not share a node with (Placement::away_from)
    kBeside,  // hosts no member of Placement::beside
    kFits
  };
  struct Seen {
    int members = 0;         // of the pool, on the node
    bool neighbour = false;  // a member of Placement::beside is there
  };
  Unfit fit(const Node& n, const std::string& pool_name, const store::PoolRecord& p, bool count,
            Seen& seen) const;
  // For status: a pool's rules beyond its market and the default spread.
  static std::string placement_rules(const store::PoolRecord& p);
  // For status: why the pool's unplaced members (`waiting`, not empty) wait.
  static constexpr size_t kExplainedPools = 256;
  std::string why_waiting(const std::string& pool_name, const store::PoolRecord& p,
                          const std::set<uint64_t>& waiting) const;
  void dispatch();
  // Placement::preempt (priority_preemption.cc): while calls wait and every
  // member is busy, leases each waiting call, most urgent first, to a member
  // that runs a less urgent one (beyond its credit: the node asks that one
  // to yield). Looks at most every kPreemptCheck per pool.
  void preempt_for(Pool& pool);
  static constexpr auto kPreemptCheck = std::chrono::milliseconds(10);
  // A call's place in its mailbox's order: lower leaves first.
  int64_t urgency(const Task& t, int64_t aging_ms) const;
  // Leases the front task of `pool` to `actor` (with `group`, to every member
  // of that SP group, `actor` being its rank 0); the task, or nullptr if
  // none was leased.
  Task* lease(Pool& pool, Actor& actor, Node& node, const SpGroupState* group = nullptr);
  // SP pools: breaks the groups that lost a member, forms new ones (epoch + 1)
  // from the members that are free, placed and on nodes known to be alive.
  void form_groups();
  void dispatch_groups(Pool& pool);
  // Ends the group and probes its members' nodes before they join another
  // group. Its task goes back to the front of the mailbox (no attempt used)
  // now, or, with `requeue` false, when rank 0 yields it: members that left
  // with notice yielded after the same commit as rank 0.
  void break_group(Pool& pool, uint64_t group_id, const char* why, bool requeue = true);
  bool free_for_group(const Actor& a) const;
  // "<pool>/sp<id>": the name members and status know a group by.
  static std::string group_name(const std::string& pool, uint64_t id) {
    return pool + "/sp" + std::to_string(id);
  }
  // Forgets the KV keys a formation's members rendezvoused through
  // (collective::rendezvous_prefix): it has ended, and no member reads them again.
  void drop_rendezvous(const std::string& group, uint64_t epoch);
  // A member of an SP group that runs a task now.
  bool in_busy_group(const Actor& a) const;
  // A completion from an SP member that does not hold the task's lease:
  // true if `c` was one (and was dealt with).
  bool on_member_done(wire::Completion& c);
  // Releases a lease that ends without its holder's completion.
  void end_lease(Task& t);
  void node_dead(Node& n, const char* why);
  // Takes back the actors a node still hosts from an earlier boot or session;
  // `stale` gets the tasks it holds that are no longer its leases here.
  std::vector<uint64_t> adopt(Node& n, const wire::HelloNode& h, wire::Cancel& stale);
  // After a restart: leases of nodes that did not come back go back to their mailboxes.
  void end_grace();
  // Re-queues `tasks` at the front of their mailboxes, in arrival order.
  void requeue_front(std::vector<Task*>& tasks, bool handed_back);
  // Declares silent nodes dead; true if any was.
  bool check_liveness();
  // Time the head spent away from its socket (a long turn, its process
  // stopped or starved) does not count against its peers' liveness.
  void forgive_absence(transport::Clock::time_point previous);
  void send_heartbeats();
  void maybe_compact(bool force);
  void note_compaction_pause(transport::Clock::time_point t0);

  void reply_error(const std::string& peer, wire::ErrorCode code, const std::string& msg,
                   uint64_t rid);
  void queue_result(const Task& t);
  void flush(std::map<std::string, Outbox>& boxes);
  std::string heartbeat_to(const Node& n) const;
  void count(const std::string& what, uint64_t n = 1) { counters_[what] += n; }

  template <class T>
  void record(EventKind k, const T& body) {
    journal_.add(k, body);
  }

  HeadOptions opt_;
  std::unique_ptr<store::Store> store_;
  transport::ClusterKey key_;
  zmq::socket_t router_;
  std::unique_ptr<transport::HandshakeMonitor> handshakes_;  // refused peers, counted and logged
  transport::Clock::time_point next_handshake_check_;
  transport::Clock::time_point next_result_sweep_;
  // A result was stored for an expired client since the last sweep.
  bool expired_results_pending_ = false;
  int port_ = 0;
  uint64_t boot_ = 0;
  State state_;
  Journal journal_;
  std::vector<std::string> done_pending_;     // nodes whose done_seen this turn's commit covers
  std::map<std::string, Outbox> to_nodes_;    // may leave before the commit: no acknowledgement
  // The rendezvous KV (not journaled) and the gets waiting for a key (or an object).
  struct KvWaiter {
    std::string peer;
    uint64_t rid;
    transport::Clock::time_point deadline;
  };
  // Answers a keyed get now (`found`, or `missing` when it may not wait) or
  // when the key is set or its wait ends.
  template <class Answer>
  void answer_or_wait(std::multimap<std::string, KvWaiter>& waiters, const std::string& peer, uint64_t rid,
                      const std::string& key, int64_t wait_ms, const std::optional<Answer>& found,
                      const Answer& missing) {
    if (found) {
      to_nodes_[peer].frames.push_back(wire::encode(*found, rid));
    } else if (wait_ms == 0) {
      to_nodes_[peer].frames.push_back(wire::encode(missing, rid));
    } else {
      waiters.emplace(key, KvWaiter{peer, rid, now_ + std::chrono::milliseconds(wait_ms)});
    }
  }
  // Answers the waiters whose wait ended with `answer` (not found).
  template <class Answer>
  void expire_waiters(std::multimap<std::string, KvWaiter>& waiters, const Answer& answer) {
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->second.deadline > now_) {
        ++it;
        continue;
      }
      to_nodes_[it->second.peer].frames.push_back(wire::encode(answer, it->second.rid));
      it = waiters.erase(it);
    }
  }
  std::map<std::string, std::string> kv_;  // ordered: a formation's keys are one range
  size_t kv_bytes_ = 0;                    // of its keys and values
  std::map<std::string, std::string>::iterator erase_kv(
      std::map<std::string, std::string>::iterator it) {
    kv_bytes_ -= it->first.size() + it->second.size();
    return kv_.erase(it);
  }
  std::multimap<std::string, KvWaiter> kv_waiters_;
  struct ObjectEntry {
    uint64_t size = 0;
    uint64_t digest = 0;
    std::map<std::string, std::string> holders;  // node id -> its object server
  };
  std::map<std::string, ObjectEntry> objects_;
  std::multimap<std::string, KvWaiter> object_waiters_;
  std::map<std::string, Outbox> to_callers_;  // leave only after the commit
  // Accepted ids not yet told to their caller. A result tells the caller that
  // its call was accepted, so ids answered within kAcceptDelay are never sent
  // on their own: a synchronous call costs its caller one wake-up fewer.
  struct Unannounced {
    std::vector<uint64_t> ids;
    transport::Clock::time_point since;
  };
  std::map<std::string, Unannounced> unannounced_;
  void announce_accepted();
  std::unordered_map<std::string, std::string> client_by_peer_;
  std::map<std::string, uint64_t> counters_;
  uint64_t next_sp_epoch_ = 0;  // boot << 32 + formations so far
  uint64_t next_probe_ = 0;
  transport::Clock::time_point now_;
  transport::Clock::duration longest_turn_gap_{0};  // see forgive_absence
  // The longest the loop worked between two polls: how long a frame that came
  // just as it woke could wait to be read. The gap above also counts the
  // poll's idle wait, in which a frame is read as soon as it comes.
  transport::Clock::duration longest_busy_{0};
  // When a call was accepted, for aging: calls stored before TaskRecord had
  // accepted_ms count from this boot's start (started_ms_).
  int64_t accepted_ms(const Task& t) const {
    return t.accepted_ms != 0 ? t.accepted_ms : started_ms_;
  }
  int64_t started_ms_ = 0;
  int64_t wall_ms_ = 0;  // this turn's wall clock, ms since the epoch: deadlines survive restarts
  // (deadline, id) of every queued call with a deadline: lease() takes a
  // call out, requeue_front() puts it back.
  std::set<std::pair<int64_t, uint64_t>> deadlines_;
  transport::Clock::time_point next_heartbeat_;
  std::atomic<bool> stop_requested_{false};
  bool stopping_ = false;
  // The metrics endpoint's thread asks; the loop renders between turns.
  MetricsExchange metrics_exchange_;
  std::unique_ptr<MetricsServer> metrics_server_;  // after the exchange: stopped before it goes
  // After a restart, nodes of the last boot get this long to come back and
  // claim their actors and leases before they are placed and re-queued.
  transport::Clock::time_point grace_until_;
  bool grace_over_ = true;
  // Nodes told to shut down that have not said goodbye; the head waits for
  // them (up to a deadline) so that no node misses its Shutdown.
  std::set<std::string> awaiting_goodbye_;
  transport::Clock::time_point stop_deadline_;
};

}  // namespace spotlight::head

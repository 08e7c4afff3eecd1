// `spotlight bench scale`: the runtime at Ray's scalability envelope, on a
// local cluster: actors launched and removed per second (Ray's many_actors:
// 10,000 actors at 551/s), a pool created, called and removed per second
// (the nearest of Ray's figures: placement_group_create/removal, 839/s),
// synchronous calls with those actors idle beside the caller's (what every
// actor the head holds costs each call), and a mailbox of 1,000,000 calls
// queued behind a busy actor, kept across kill -9 of the head, then run
// (Ray: 1,000,000 tasks queued on one node in 184 s, no head restart).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "spotlight/spotlight.h"
#include "tools/spotlight/bench_actors.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int kMaxSlotsPerNode = 4096;  // what `spotlight join --slots` allows
constexpr int kSpareSlots = 4;          // the echo, the gate, its opener, one create/remove actor
const char* const kEcho = "scale-echo";

struct ScaleOptions {
  int actors = 10000;
  int pools = 1000;
  int queued = 1000000;
  int sync_calls = 5000;
  bool json = false;
};

// N lone actors, each spawned (committed at the head) and then called once,
// the calls pipelined (Ray's many_actors: create, then get one call of each).
struct Launch {
  double spawn_s = 0, first_calls_s = 0;
};
Launch launch_actors(Runtime& rt, int n, std::vector<std::string>& names) {
  Launch out;
  auto t0 = Clock::now();
  std::vector<ActorHandle<bench::Echo>> handles;
  handles.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    names.push_back("scale-" + std::to_string(i));
    handles.push_back(rt.spawn<bench::Echo>(names.back()));
  }
  out.spawn_s = seconds_since(t0);
  auto t1 = Clock::now();
  std::vector<Future<int64_t>> first;
  first.reserve(handles.size());
  for (int i = 0; i < n; ++i)
    first.push_back(handles[static_cast<size_t>(i)].call(&bench::Echo::ping, int64_t{i}));
  for (int i = 0; i < n; ++i) {
    if (first[static_cast<size_t>(i)].get() != i)
      throw std::runtime_error("scale bench: wrong echo");
  }
  out.first_calls_s = seconds_since(t1);
  return out;
}

// One lone actor at a time: spawned, called once, removed (its slot freed).
double create_call_remove(Runtime& rt, int rounds) {
  auto t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    const std::string name = "scale-cycle-" + std::to_string(i);
    auto h = rt.spawn<bench::Echo>(name);
    if (h.call(&bench::Echo::ping, int64_t{i}).get() != i)
      throw std::runtime_error("scale bench: wrong echo");
    rt.remove_pool(name);
  }
  return rounds / seconds_since(t0);
}

// A process's peak resident memory in MiB (VmHWM), 0 where /proc does not say.
double peak_rss_mib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      in >> kib;
      return kib / 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

// A second driver's synchronous calls to the echo, one after another, while
// the flood of queued calls is sent and accepted: what one caller's call
// waits behind another caller's million.
class SyncBeside {
 public:
  SyncBeside(LocalCluster& cluster) {
    thread_ = std::thread([this, &cluster] { run(cluster); });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ready_; });
    if (error_) finish();  // rethrows
  }
  ~SyncBeside() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Stops the caller; each call's time in ms, at least one.
  std::vector<double> finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
    return ms_;
  }

 private:
  void run(LocalCluster& cluster) {
    try {
      Runtime rt = cluster.connect();
      auto echo = rt.actor<bench::Echo>(kEcho);
      echo.call(&bench::Echo::ping, int64_t{-1}).get();  // connected, and the path warm
      set_ready();
      int64_t i = 0;
      do {
        const auto t = Clock::now();
        if (echo.call(&bench::Echo::ping, i).get() != i) throw std::runtime_error("wrong echo");
        ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
        ++i;
      } while (!stop_.load());
    } catch (...) {
      error_ = std::current_exception();
    }
    set_ready();
  }
  void set_ready() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = true;
    }
    cv_.notify_all();
  }
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::vector<double> ms_;
};

struct Queued {
  double accept_s = 0, run_s = 0;
  double restart_s = 0;  // kill -9 of the head until the restarted one listens (its store loaded)
  double first_call_s = 0;      // from then until a new call has run (nodes and clients back)
  uint64_t queued_at_head = 0;  // the mailbox's depth once all were accepted
  double head_peak_mib = 0;     // the head's peak resident memory, read while they waited
  // The longest the head's loop was away from its socket (a turn, a
  // compaction's snapshot, the poll's wait), over both heads.
  uint64_t head_longest_stall_ms = 0;
  // The longest the head's loop worked between two polls (a turn and what
  // follows it), over both heads: what a frame could wait to be read.
  uint64_t head_longest_turn_ms = 0;
  // The longest a compaction held the head in one turn (the cut, or a
  // turn's share of its snapshot), over both heads.
  uint64_t head_compaction_ms = 0;
  // Another driver's synchronous calls while the flood was sent and accepted.
  std::vector<double> beside_ms;  // sorted
};

uint64_t counter(const ClusterStatus& s, const char* name) {
  auto it = s.counters.find(name);
  return it == s.counters.end() ? 0 : it->second;
}
// `n` calls to a Gate whose member holds its first call: all but the few it
// holds leased wait in the head's durable mailbox. Then the head is killed
// (kill -9) and started again on its store, and the gate opens: every call
// must come back, once, with its own value.
Queued queue_behind_gate(LocalCluster& cluster, int n) {
  ConnectOptions co;
  co.max_pending = static_cast<size_t>(n) + 16;
  Runtime rt = cluster.connect(co);
  // Both on one node: they share its process's latch.
  const std::string node = rt.status().nodes.at(0).id;
  // Ahead 1,024 as in `spotlight bench`: at the default 16 a lone actor of
  // instant calls takes at most 16 per turn of the head.
  auto gate = rt.spawn<bench::Gate>("scale-gate", on_market("any").on_node(node).ahead(1024));
  auto opener = rt.spawn<bench::Gate>("scale-gate-opener", on_market("any").on_node(node));
  opener.call(&bench::Gate::close).get();
  Queued out;
  std::vector<Future<int64_t>> calls;
  calls.reserve(static_cast<size_t>(n));
  SyncBeside beside(cluster);
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) calls.push_back(gate.call(&bench::Gate::pass, int64_t{i}));
  rt.wait_accepted(std::chrono::minutes(10));
  out.accept_s = seconds_since(t0);
  out.beside_ms = beside.finish();
  std::sort(out.beside_ms.begin(), out.beside_ms.end());
  const ClusterStatus accepted = rt.status();
  for (const auto& p : accepted.pools) {
    if (p.name == "scale-gate") out.queued_at_head = p.queued;
  }
  out.head_longest_stall_ms = counter(accepted, "turn_gap_ms_max");
  out.head_longest_turn_ms = counter(accepted, "turn_busy_ms_max");
  out.head_compaction_ms = counter(accepted, "compaction_ms_max");
  out.head_peak_mib = peak_rss_mib(cluster.head_pid());
  auto tk = Clock::now();
  cluster.kill_head();
  cluster.start_head();
  out.restart_s = seconds_since(tk);
  auto t1 = Clock::now();
  opener.call(&bench::Gate::open).get();
  out.first_call_s = seconds_since(t1);
  for (int i = 0; i < n; ++i) {
    if (calls[static_cast<size_t>(i)].get() != i)
      throw std::runtime_error("scale bench: wrong pass");
  }
  out.run_s = seconds_since(t1);
  const ClusterStatus after = rt.status();
  out.head_longest_stall_ms = std::max(out.head_longest_stall_ms, counter(after, "turn_gap_ms_max"));
  out.head_longest_turn_ms = std::max(out.head_longest_turn_ms, counter(after, "turn_busy_ms_max"));
  out.head_compaction_ms = std::max(out.head_compaction_ms, counter(after, "compaction_ms_max"));
  return out;
}

void run_scale(const ScaleOptions& o) {
  nlohmann::json out;
  auto report = [&](const char* name, double v, const char* unit, const char* peer = nullptr) {
    out[name] = std::round(v * 1000) / 1000;
    std::printf("%-46s %12.1f %s%s%s\n", name, v, unit, peer ? "   " : "", peer ? peer : "");
    std::fflush(stdout);
  };
  const int slots_needed = o.actors + kSpareSlots;
  ClusterOptions co;
  co.nodes = (slots_needed + kMaxSlotsPerNode - 1) / kMaxSlotsPerNode;
  co.slots = (slots_needed + co.nodes - 1) / co.nodes;
  std::printf(
      "Local cluster: head + %d node(s) of %d slots, durable mailboxes, CURVE with a cluster key\n",
      co.nodes, co.slots);
  auto cluster = local_cluster(co);
  auto rt = cluster.connect();

  auto echo = rt.spawn<bench::Echo>(kEcho);
  echo.call(&bench::Echo::ping, int64_t{0}).get();
  const double sync_alone = bench::echo_sync(echo, o.sync_calls);
  report("1_1_actor_calls_sync", sync_alone, "calls/s (no other actor)");

  if (o.pools > 0) {
    report("actor_create_call_remove_per_second", create_call_remove(rt, o.pools), "/s",
           "(Ray 2.22 placement_group_create/removal: 839/s, no actor)");
  }

  if (o.actors > 0) {
    std::vector<std::string> names;
    const Launch l = launch_actors(rt, o.actors, names);
    report("actors_spawned_per_second", o.actors / l.spawn_s, "/s (committed, one at a time)");
    report("actors_launched_per_second", o.actors / (l.spawn_s + l.first_calls_s),
           "/s (spawned and called once)", "(Ray many_actors: 551/s)");
    const double sync_beside = bench::echo_sync(echo, o.sync_calls);
    char note[96];
    std::snprintf(note, sizeof note, "calls/s beside %d idle actors (%.0f%% of alone)", o.actors,
                  100.0 * sync_beside / sync_alone);
    report("1_1_actor_calls_sync_beside_actors", sync_beside, note);
    auto t0 = Clock::now();
    for (const auto& name : names) rt.remove_pool(name);
    report("actors_removed_per_second", o.actors / seconds_since(t0), "/s (one at a time)");
  }

  if (o.queued > 0) {
    const Queued q = queue_behind_gate(cluster, o.queued);
    std::printf("%d calls queued behind a busy actor: %llu waited in the head's mailbox at once\n",
                o.queued, static_cast<unsigned long long>(q.queued_at_head));
    report("queued_calls_head_peak_rss_mib", q.head_peak_mib,
           "MiB (the head's peak resident memory)");
    report("queued_calls_accepted_per_second", o.queued / q.accept_s, "calls/s (durable)");
    report("queued_calls_head_restart_seconds", q.restart_s, "s (kill -9, then the store loaded)");
    report("queued_calls_first_call_after_restart_seconds", q.first_call_s,
           "s (nodes and clients back)");
    report("queued_calls_run_per_second", o.queued / q.run_s,
           "calls/s (after the restart, the mailbox emptied)");
    report("queued_calls_head_longest_stall_ms", static_cast<double>(q.head_longest_stall_ms),
           "ms (the longest the head's loop was away from its socket, idle polls included)");
    report("queued_calls_head_longest_turn_ms", static_cast<double>(q.head_longest_turn_ms),
           "ms (the longest the head's loop worked between two polls)");
    report("queued_calls_head_compaction_ms_max", static_cast<double>(q.head_compaction_ms),
           "ms (the longest a compaction held the head in one turn)");
    const auto& b = q.beside_ms;
    auto at = [&](double share) { return b[std::min(b.size() - 1, static_cast<size_t>(share * b.size()))]; };
    report("queued_calls_sync_beside_calls", static_cast<double>(b.size()),
           "synchronous calls from another driver while the calls were sent and accepted");
    report("queued_calls_sync_beside_p50_ms", at(0.5), "ms (median call)");
    report("queued_calls_sync_beside_p99_ms", at(0.99), "ms");
    report("queued_calls_sync_beside_max_ms", b.back(), "ms (the slowest call)");
    report("queued_calls_total_seconds", q.accept_s + q.restart_s + q.run_s,
           "s (the restart included)", "(Ray: 1,000,000 tasks queued on one node, 184 s)");
  }
  cluster.stop();
  if (o.json) std::cout << out.dump() << std::endl;
}

}  // namespace

CLI::App* add_bench_scale(CLI::App& bench) {
  auto o = std::make_shared<ScaleOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "scale",
      "Many actors, pools created and removed, a million queued calls across a head restart (Ray's "
      "scalability figures)");
  cmd->add_option("--actors", o->actors, "Lone actors launched, then removed (0: skip)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--pools", o->pools, "Actors created, called once and removed in turn (0: skip)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--queued", o->queued, "Calls queued behind a busy actor, then run (0: skip)")
      ->check(CLI::Range(0, 10000000));
  cmd->add_option("--sync-calls", o->sync_calls, "Synchronous calls per measurement")
      ->check(CLI::Range(100, 10000000));
  cmd->add_flag("--json", o->json, "End with one JSON line of the figures");
  cmd->callback([o] { run_scale(*o); });
  return cmd;
}

}  // namespace spotlight::cli

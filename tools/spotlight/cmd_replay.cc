// `spotlight replay TRACE`: replays a real spot trace against a live cluster on
// this machine. Each trace node is a `spotlight join` process, started on
// `add` and preempted on `remove` (SIGTERM `--notice` seconds before, then
// kill -9), while a continuous workload of K-step tasks runs on a pool that
// spans every node. Reports what was lost, delivered twice or recomputed, and
// how fast the head noticed and moved work.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "spotlight/spotlight.h"
#include "tools/replay/trace.h"
#include "tools/spotlight/bench_actors.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct ReplayOptions {
  std::string trace;
  double compress = 60;
  double notice_s = 0;  // trace seconds
  int steps = 10;
  int step_ms = 20;
  int slots = 1;
  int reserved = 1;
  double from_min = 0, to_min = -1;
  int inflight_per_slot = 2;
  double drain_timeout_s = 120;
  bool json = false;
};

struct Action {
  double at_s;  // real seconds from the start
  enum Kind { kStart, kNotice, kKill } kind;
  std::string node;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

bool running(pid_t pid) {
  int status;
  return waitpid(pid, &status, WNOHANG) == 0;
}

void run_replay(const ReplayOptions& o) {
  auto events = replay::read_trace(o.trace);
  int64_t to_ms = o.to_min < 0 ? INT64_MAX : static_cast<int64_t>(o.to_min * 60000);
  events = replay::slice(events, static_cast<int64_t>(o.from_min * 60000), to_ms);
  // The schedule, in real time; a notice never comes before its node exists.
  std::map<std::string, double> added_at;
  std::vector<Action> plan;
  int removes = 0;
  for (const auto& e : events) {
    double at = e.t_ms / 1000.0 / o.compress;
    if (e.add) {
      added_at[e.node] = at;
      plan.push_back({at, Action::kStart, e.node});
    } else {
      ++removes;
      if (o.notice_s > 0) {
        plan.push_back({std::max(added_at[e.node], at - o.notice_s / o.compress), Action::kNotice, e.node});
      }
      plan.push_back({at, Action::kKill, e.node});
    }
  }
  std::stable_sort(plan.begin(), plan.end(), [](const Action& a, const Action& b) { return a.at_s < b.at_s; });
  double span_s = plan.empty() ? 0 : plan.back().at_s;

  char tmpl[] = "/tmp/spotlight-replay-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary folder");
  std::string step_dir = tmpl;
  setenv("SPOTLIGHT_STEP_LOG", step_dir.c_str(), 1);  // inherited by every node

  int members = (replay::max_live(events) + o.reserved) * o.slots;
  std::printf("replay %s: %zu events (%d preemptions) over %.0f trace minutes, compressed %.0fx to %.0f s;\n"
              "notice %.0f s (trace), tasks of %d steps x %d ms, pool of %d members\n",
              o.trace.c_str(), events.size(), removes, span_s * o.compress / 60, o.compress, span_s,
              o.notice_s, o.steps, o.step_ms, members);
  std::fflush(stdout);

  ClusterOptions co;
  co.nodes = o.reserved;
  co.slots = o.slots;
  co.market = "reserved";
  LocalCluster cluster(co);
  Runtime rt = cluster.connect();
  auto pool = rt.pool<bench::Stepper>("explorers", on_market("any").members(members).ahead(1));
  // Preemptions are what the replay is about: let a task survive many.
  auto explorers = pool.with(CallOptions{1000});

  // The workload: keep a window of calls in flight until the trace ends.
  std::atomic<bool> submitting{true};
  std::atomic<int64_t> accepted{0}, completed{0}, failed{0}, twice{0};
  std::set<int64_t> done_keys;
  std::mutex done_mu;
  size_t window = static_cast<size_t>(members * o.inflight_per_slot);
  std::deque<std::pair<int64_t, Future<bench::StepResult>>> inflight;
  std::thread workload([&] {
    int64_t next_key = 0;
    auto deadline = Clock::time_point::max();
    while (true) {
      if (submitting) {
        while (inflight.size() < window) {
          inflight.emplace_back(next_key, explorers.call(&bench::Stepper::run, next_key, o.steps, o.step_ms));
          ++next_key;
          ++accepted;
        }
      } else if (deadline == Clock::time_point::max()) {
        deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1000));
      }
      if (inflight.empty() || Clock::now() > deadline) break;
      bool any = false;
      for (auto it = inflight.begin(); it != inflight.end();) {
        if (!it->second.ready()) {
          ++it;
          continue;
        }
        any = true;
        try {
          bench::StepResult r = it->second.get();
          std::lock_guard<std::mutex> l(done_mu);
          if (!done_keys.insert(r.key).second || r.key != it->first) ++twice;
          ++completed;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "task %lld failed: %s\n", static_cast<long long>(it->first), e.what());
          ++failed;
        }
        it = inflight.erase(it);
      }
      if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling futures
    }
  });

  // The timeline.
  std::map<std::string, int> index;
  std::map<std::string, Clock::time_point> notice_at, kill_at;
  int preemptions = 0;
  auto t0 = Clock::now();
  auto next_progress = t0 + std::chrono::seconds(10);
  std::vector<std::string> join_extra{"--notice-deadline", std::to_string(o.notice_s / o.compress)};
  for (const auto& a : plan) {
    auto when = t0 + std::chrono::microseconds(static_cast<int64_t>(a.at_s * 1e6));
    while (Clock::now() < when) {
      std::this_thread::sleep_until(std::min(when, next_progress));
      if (Clock::now() >= next_progress) {
        double el = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("  [%5.0f s / %.0f s] trace minute %5.0f: %d preemptions, %lld tasks done\n", el, span_s,
                    el * o.compress / 60, preemptions, static_cast<long long>(completed.load()));
        std::fflush(stdout);
        next_progress += std::chrono::seconds(10);
      }
    }
    if (a.kind == Action::kStart) {
      index[a.node] = cluster.start_node(o.slots, "spot", join_extra);
    } else {
      pid_t pid = cluster.node_pid(index.at(a.node));
      if (a.kind == Action::kNotice) {
        if (running(pid)) kill(pid, SIGTERM);
        notice_at[a.node] = Clock::now();
      } else {
        ++preemptions;
        if (running(pid)) {
          kill(pid, SIGKILL);
          kill_at[a.node] = Clock::now();
        }
      }
    }
  }
  submitting = false;
  workload.join();

  // Accounting, from the head's view of each node and from the step logs.
  ClusterStatus s = rt.status();
  auto fetched = Clock::now();
  std::map<int64_t, const NodeStatus*> by_pid;
  for (const auto& n : s.nodes) by_pid[n.pid] = &n;
  std::vector<double> detect, requeue;
  int undetected = 0;
  for (const auto& [node, when] : kill_at) {
    const NodeStatus* n = by_pid[cluster.node_pid(index[node])];
    if (!n || n->gone_ms_ago < 0) {
      ++undetected;
      continue;
    }
    auto gone = fetched - std::chrono::milliseconds(n->gone_ms_ago);
    if (notice_at.count(node) && n->notice_ms_ago >= 0 && gone < when) continue;  // left before the kill
    detect.push_back(std::chrono::duration<double, std::milli>(gone - when).count());
  }
  for (const auto& [node, when] : notice_at) {
    const NodeStatus* n = by_pid[cluster.node_pid(index[node])];
    if (!n || n->emptied_ms_ago < 0) continue;
    auto emptied = fetched - std::chrono::milliseconds(n->emptied_ms_ago);
    requeue.push_back(std::max(0.0, std::chrono::duration<double, std::milli>(emptied - when).count()));
  }
  std::map<std::pair<int64_t, int64_t>, int> step_runs;
  for (const auto& f : fs::directory_iterator(step_dir)) {
    std::ifstream in(f.path());
    int64_t key, step;
    while (in >> key >> step) step_runs[{key, step}]++;
  }
  int64_t recomputed = 0;
  for (const auto& [ks, n] : step_runs) {
    if (done_keys.count(ks.first)) recomputed += n - 1;
  }
  auto counter = [&](const char* k) {
    auto it = s.counters.find(k);
    return it == s.counters.end() ? uint64_t{0} : it->second;
  };
  nlohmann::json j = {
      {"accepted", accepted.load()},
      {"completed", completed.load()},
      {"lost", accepted.load() - completed.load()},
      {"delivered_twice", twice.load()},
      {"steps_recomputed", recomputed},
      {"tasks_moved", counter("tasks_requeued") + counter("tasks_handed_back")},
      {"preemptions", preemptions},
      {"detect_ms_p50", std::round(percentile(detect, 50))},
      {"detect_ms_p99", std::round(percentile(detect, 99))},
      {"requeue_ms_p50", std::round(percentile(requeue, 50))},
      {"requeue_ms_p99", std::round(percentile(requeue, 99))},
  };
  std::printf("\n%-18s %10s\n", "metric", "value");
  for (const auto& [k, v] : j.items()) std::printf("%-18s %10s\n", k.c_str(), v.dump().c_str());
  std::printf("(%zu kills measured for detection, %d undetected; %zu notices measured; %lld tasks failed)\n",
              detect.size(), undetected, requeue.size(), static_cast<long long>(failed.load()));
  std::fflush(stdout);
  cluster.stop();
  std::error_code ec;
  fs::remove_all(step_dir, ec);
  if (o.json) std::cout << j.dump() << std::endl;
}

}  // namespace

void add_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay a spot preemption trace against a local cluster");
  cmd->add_option("trace", o->trace, "Trace file (event log or GCP count format)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--compress", o->compress, "Trace seconds per real second")->check(CLI::Range(1.0, 100000.0));
  cmd->add_option("--notice", o->notice_s, "Notice before each removal, in trace seconds (0: none)")->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--steps", o->steps, "Steps per task")->check(CLI::Range(1, 100000));
  cmd->add_option("--step-ms", o->step_ms, "Real milliseconds per step")->check(CLI::Range(0, 60000));
  cmd->add_option("--slots", o->slots, "Slots per node")->check(CLI::Range(1, 64));
  cmd->add_option("--reserved", o->reserved, "Reserved nodes that never go away")->check(CLI::Range(0, 64));
  cmd->add_option("--from-min", o->from_min, "Start at this trace minute")->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--to-min", o->to_min, "Stop at this trace minute")->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--inflight-per-slot", o->inflight_per_slot, "Calls kept in flight per pool member")->check(CLI::Range(1, 1000));
  cmd->add_option("--drain-timeout", o->drain_timeout_s, "Seconds to wait for the last tasks")->check(CLI::Range(1.0, 3600.0));
  cmd->add_flag("--json", o->json, "End with one JSON line of the figures");
  cmd->callback([o] { run_replay(*o); });
}

}  // namespace spotlight::cli

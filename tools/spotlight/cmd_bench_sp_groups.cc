// `spotlight bench sp-groups`: how fast the runtime's own SP groups re-form
// when a member's node is killed, end to end through the head: the
// survivor's collective fails, its task comes back, the head breaks the
// group, probes the survivors' nodes, forms a new group with a free member
// and leases the task to it; the members rendezvous afresh through the
// head's KV (SpMember) and run the first step from the last commit.
#include <signal.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "spotlight/spotlight.h"
#include "tools/spotlight/bench_actors.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t commits(const ClusterStatus& s) {
  auto it = s.counters.find("commits");
  return it == s.counters.end() ? 0 : it->second;
}

// Polls the head until `pred` holds (another process's state: no other way).
ClusterStatus wait_until(Runtime& rt, const std::function<bool(const ClusterStatus&)>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    ClusterStatus s = rt.status();
    if (pred(s)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("sp-groups bench: the cluster did not reach the expected state within 30 s");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

CLI::App* add_bench_sp_groups(CLI::App& bench) {
  auto rounds = std::make_shared<int>(5);
  auto step_ms = std::make_shared<int>(5);
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("sp-groups", "The runtime's SP groups re-forming after kill -9 of a member");
  cmd->add_option("--rounds", *rounds, "Kills, each with a new node joining after it")->check(CLI::Range(1, 50));
  cmd->add_option("--step-ms", *step_ms, "Work per step besides its all-reduce")->check(CLI::Range(0, 1000));
  cmd->add_flag("--json", *json, "End with one JSON line of the medians");
  cmd->callback([=] {
    ClusterOptions co;
    co.nodes = 3;
    co.slots = 1;
    co.market = "spot";
    auto cluster = local_cluster(co);
    auto rt = cluster.connect();
    auto pool = rt.pool<bench::SpStepper>("sp-bench", on_market("spot").members(3).sequence_parallel(2));
    std::printf("SP pool of 3 at degree 2 on 3 nodes (one group, one free member); kill -9 of rank 1's node "
                "mid-call, %d ms of work per step\n\n",
                *step_ms);
    std::printf("| round | new communicator ready (ms after the kill) | first step done (ms after the kill) |\n");
    std::printf("| ---: | ---: | ---: |\n");
    std::vector<double> comm_ms, step_done_ms;
    for (int round = 0; round < *rounds; ++round) {
      const uint64_t base = commits(rt.status());
      auto f = pool.call(&bench::SpStepper::run, int64_t{60}, int64_t{*step_ms});
      ClusterStatus s = wait_until(rt, [&](const ClusterStatus& st) {
        return commits(st) >= base + 10 && st.groups.size() == 1 && st.groups[0].task != 0;
      });
      const SpGroupStatus g = s.groups[0];
      pid_t victim = 0;
      for (const auto& a : s.actors) {
        if (a.id != g.members[1]) continue;
        for (const auto& n : s.nodes) {
          if (n.id == a.node) victim = static_cast<pid_t>(n.pid);
        }
      }
      if (victim == 0) throw std::runtime_error("sp-groups bench: rank 1's node not found");
      const int64_t t_kill = now_ns();
      common::signal_process(victim, SIGKILL);
      const bench::SpStepTimes r = f.get(std::chrono::seconds(60));
      if (!r.resumed || r.epoch <= g.epoch) {
        throw std::runtime_error("sp-groups bench: the call did not resume in a new formation");
      }
      comm_ms.push_back((r.comm_ready_ns - t_kill) / 1e6);
      step_done_ms.push_back((r.first_step_ns - t_kill) / 1e6);
      std::printf("| %d | %.1f | %.1f |\n", round + 1, comm_ms.back(), step_done_ms.back());
      std::fflush(stdout);
      // The next round starts whole: the killed node declared dead (its
      // heartbeats missed), its member placed on a new node.
      cluster.add_node(1, "spot");
      wait_until(rt, [&](const ClusterStatus& st) {
        bool gone = false;
        for (const auto& n : st.nodes) gone |= n.pid == victim && n.state == "dead";
        return gone && st.pools.size() == 1 && st.pools[0].placed == 3 && st.groups.size() == 1 &&
               st.groups[0].task == 0;
      });
    }
    std::printf("\nmedians: communicator %.1f ms, first step %.1f ms after the kill\n", median(comm_ms),
                median(step_done_ms));
    if (*json) {
      nlohmann::json out = {{"runtime_reform_comm_ms", median(comm_ms)},
                            {"runtime_reform_first_step_ms", median(step_done_ms)}};
      std::cout << out.dump() << std::endl;
    }
    cluster.stop();
  });
  return cmd;
}

}  // namespace spotlight::cli

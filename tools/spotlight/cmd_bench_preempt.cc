// `spotlight bench preempt`: how long a call of higher priority waits for a
// member when every member runs a long call of lower priority, with
// Placement::preempt (the running call yields at its next step) and
// without (the call waits for one to end). The rollouts an RL iteration
// needs now, against exploration rollouts that took the spot GPUs meanwhile.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "spotlight/spotlight.h"
#include "tools/spotlight/bench_actors.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The leased calls of `pool` that have committed a step: they run.
size_t running(Runtime& rt, const std::string& pool) {
  size_t n = 0;
  for (const auto& t : rt.tasks({.mailbox = pool, .state = "leased"}).tasks) n += t.has_checkpoint;
  return n;
}

}  // namespace

CLI::App* add_bench_preempt(CLI::App& bench) {
  auto rounds = std::make_shared<int>(5);
  auto step_ms = std::make_shared<int>(20);
  auto steps = std::make_shared<int>(100);
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("preempt",
                                       "A call of higher priority against members busy with long "
                                       "calls, with and without preemption");
  cmd->add_option("--rounds", *rounds, "Urgent calls per setting")->check(CLI::Range(1, 100));
  cmd->add_option("--step-ms", *step_ms, "Work per step of a long call (it may yield after each)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--steps", *steps, "Steps per long call")->check(CLI::Range(10, 100000));
  cmd->add_flag("--json", *json, "End with one JSON line of the medians");
  cmd->callback([=] {
    ClusterOptions co;
    co.nodes = 1;
    co.slots = 2;
    auto cluster = local_cluster(co);
    auto rt = cluster.connect();
    std::printf(
        "2 members on one node, each running a call of %d steps of %d ms (priority 0); "
        "a call of priority 5 (one step of 0 ms) comes once both have run a few steps\n\n",
        *steps, *step_ms);
    std::printf("| setting | round | urgent call answered after (ms) |\n| --- | ---: | ---: |\n");
    auto measure = [&](bool preempt) {
      const std::string name = preempt ? "bench-preemptive" : "bench-patient";
      auto pool =
          rt.pool<bench::Stepper>(name, on_market("any").members(2).ahead(1).preemptive(preempt));
      std::vector<double> waits;
      for (int round = 0; round < *rounds; ++round) {
        std::vector<Future<bench::StepResult>> slow;
        for (int64_t key = 0; key < 2; ++key) {
          slow.push_back(pool.call(&bench::Stepper::run, key, int64_t{*steps}, int64_t{*step_ms}));
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (running(rt, name) < 2) {
          if (std::chrono::steady_clock::now() > deadline) {
            throw std::runtime_error("preempt bench: the long calls did not start within 30 s");
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling the head
        }
        const auto t0 = std::chrono::steady_clock::now();
        pool.with(CallOptions{.priority = 5})
            .call(&bench::Stepper::run, int64_t{9}, int64_t{1}, int64_t{0})
            .get(std::chrono::seconds(600));
        waits.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        std::printf("| %s | %d | %.1f |\n", preempt ? "preemptive" : "not preemptive", round + 1,
                    waits.back());
        std::fflush(stdout);
        for (auto& f : slow) f.get(std::chrono::seconds(600));
      }
      rt.remove_pool(name);
      return median(waits);
    };
    const double with = measure(true);
    const double without = measure(false);
    std::printf("\nmedians: %.1f ms preemptive, %.1f ms not (a long call runs %d ms)\n", with,
                without, *steps * *step_ms);
    if (*json) {
      nlohmann::json out = {{"preempt_urgent_wait_ms", with},
                            {"no_preempt_urgent_wait_ms", without},
                            {"preempt_step_ms", *step_ms}};
      std::cout << out.dump() << std::endl;
    }
    cluster.stop();
  });
  return cmd;
}

}  // namespace spotlight::cli

// CallOptions::priority: calls of higher priority leave their mailbox first,
// in arrival order within a priority; the order survives a head restart (it
// is stored with each call), and a call of higher priority also overtakes
// calls its actor already holds leased ahead (Placement::prefetch).
//
// A lone Gate actor runs one task at a time and appends each key to DIR/runs
// as it runs: the file is the order of execution.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing::find_pool;
using testing::wait_for_status;
using testing_actors::Gate;
using testing_actors::gate_runs;
using testing_actors::open_gate;
using testing_actors::Stepper;
using testing_actors::StepReport;
using testing_actors::Worker;

TEST(Priority, OrdersTheMailboxAcrossAHeadRestart) {
  testing::TempDir dir("priority");
  open_gate(dir.path());
  LocalCluster cluster(cluster_options(0));  // no node: every call waits in its mailbox
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("priority-gate");
  // Keys 0..29 submitted interleaved over three priorities.
  const int32_t priority_of[3] = {0, 3, -2};
  std::vector<Future<int64_t>> calls;
  std::vector<int64_t> expect[3];  // by rank: 3, 0, -2
  for (int64_t key = 0; key < 30; ++key) {
    const int32_t p = priority_of[key % 3];
    calls.push_back(gate.with(CallOptions{.priority = p}).call(&Gate::pass, dir.path(), key));
    expect[p == 3 ? 0 : p == 0 ? 1 : 2].push_back(key);
  }
  rt.wait_accepted();
  const auto by_priority = std::vector<std::pair<int32_t, uint64_t>>{{3, 10}, {0, 10}, {-2, 10}};
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "priority-gate");
    return p && p->queued == 30 && p->by_priority == by_priority;
  }));

  // The head that accepted them dies; the one that replaces it reads their priorities back.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "priority-gate");
    return p && p->by_priority == by_priority;
  }));
  cluster.add_node(1, "reserved");
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].get(60s), static_cast<int64_t>(i));

  std::vector<int64_t> order;
  for (const auto& level : expect) order.insert(order.end(), level.begin(), level.end());
  EXPECT_EQ(gate_runs(dir.path()), order);
}

TEST(Priority, OvertakesCallsLeasedAheadOnTheNode) {
  testing::TempDir dir("priority-ahead");
  LocalCluster cluster(cluster_options(1, 2));  // one node: the gate and the probe share it
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("ahead-gate", on_market("any").ahead(16));
  auto probe = rt.spawn<Worker>("ahead-probe");

  // Key 0 runs and waits at the closed gate; 1..5 are leased behind it.
  std::vector<Future<int64_t>> calls;
  for (int64_t key = 0; key <= 5; ++key) calls.push_back(gate.call(&Gate::pass, dir.path(), key));
  auto leased = [&](uint64_t n) {
    return wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
      const PoolStatus* p = find_pool(s, "ahead-gate");
      return p && p->leased == n && p->queued == 0;
    });
  };
  ASSERT_TRUE(leased(6));
  for (int64_t key = 10; key <= 12; ++key) {
    calls.push_back(gate.with(CallOptions{.priority = 1}).call(&Gate::pass, dir.path(), key));
  }
  ASSERT_TRUE(leased(9));
  // The head leased the probe's call after 10..12, and its frames reach the
  // node in order: once the probe answers, the node holds 10..12 too.
  EXPECT_EQ(probe.call(&Worker::twice, int64_t{21}).get(60s), 42);
  open_gate(dir.path());
  for (auto& f : calls) f.get(60s);
  EXPECT_EQ(gate_runs(dir.path()), (std::vector<int64_t>{0, 10, 11, 12, 1, 2, 3, 4, 5}));
}

// Placement::aging, the mailbox's side and across a head restart: the
// accept times and the pool's aging are stored. The sleep is the input, not
// a wait for something to happen: aging needs the calls to have waited.
TEST(Priority, AgingBoundsHowLongALowerPriorityIsOvertaken) {
  testing::TempDir dir("priority-aging");
  open_gate(dir.path());
  LocalCluster cluster(cluster_options(0));  // no node: every call waits in its mailbox
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("aging-gate", on_market("any").age_priorities(1000ms));
  auto at = [&](int32_t p, int64_t key) {
    return gate.with(CallOptions{.priority = p}).call(&Gate::pass, dir.path(), key);
  };
  std::vector<Future<int64_t>> calls;
  calls.push_back(at(0, 0));  // L: accepted at tL
  rt.wait_accepted();
  const auto after_l = std::chrono::steady_clock::now();
  calls.push_back(at(10, 1));  // 10 levels up, well within 10 s of L: before it
  std::this_thread::sleep_until(after_l + 1500ms);
  calls.push_back(at(1, 2));  // one level up, but more than 1 s after L: after it
  calls.push_back(at(5, 3));  // five levels up, within 5 s of L: before it
  rt.wait_accepted();

  cluster.kill_head(SIGKILL);
  cluster.start_head();
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "aging-gate");
    return p && p->queued == 4 && p->aging_ms == 1000;
  }));
  // An earlier boot's calls still show how long they have waited.
  const TaskList listed = rt.tasks(TaskQuery{.mailbox = "aging-gate"});
  ASSERT_EQ(listed.tasks.size(), 4u);
  for (const auto& t : listed.tasks) EXPECT_GE(t.age_ms, 0) << t.id;
  cluster.add_node(1, "reserved");
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].get(60s), static_cast<int64_t>(i));
  // Strict priorities would have run 1, 3, 2, 0.
  EXPECT_EQ(gate_runs(dir.path()), (std::vector<int64_t>{1, 3, 0, 2}));
}

// The node's side: a call its actor holds leased ahead is overtaken by a
// later call of higher priority only within the aging bound.
TEST(Priority, AgingHoldsForCallsLeasedAheadOnTheNode) {
  testing::TempDir dir("priority-aging-ahead");
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("aged-ahead-gate", on_market("any").ahead(16).age_priorities(500ms));
  auto probe = rt.spawn<Worker>("aged-ahead-probe");
  auto at = [&](int32_t p, int64_t key) {
    return gate.with(CallOptions{.priority = p}).call(&Gate::pass, dir.path(), key);
  };
  auto leased = [&](uint64_t n) {
    return wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
      const PoolStatus* p = find_pool(s, "aged-ahead-gate");
      return p && p->leased == n && p->queued == 0;
    });
  };
  // Key 0 runs and waits at the closed gate; key 1 is leased behind it.
  std::vector<Future<int64_t>> calls;
  calls.push_back(at(0, 0));
  calls.push_back(at(0, 1));
  ASSERT_TRUE(leased(2));
  const auto after_1 = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(after_1 + 1200ms);
  calls.push_back(at(1, 10));  // 1 level up, over 500 ms after key 1: behind it
  calls.push_back(at(5, 11));  // 5 levels up, within 2.5 s of key 1: ahead of it
  ASSERT_TRUE(leased(4));
  // The probe's call was leased after 10 and 11, and frames reach the node in
  // order: once the probe answers, the node holds them.
  EXPECT_EQ(probe.call(&Worker::twice, int64_t{21}).get(60s), 42);
  open_gate(dir.path());
  for (auto& f : calls) f.get(60s);
  EXPECT_EQ(gate_runs(dir.path()), (std::vector<int64_t>{0, 11, 1, 10}));
}

// Placement::preempt: a call of higher priority that finds every member busy
// with calls of lower priority has one of them yield, which goes back to its
// mailbox and resumes from its last commit (no attempt used); a member that
// holds credit gets the call at once and yields to it likewise. Without the
// option both long calls run through.
TEST(Priority, APreemptivePoolHasRunningCallsYieldToHigherOnes) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  // Each long call is 400 steps of 10 ms, committed after each step.
  auto scenario = [&](const std::string& name, const Placement& where) {
    auto pool = rt.pool<Stepper>(name, where);
    std::vector<Future<StepReport>> slow;
    for (int64_t key = 1; key <= where.size; ++key) {
      slow.push_back(pool.call(&Stepper::run, key, int64_t{400}, int64_t{10}));
    }
    // Both run (each has committed a step): then the urgent call comes.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    size_t running = 0;
    while (running < slow.size() && std::chrono::steady_clock::now() < deadline) {
      running = 0;
      for (const auto& t : rt.tasks({.mailbox = name, .state = "leased"}).tasks) {
        running += t.has_checkpoint;
      }
      if (running < slow.size()) std::this_thread::sleep_for(10ms);  // polling the head
    }
    EXPECT_EQ(running, slow.size());
    auto urgent = pool.with(CallOptions{.priority = 5})
                      .call(&Stepper::run, int64_t{9}, int64_t{1}, int64_t{0});
    EXPECT_EQ(urgent.get(60s).key, 9);
    int resumed = 0;
    for (auto& f : slow) {
      const StepReport r = f.get(60s);
      EXPECT_EQ(r.attempt, 1u) << "a yield uses no attempt";
      if (r.resumed) {
        EXPECT_GT(r.started_at, 0) << "resumed from its commit";
        EXPECT_EQ(r.started_at + r.ran, 400);
      }
      resumed += r.resumed;
    }
    rt.remove_pool(name);
    return resumed;
  };
  // Two members at prefetch 1, both busy: the head leases the urgent call to
  // one beyond its credit.
  EXPECT_EQ(scenario("explore", on_market("any").members(2).ahead(1).preemptive()), 1);
  ClusterStatus s = rt.status();
  EXPECT_EQ(testing::counter(s, "preemption_requests"), 1u);
  EXPECT_EQ(testing::counter(s, "tasks_yielded_to_priority"), 1u);
  // One member with credit to spare: the call is leased as usual, and the
  // node has the running call yield to it.
  EXPECT_EQ(scenario("explore-ahead", on_market("any").members(1).ahead(4).preemptive()), 1);
  s = rt.status();
  EXPECT_EQ(testing::counter(s, "preemption_requests"), 1u);
  EXPECT_EQ(testing::counter(s, "tasks_yielded_to_priority"), 2u);
  // An idle member takes the urgent call: nothing yields, and the urgent
  // call is answered while the long one still runs on the other member.
  // A quick call first leaves the dealing's turn at the busy member.
  {
    auto pool = rt.pool<Stepper>("explore-idle", on_market("any").members(2).ahead(4).preemptive());
    auto slow = pool.call(&Stepper::run, int64_t{1}, int64_t{400}, int64_t{10});
    ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus&) {
      for (const auto& t : rt.tasks({.mailbox = "explore-idle", .state = "leased"}).tasks) {
        if (t.has_checkpoint) return true;
      }
      return false;
    }));
    EXPECT_EQ(pool.call(&Stepper::run, int64_t{2}, int64_t{1}, int64_t{0}).get(60s).key, 2);
    auto urgent = pool.with(CallOptions{.priority = 5})
                      .call(&Stepper::run, int64_t{9}, int64_t{1}, int64_t{0});
    EXPECT_EQ(urgent.get(60s).key, 9);
    EXPECT_FALSE(slow.ready()) << "the urgent call waited for the long one";
    EXPECT_FALSE(slow.get(60s).resumed) << "it yielded, though a member was idle";
    rt.remove_pool("explore-idle");
    EXPECT_EQ(testing::counter(rt.status(), "tasks_yielded_to_priority"), 2u);
  }
  // Not preemptive: nothing yields.
  EXPECT_EQ(scenario("patient", on_market("any").members(2).ahead(1)), 0);
  EXPECT_EQ(testing::counter(rt.status(), "tasks_yielded_to_priority"), 2u);
}

}  // namespace
}  // namespace spotlight

// CallOptions::priority: calls of higher priority leave their mailbox first,
// in arrival order within a priority; the order survives a head restart (it
// is stored with each call), and a call of higher priority also overtakes
// calls its actor already holds leased ahead (Placement::prefetch).
//
// A lone Gate actor runs one task at a time and appends each key to DIR/runs
// as it runs: the file is the order of execution.
#include <gtest/gtest.h>

#include <fstream>

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

}  // namespace
}  // namespace spotlight

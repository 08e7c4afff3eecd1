// Removing an actor or pool (Runtime::remove_pool, `spotlight remove`): its
// calls fail, its slots are free at once, its name is gone, and the removal
// survives restarts of the head, from its journal and from its tables.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>

#include "support/cluster.h"
#include "support/command.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::counter;
using testing::find_pool;
using testing::lines_in;
using testing::wait_for_status;
using testing_actors::Gate;
using testing_actors::Worker;

TEST(RemovePool, ItsCallsFailItsSlotsAreFreedAndItsNameIsGone) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto gates = rt.pool<Gate>("gates", on_market("any").members(2));
  testing::TempDir dir("remove");
  // Both members placed first: calls made while only one is ready would all
  // be leased to it (prefetch), and only one would run.
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "gates");
    return p && p->placed == 2;
  }));
  std::vector<Future<int64_t>> calls;
  for (int64_t i = 0; i < 40; ++i)
    calls.push_back(gates.call(&Gate::enter_and_pass, dir.path(), i));
  // Two run (each committed once, and is held at the gate), 30 wait on the
  // node (16 leased ahead to each member) and 8 in the head's mailbox.
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "gates");
    return p && p->leased == 32 && p->queued == 8 && counter(s, "commits") == 2;
  }));

  rt.remove_pool("gates");
  for (auto& c : calls) {
    try {
      c.get(std::chrono::seconds(30));
      FAIL() << "a call of a removed pool returned";
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find("'gates' was removed"), std::string::npos) << e.what();
    }
  }
  ClusterStatus s = rt.status();
  EXPECT_EQ(find_pool(s, "gates"), nullptr);
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].used, 0) << "the removed actors still hold their slots";
  EXPECT_EQ(s.nodes[0].running, 0u);
  EXPECT_EQ(counter(s, "pools_removed"), 1u);
  EXPECT_EQ(counter(s, "tasks_failed_pool_removed"), 40u);

  // The freed slots take a new pool at once, while the removed actors'
  // methods still wait at the gate on the node.
  auto workers = rt.pool<Worker>("workers", on_market("any").members(2));
  EXPECT_EQ(workers.call(&Worker::twice, 21).get(std::chrono::seconds(30)), 42);

  // The name is gone: calls to it and a second removal are refused.
  try {
    gates.call(&Gate::enter_and_pass, dir.path(), int64_t{9}).get(std::chrono::seconds(30));
    FAIL() << "a call to a removed pool was taken";
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find("no actor or pool named 'gates'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rt.remove_pool("gates"), RejectedError);

  // The two methods that were running end on their own; their results are
  // dropped as stale, and the four that waited never ran.
  { std::ofstream open(dir.path() + "/open"); }
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& st) {
    return counter(st, "stale_completions") >= 2;
  }));
  EXPECT_EQ(lines_in(dir.path() + "/runs"), 2u);
  EXPECT_EQ(workers.call(&Worker::twice, 4).get(std::chrono::seconds(30)), 8);
}

// Both pools reach the head's tables; then one is removed, and the head is
// killed -9 (the journal replays the removal), then stopped by SIGTERM (it
// folds the removal into its tables, which the next start reads): the pool
// stays gone, the other stays, and the node's slot stays free.
TEST(RemovePool, TheRemovalSurvivesRestartsOfTheHead) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto lone = rt.spawn<Worker>("lone");
  auto kept = rt.spawn<Worker>("kept");
  EXPECT_EQ(lone.call(&Worker::twice, 1).get(std::chrono::seconds(30)), 2);
  EXPECT_EQ(kept.call(&Worker::twice, 2).get(std::chrono::seconds(30)), 4);
  // A clean restart first, so that both pools are rows in the head's tables.
  cluster.kill_head(SIGTERM);
  cluster.start_head();
  EXPECT_EQ(lone.call(&Worker::twice, 5).get(std::chrono::seconds(30)), 10);
  // By the command line this time.
  const auto out = testing::run_command(std::string(SPOTLIGHT_TEST_BIN) + " remove lone --key " +
                                        cluster.key() + " --address " + cluster.address());
  ASSERT_EQ(out.code, 0) << out.out;
  EXPECT_NE(out.out.find("removed lone"), std::string::npos) << out.out;

  for (int signal : {SIGKILL, SIGTERM}) {
    cluster.kill_head(signal);
    cluster.start_head();
    ClusterStatus s;
    EXPECT_TRUE(wait_for_status(cluster.address(),
                                [&](const ClusterStatus& st) {
                                  s = st;
                                  return !st.nodes.empty() && st.nodes[0].state == "alive" &&
                                         find_pool(st, "kept") &&
                                         find_pool(st, "kept")->placed == 1;
                                }))
        << "after signal " << signal;
    EXPECT_EQ(find_pool(s, "lone"), nullptr) << "after signal " << signal;
    EXPECT_EQ(s.nodes[0].used, 1) << "after signal " << signal;
    EXPECT_EQ(kept.call(&Worker::twice, 3).get(std::chrono::seconds(30)), 6);
    EXPECT_THROW(lone.call(&Worker::twice, 3).get(std::chrono::seconds(30)), RejectedError);
  }
}

}  // namespace
}  // namespace spotlight

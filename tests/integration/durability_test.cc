// Nothing accepted is lost when the head is killed: 1,000 calls accepted with
// no node attached, kill -9 of the head, a restart on the same store, nodes
// attached: all complete, none twice.
#include <gtest/gtest.h>

#include "support/cluster.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::find_pool;
using testing::wait_for_status;
using testing_actors::Recorder;

TEST(Durability, KillNineOfTheHeadLosesNothing) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("recorder");
  constexpr int kCalls = 1000;
  std::vector<Future<int64_t>> fs;
  for (int i = 0; i < kCalls; ++i) fs.push_back(rec.call(&Recorder::record, int64_t{i}));
  // Every call is accepted (committed) and waits: no node can run it.
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "recorder");
    return p && p->queued == kCalls;
  }));

  cluster.kill_head(SIGKILL);
  cluster.start_head();
  // The restarted head has all of them from its store.
  ClusterStatus after = cluster_status(cluster.address());
  EXPECT_EQ(after.boot, 2u);
  const PoolStatus* p = find_pool(after, "recorder");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->queued, static_cast<uint64_t>(kCalls));
  EXPECT_EQ(after.tasks_live, static_cast<uint64_t>(kCalls));

  cluster.add_node(2, "reserved");
  cluster.add_node(2, "reserved");
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(fs[i].get(std::chrono::seconds(60)), i);
  Recorder::Stats stats = rec.call(&Recorder::stats).get();
  EXPECT_EQ(stats.executions, kCalls + 0) << "no call ran twice";
  EXPECT_EQ(stats.distinct, kCalls + 0);
  // The client received every result and acknowledged it: nothing stays live.
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.tasks_live == 0;
  }));
}

TEST(Durability, ResultsStoredWhileTheCallerIsAwayAreDeliveredOnce) {
  LocalCluster cluster(cluster_options(1));
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("recorder2");
  std::vector<Future<int64_t>> fs;
  for (int i = 0; i < 200; ++i) fs.push_back(rec.call(&Recorder::record, int64_t{i}));
  for (int i = 0; i < 200; ++i) EXPECT_EQ(fs[i].get(), i);
  // Kill the head mid-stream of a second batch; the client resubmits what it
  // has no result for, and the head answers from its store or runs it once.
  std::vector<Future<int64_t>> more;
  for (int i = 200; i < 400; ++i) more.push_back(rec.call(&Recorder::record, int64_t{i}));
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(more[i].get(std::chrono::seconds(60)), 200 + i);
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.tasks_live == 0;
  }));
}

// A client acknowledges results lazily (with its next calls, or within a few
// milliseconds); one that leaves right after its last result must still
// acknowledge it, or the head would keep that result for a caller that is gone.
TEST(Durability, ACallerThatLeavesAtOnceLeavesNoResultBehind) {
  LocalCluster cluster(cluster_options(1));
  {
    auto rt = cluster.connect();
    auto rec = rt.spawn<Recorder>("recorder3");
    for (int i = 0; i < 50; ++i) ASSERT_EQ(rec.call(&Recorder::record, int64_t{i}).get(), i);
  }  // the client closes here, its last acknowledgement not yet due
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.tasks_live == 0;
  }));
}

}  // namespace
}  // namespace spotlight

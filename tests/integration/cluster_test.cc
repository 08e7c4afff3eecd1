// A real head and real nodes on loopback, driven through the client API.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "hello_actors.h"
#include "support/cluster.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::find_pool;
using testing::wait_for_status;
using testing_actors::Recorder;
using testing_actors::Worker;

class ClusterTest : public ::testing::Test {
 protected:
  // Enough slots for every actor the suite's tests spawn, so that the tests
  // also pass when they run one after another in this one cluster (the
  // binary run directly), not only each in its own (ctest).
  static constexpr int kSlots = 8;
  static void SetUpTestSuite() { cluster_ = new LocalCluster(cluster_options(2, kSlots)); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static LocalCluster* cluster_;
};
LocalCluster* ClusterTest::cluster_ = nullptr;

TEST_F(ClusterTest, CallsReturnTheRightValues) {
  auto rt = cluster_->connect();
  auto counter = rt.spawn<hello::Counter>("counter-values");
  std::vector<Future<int64_t>> fs;
  for (int i = 1; i <= 100; ++i) fs.push_back(counter.call(&hello::Counter::add, i));
  // A lone actor runs one caller's calls in order: the running sums prove it.
  int64_t sum = 0;
  for (int i = 1; i <= 100; ++i) {
    sum += i;
    EXPECT_EQ(fs[i - 1].get(), sum);
  }
  hello::Tally t = counter.call(&hello::Counter::get).get();
  EXPECT_EQ(t.value, 5050);
  EXPECT_EQ(t.calls, 100);
  auto w = rt.spawn<Worker>("worker-values");
  std::vector<std::string> v{"a", std::string("\0b", 2), ""};
  EXPECT_EQ(w.call(&Worker::echo_many, v).get(), v);
  // Calls by name, as a tool would make them.
  EXPECT_EQ(rt.call<int64_t>("worker-values", "twice", int64_t{21}).get(), 42);
}

TEST_F(ClusterTest, PoolOfFourSpreadsCallsOverAllMembers) {
  auto rt = cluster_->connect();
  auto pool = rt.pool<Worker>("spread", on_market("any").members(4).ahead(4));
  std::vector<Future<std::string>> fs;
  for (int i = 0; i < 1000; ++i) fs.push_back(pool.call(&Worker::who));
  std::map<std::string, int> by_member;
  for (auto& f : fs) by_member[f.get()]++;
  EXPECT_EQ(by_member.size(), 4u);
  for (const auto& [member, n] : by_member) EXPECT_GT(n, 0) << member;
  auto s = cluster_status(cluster_->address());
  const PoolStatus* p = find_pool(s, "spread");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->placed, 4);
  std::set<std::string> nodes;
  uint64_t completed = 0;
  for (const auto& a : s.actors) {
    if (a.pool == "spread") {
      nodes.insert(a.node);
      completed += a.completed;
    }
  }
  EXPECT_EQ(completed, 1000u);
  EXPECT_EQ(nodes.size(), 2u) << "members are spread over both nodes";
}

TEST_F(ClusterTest, MethodExceptionReachesTheCaller) {
  auto rt = cluster_->connect();
  auto w = rt.spawn<Worker>("thrower");
  try {
    w.call(&Worker::fail, std::string("the reason")).get();
    FAIL() << "no error";
  } catch (const MethodError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kMethod);
    EXPECT_EQ(e.type(), "std::invalid_argument");
    EXPECT_STREQ(e.what(), "the reason");
  }
  // The actor survives its method's exception.
  EXPECT_EQ(w.call(&Worker::twice, 4).get(), 8);
}

TEST_F(ClusterTest, UnknownActorAndMethodAreRejected) {
  auto rt = cluster_->connect();
  EXPECT_THROW(rt.call<int64_t>("no-such-actor", "twice", 1).get(), RejectedError);
  rt.spawn<Worker>("known");
  try {
    rt.call<int64_t>("known", "no_such_method").get();
    FAIL();
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_method"), std::string::npos);
  }
  EXPECT_THROW(rt.call<int64_t>("known", "twice", std::string("not a number")).get(), RejectedError);
  EXPECT_THROW(rt.call<int64_t>("known", "twice").get(), RejectedError);
  // A pool name reused with another type is refused.
  EXPECT_THROW(rt.spawn<Recorder>("known"), RejectedError);
  EXPECT_EQ(rt.call<int64_t>("known", "twice", int64_t{5}).get(), 10);
}

TEST_F(ClusterTest, StatusShowsTheCluster) {
  auto rt = cluster_->connect();
  auto w = rt.spawn<Worker>("status-worker");
  w.call(&Worker::twice, 1).get();
  ClusterStatus s = rt.status();
  ASSERT_GE(s.nodes.size(), 2u);
  for (const auto& n : s.nodes) {
    EXPECT_EQ(n.market, "reserved");
    EXPECT_EQ(n.state, "alive");
    EXPECT_EQ(n.slots, kSlots);
    EXPECT_LT(n.last_heartbeat_ms, 2000);
  }
  const PoolStatus* p = find_pool(s, "status-worker");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->type, "testing_actors::Worker");
  EXPECT_EQ(p->placed, 1);
  EXPECT_EQ(p->queued, 0u);
}

// A pool larger than the cluster waits for slots; a node that joins late takes the rest.
TEST(LateJoin, NodeThatJoinsLateGetsWork) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto pool = rt.pool<Worker>("late", on_market("spot").members(3).ahead(2));
  auto reserved = rt.pool<Worker>("early", on_market("reserved").members(2));
  std::vector<Future<std::string>> fs;
  for (int i = 0; i < 300; ++i) fs.push_back(pool.call(&Worker::who));
  // No spot slot exists yet: everything waits in the mailbox.
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "late");
    return p && p->queued == 300 && p->placed == 0;
  }));
  EXPECT_FALSE(fs[0].ready());
  cluster.add_node(3, "spot");
  std::map<std::string, int> members;
  for (auto& f : fs) members[f.get()]++;
  EXPECT_EQ(members.size(), 3u);
  ClusterStatus s = rt.status();
  for (const auto& a : s.actors) {
    if (a.pool == "late") {
      EXPECT_GT(a.completed, 0u) << "member " << a.id;
    }
  }
}

}  // namespace
}  // namespace spotlight

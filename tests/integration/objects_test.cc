// The object store (spotlight/objects.h) across real nodes: a blob put on
// one node is copied once to another node, then read by that node's other
// slot from memory; copies are evicted least recently used first and the
// head's directory follows; a dead node's copies are forgotten. A driver
// puts and gets through Runtime::objects(), and its copies go with it.
//
// Each cluster has a "reserved" node and a "spot" node, so that lone actors
// can be placed on a chosen node by their market.
#include <gtest/gtest.h>

#include <csignal>
#include <future>

#include "common/process.h"
#include "support/cluster.h"
#include "support/raw_peer.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::counter;
using testing::wait_for_status;
using testing_actors::object_bytes;
using testing_actors::ObjectUser;
using testing_actors::ObjectView;

constexpr auto kWait = std::chrono::seconds(30);

uint64_t digest(int64_t size, int64_t seed) { return std::hash<std::string>{}(object_bytes(size, seed)); }

// A reserved node with 2 slots (started with the cluster) and a spot node
// with 2 slots started with `spot_args`.
LocalCluster two_node_cluster(const std::vector<std::string>& spot_args = {}) {
  LocalCluster cluster(testing::cluster_options(1, 2));
  cluster.start_node(2, "spot", spot_args);
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    int alive = 0;
    for (const auto& n : s.nodes) alive += n.state == "alive";
    return alive == 2;
  }));
  return cluster;
}

// The two-node cluster with one ObjectUser on each node.
struct TwoActors {
  explicit TwoActors(const std::vector<std::string>& spot_args = {})
      : cluster(two_node_cluster(spot_args)),
        rt(cluster.connect()),
        reserved(rt.spawn<ObjectUser>("on-reserved", on_market("reserved"))),
        spot(rt.spawn<ObjectUser>("on-spot", on_market("spot"))) {}
  LocalCluster cluster;
  Runtime rt;
  ActorHandle<ObjectUser> reserved, spot;
};

TEST(Objects, CopiedOnceToAnotherNodeThenReadFromMemoryBySiblings) {
  LocalCluster cluster = two_node_cluster();
  auto rt = cluster.connect();
  auto writer = rt.spawn<ObjectUser>("writer", on_market("reserved"));
  auto sibling_of_writer = rt.spawn<ObjectUser>("writer-sibling", on_market("reserved"));
  auto reader = rt.spawn<ObjectUser>("reader", on_market("spot"));
  auto sibling_of_reader = rt.spawn<ObjectUser>("reader-sibling", on_market("spot"));
  constexpr int64_t kSize = 20 << 20;  // three chunks
  writer.call(&ObjectUser::put, std::string("policy@1"), kSize, int64_t{1}).get(kWait);

  ObjectView far = reader.call(&ObjectUser::get, std::string("policy@1"), int64_t{5000}).get(kWait);
  EXPECT_EQ(far.size, static_cast<uint64_t>(kSize));
  EXPECT_EQ(far.digest, digest(kSize, 1)) << "the same bytes on the other node";
  EXPECT_EQ(far.fetches, 1u);
  EXPECT_EQ(far.local_hits, 0u);

  ObjectView near = sibling_of_reader.call(&ObjectUser::get, std::string("policy@1"), int64_t{5000}).get(kWait);
  EXPECT_EQ(near.pid, far.pid) << "the sibling runs on the reader's node";
  EXPECT_EQ(near.digest, digest(kSize, 1));
  EXPECT_EQ(near.fetches, 1u) << "no second copy over the network";
  EXPECT_EQ(near.local_hits, 1u) << "read from the node's memory";

  ObjectView home = sibling_of_writer.call(&ObjectUser::get, std::string("policy@1"), int64_t{5000}).get(kWait);
  EXPECT_NE(home.pid, far.pid);
  EXPECT_EQ(home.fetches, 0u);
  EXPECT_EQ(home.local_hits, 1u);

  ClusterStatus s = rt.status();
  EXPECT_EQ(counter(s, "object_adds"), 2u) << "the writer's copy and the reader's";
  EXPECT_EQ(counter(s, "object_wheres"), 1u) << "only the first reader asked the head";
}

TEST(Objects, GetWaitsForAPutAndTimesOutClearly) {
  TwoActors c;
  auto& cluster = c.cluster;
  auto& writer = c.reserved;
  auto& reader = c.spot;
  auto waiting = reader.call(&ObjectUser::get, std::string("policy@2"), int64_t{20000});
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "object_wheres") >= 1;
  })) << "the reader is waiting at the head";
  writer.call(&ObjectUser::put, std::string("policy@2"), int64_t{1000}, int64_t{2}).get(kWait);
  EXPECT_EQ(waiting.get(kWait).digest, digest(1000, 2));

  try {
    reader.call(&ObjectUser::get, std::string("never-put"), int64_t{200}).get(kWait);
    FAIL() << "expected a timeout";
  } catch (const MethodError& e) {
    EXPECT_EQ(e.type(), "spotlight::TimeoutError");
    EXPECT_NE(std::string(e.what()).find("never-put"), std::string::npos) << e.what();
  }
}

TEST(Objects, AreImmutable) {
  TwoActors c;
  auto& a = c.reserved;
  auto& b = c.spot;
  a.call(&ObjectUser::put, std::string("v"), int64_t{100}, int64_t{1}).get(kWait);
  a.call(&ObjectUser::put, std::string("v"), int64_t{100}, int64_t{1}).get(kWait);  // same bytes: fine
  EXPECT_THROW(a.call(&ObjectUser::put, std::string("v"), int64_t{100}, int64_t{2}).get(kWait), MethodError);
  try {
    b.call(&ObjectUser::put, std::string("v"), int64_t{100}, int64_t{3}).get(kWait);
    FAIL() << "another node put other bytes under the same id";
  } catch (const MethodError& e) {
    EXPECT_NE(std::string(e.what()).find("immutable"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(b.call(&ObjectUser::contains, std::string("v")).get(kWait)) << "the refused copy is not kept";
  EXPECT_EQ(b.call(&ObjectUser::get, std::string("v"), int64_t{1000}).get(kWait).digest, digest(100, 1));
}

TEST(Objects, EvictsLeastRecentlyUsedUnpinnedCopies) {
  TwoActors c({"--object-store-mb", "8"});
  auto& cluster = c.cluster;
  auto& big = c.reserved;
  auto& small = c.spot;
  constexpr int64_t kMiB3 = 3 << 20;
  for (int64_t k = 0; k < 3; ++k) {
    big.call(&ObjectUser::put, "w" + std::to_string(k), kMiB3, k).get(kWait);
  }
  small.call(&ObjectUser::get, std::string("w0"), int64_t{5000}).get(kWait);
  small.call(&ObjectUser::get, std::string("w1"), int64_t{5000}).get(kWait);
  small.call(&ObjectUser::get, std::string("w0"), int64_t{5000}).get(kWait);  // w1 is now the oldest
  ObjectView v = small.call(&ObjectUser::get, std::string("w2"), int64_t{5000}).get(kWait);
  EXPECT_EQ(v.evictions, 1u);
  EXPECT_EQ(v.bytes, static_cast<uint64_t>(2 * kMiB3));
  EXPECT_TRUE(small.call(&ObjectUser::contains, std::string("w0")).get(kWait));
  EXPECT_FALSE(small.call(&ObjectUser::contains, std::string("w1")).get(kWait)) << "least recently used";
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "object_drops") == 1;
  })) << "the head was told";
  EXPECT_EQ(small.call(&ObjectUser::get, std::string("w1"), int64_t{5000}).get(kWait).fetches, 4u)
      << "copied again when needed again";

  // A pinned copy (the putter's) is never evicted: a store full of them refuses more.
  auto small2 = c.rt.spawn<ObjectUser>("small-2", on_market("spot"));
  small2.call(&ObjectUser::put, std::string("mine"), int64_t{5 << 20}, int64_t{9}).get(kWait);
  EXPECT_THROW(small2.call(&ObjectUser::put, std::string("mine-2"), int64_t{5 << 20}, int64_t{10}).get(kWait),
               MethodError);
  small2.call(&ObjectUser::release, std::string("mine")).get(kWait);
  small2.call(&ObjectUser::put, std::string("mine-2"), int64_t{5 << 20}, int64_t{10}).get(kWait);
  EXPECT_FALSE(small2.call(&ObjectUser::contains, std::string("mine")).get(kWait));
}

TEST(Objects, ADeadNodesCopiesAreForgotten) {
  TwoActors c;
  auto& writer = c.spot;
  auto& reader = c.reserved;
  writer.call(&ObjectUser::put, std::string("lost"), int64_t{1000}, int64_t{5}).get(kWait);
  ClusterStatus s = c.rt.status();
  pid_t spot_pid = 0;
  for (const auto& n : s.nodes) {
    if (n.market == "spot") spot_pid = static_cast<pid_t>(n.pid);
  }
  ASSERT_NE(spot_pid, 0);
  common::signal_process(spot_pid, SIGKILL);
  ASSERT_TRUE(wait_for_status(c.cluster.address(), [](const ClusterStatus& st) {
    return counter(st, "object_copies_lost") == 1;
  }));
  try {
    reader.call(&ObjectUser::get, std::string("lost"), int64_t{200}).get(kWait);
    FAIL() << "its only copy died with its node";
  } catch (const MethodError& e) {
    EXPECT_EQ(e.type(), "spotlight::TimeoutError");
  }
}

TEST(Objects, ADriverPutsForActorsAndGetsWhatTheyPut) {
  TwoActors c;
  constexpr int64_t kSize = 20 << 20;  // three chunks
  ObjectStore& mine = c.rt.objects();
  mine.put("weights@0", object_bytes(kSize, 7));
  EXPECT_TRUE(mine.contains("weights@0"));
  for (auto* actor : {&c.reserved, &c.spot}) {
    ObjectView v =
        actor->call(&ObjectUser::get, std::string("weights@0"), int64_t{5000}).get(kWait);
    EXPECT_EQ(v.size, static_cast<uint64_t>(kSize));
    EXPECT_EQ(v.digest, digest(kSize, 7)) << "the driver's bytes, on a node";
  }
  // Objects stay immutable from a driver too.
  EXPECT_THROW(mine.put("weights@0", object_bytes(kSize, 8)), RejectedError);

  // What an actor puts, the driver copies.
  c.spot.call(&ObjectUser::put, std::string("rollouts@1"), int64_t{3 << 20}, int64_t{9}).get(kWait);
  ObjectRef got = mine.get("rollouts@1", std::chrono::seconds(5));
  ASSERT_NE(got, nullptr);
  EXPECT_TRUE(*got == object_bytes(3 << 20, 9));
  EXPECT_EQ(mine.stats().fetches, 1u);
  EXPECT_EQ(mine.get("rollouts@1", std::chrono::seconds(5)), got) << "the second get is local";
  EXPECT_EQ(mine.stats().local_hits, 1u);

  // A driver's get waits for an actor's put.
  auto later =
      std::async(std::launch::async, [&] { return mine.get("late@1", std::chrono::seconds(30)); });
  EXPECT_EQ(later.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  c.reserved.call(&ObjectUser::put, std::string("late@1"), int64_t{1000}, int64_t{3}).get(kWait);
  EXPECT_TRUE(*later.get() == object_bytes(1000, 3));
}

TEST(Objects, ADriversCopiesGoWhenItCloses) {
  TwoActors c;
  {
    Runtime other = c.cluster.connect();
    other.objects().put("shared@1", object_bytes(1 << 20, 1));
    other.objects().put("solo@1", object_bytes(1 << 20, 2));
    // The reserved node copies one of them: from then on it holds a copy too.
    EXPECT_EQ(
        c.reserved.call(&ObjectUser::get, std::string("shared@1"), int64_t{5000}).get(kWait).digest,
        digest(1 << 20, 1));
  }
  EXPECT_GE(counter(c.rt.status(), "object_drops"), 2u)
      << "the closing driver's copies were not dropped";
  // The node's copy still serves the other node; the driver's only copy is gone.
  ObjectView v = c.spot.call(&ObjectUser::get, std::string("shared@1"), int64_t{5000}).get(kWait);
  EXPECT_EQ(v.digest, digest(1 << 20, 1));
  EXPECT_EQ(v.fetches, 1u);
  try {
    c.spot.call(&ObjectUser::get, std::string("solo@1"), int64_t{300}).get(kWait);
    FAIL() << "its only copy went with its driver";
  } catch (const MethodError& e) {
    EXPECT_EQ(e.type(), "spotlight::TimeoutError");
  }
}

// A restarted head knows no copies; the driver tells it again of its own
// when the head welcomes it back, as nodes do.
TEST(Objects, ADriverAnnouncesItsCopiesToARestartedHead) {
  TwoActors c;
  c.rt.objects().put("kept@1", object_bytes(1000, 4));
  c.cluster.kill_head(SIGKILL);
  c.cluster.start_head();
  ObjectView v = c.spot.call(&ObjectUser::get, std::string("kept@1"), int64_t{10000}).get(kWait);
  EXPECT_EQ(v.digest, digest(1000, 4));
}

// A driver that dies cannot say so: its copies go when the head takes its
// connection for gone (three liveness windows without a word). The head
// takes copies only from live nodes and connected drivers.
TEST(Objects, ASilentDriversCopiesAreForgotten) {
  ClusterOptions o = testing::cluster_options(0);
  o.head_args = {"--liveness-ms", "300"};
  LocalCluster cluster(o);
  testing::RawPeer driver(cluster.address());
  driver.hello_client("client-silent");
  auto add = [&](const std::string& holder) {
    return wire::encode(wire::ObjectAdd{"silent@1", holder, "127.0.0.1:9", 10, 5});
  };
  EXPECT_EQ(driver.error_for(add(std::string(wire::kDriverHolderPrefix) + "client-nobody")),
            wire::ErrorCode::kBadRequest);
  driver.send(add(std::string(wire::kDriverHolderPrefix) + "client-silent"));
  auto ok = driver.reply();
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->type, wire::MsgType::kOk);
  testing::RawPeer asker(cluster.address());
  auto where = [&] {
    asker.send(wire::encode(wire::ObjectWhere{"silent@1", 0}));
    auto env = asker.reply();
    return env && env->type == wire::MsgType::kObjectLocations &&
           env->body<wire::ObjectLocations>().found;
  };
  EXPECT_TRUE(where());
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& st) {
    return counter(st, "object_copies_lost") == 1;
  }));
  EXPECT_FALSE(where());
}

}  // namespace
}  // namespace spotlight

// Placement::strategy and Placement::node: "spread" (the default) puts
// members where the most slots are free, "pack" puts them beside the pool's
// other members, and a pool pinned to a node waits for slots there rather
// than going elsewhere; the choice survives a head restart. Then the limit
// of members per node, the preferred node, and pools beside or away from
// other pools.
#include <gtest/gtest.h>

#include <map>

#include "support/cluster.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::wait_for_status;
using testing_actors::Worker;

// Members of `pool` per node id ("" for those not placed), once every member
// is placed or waiting as `placed` says.
std::map<std::string, int> members_by_node(const std::string& address, const std::string& pool,
                                           int placed) {
  std::map<std::string, int> by_node;
  EXPECT_TRUE(wait_for_status(address, [&](const ClusterStatus& s) {
    by_node.clear();
    int ready = 0;
    for (const auto& a : s.actors) {
      if (a.pool != pool) continue;
      by_node[a.state == "ready" ? a.node : ""] += 1;
      ready += a.state == "ready";
    }
    return ready == placed;
  })) << pool;
  return by_node;
}

TEST(Placement, SpreadPackAndPinnedToANode) {
  LocalCluster cluster(cluster_options(2, 4));
  auto rt = cluster.connect();

  auto spread = rt.pool<Worker>("spread", on_market("any").members(4));
  auto s = members_by_node(cluster.address(), "spread", 4);
  ASSERT_EQ(s.size(), 2u);
  for (const auto& [node, n] : s) EXPECT_EQ(n, 2) << node;
  rt.remove_pool("spread");

  auto packed = rt.pool<Worker>("packed", on_market("any").members(3).pack());
  auto p = members_by_node(cluster.address(), "packed", 3);
  ASSERT_EQ(p.size(), 1u) << "all on one node";
  const std::string full = p.begin()->first;  // one slot left there
  std::string other;
  for (const auto& n : rt.status().nodes) {
    if (n.id != full) other = n.id;
  }
  ASSERT_FALSE(other.empty());

  // Pinned to the fuller node: one member takes its last slot, the other
  // waits, though the other node has four free.
  auto pinned = rt.pool<Worker>("pinned", on_market("any").members(2).on_node(full));
  auto q = members_by_node(cluster.address(), "pinned", 1);
  EXPECT_EQ(q[full], 1);
  EXPECT_EQ(q[""], 1);
  EXPECT_EQ(q.count(other), 0u);
  // Status says why: one node is not the pinned one, the pinned one is full.
  const std::string why = testing::find_pool(rt.status(), "pinned")->waiting_for;
  EXPECT_NE(why.find("1 member(s) wait: none of 2 node(s) fits"), std::string::npos) << why;
  EXPECT_NE(why.find("1 not node " + full + " (pinned)"), std::string::npos) << why;
  EXPECT_NE(why.find("1 fewer than 1 free slot(s)"), std::string::npos) << why;
  EXPECT_EQ(pinned.call(&Worker::twice, int64_t{4}).get(std::chrono::seconds(60)), 8);

  // After a restart the pin holds: the waiting member still does not go elsewhere.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  rt.remove_pool("packed");  // frees three slots there
  auto r = members_by_node(cluster.address(), "pinned", 2);
  EXPECT_EQ(r[full], 2);
  // The removal reached the new head once: a client that resent it for each
  // frame the new head dropped had it refused the second time, and that
  // refusal could overtake the first copy's answer.
  const ClusterStatus after = rt.status();
  EXPECT_EQ(testing::counter(after, "pools_removed"), 1u);
  EXPECT_EQ(testing::counter(after, "error_bad_request"), 0u);
}

// Placement::max_per_node (anti-affinity) holds across a head restart: the
// member beyond it waits for a third node though two have free slots; and
// Placement::prefer (soft affinity) fills its node first, then goes on by
// the strategy.
TEST(Placement, AtMostPerNodeAndAPreferredNode) {
  LocalCluster cluster(cluster_options(2, 4));
  auto rt = cluster.connect();
  auto one_each = rt.pool<Worker>("one-each", on_market("any").members(3).at_most_per_node(1));
  auto a = members_by_node(cluster.address(), "one-each", 2);
  EXPECT_EQ(a[""], 1) << "the third member waits";
  for (const auto& [node, n] : a) EXPECT_EQ(n, 1) << node;
  EXPECT_EQ(one_each.call(&Worker::twice, int64_t{5}).get(std::chrono::seconds(60)), 10);
  const std::string why = testing::find_pool(rt.status(), "one-each")->waiting_for;
  EXPECT_NE(why.find("2 holding 1 member(s), the most per node"), std::string::npos) << why;
  // A market no node is on: said as such.
  rt.pool<Worker>("spot-only", on_market("spot"));
  const std::string spot = testing::find_pool(rt.status(), "spot-only")->waiting_for;
  EXPECT_NE(spot.find("2 not on market spot"), std::string::npos) << spot;
  rt.remove_pool("spot-only");

  // A head that forgot the rule would place the waiting member at once, on
  // a node that already has one.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  cluster.add_node(4, "reserved");
  auto b = members_by_node(cluster.address(), "one-each", 3);
  ASSERT_EQ(b.size(), 3u);
  for (const auto& [node, n] : b) EXPECT_EQ(n, 1) << node;
  EXPECT_EQ(testing::find_pool(rt.status(), "one-each")->waiting_for, "");

  // Three nodes with three free slots each; spread would split four
  // members 2/1/1, preferring one node puts three there and one elsewhere.
  const std::string preferred = b.rbegin()->first;
  auto near = rt.pool<Worker>("near", on_market("any").members(4).prefer_node(preferred));
  auto c = members_by_node(cluster.address(), "near", 4);
  EXPECT_EQ(c[preferred], 3);
  EXPECT_EQ(c.size(), 2u) << "the fourth member on another node";
  // A preferred node that is not there is no reason to wait.
  auto elsewhere =
      rt.pool<Worker>("elsewhere", on_market("any").members(2).prefer_node("no-such-node"));
  auto d = members_by_node(cluster.address(), "elsewhere", 2);
  EXPECT_EQ(d.count(""), 0u);
}

// Placement::beside (affinity between pools): members go only where the
// other pool has members, and wait, saying why, while it has none; near,
// they go there first and elsewhere rather than wait; and
// Placement::away_from (anti-affinity between pools), which holds whichever
// pool comes first and across a head restart.
TEST(Placement, BesideAndAwayFromAnotherPool) {
  LocalCluster cluster(cluster_options(3, 4));
  auto rt = cluster.connect();
  // Before the pool it is to be beside exists: it waits, and says so.
  auto reward = rt.pool<Worker>("reward", on_market("any").members(4).beside_pool("rollouts"));
  auto r0 = members_by_node(cluster.address(), "reward", 0);
  EXPECT_EQ(r0[""], 4);
  const std::string missing = testing::find_pool(rt.status(), "reward")->waiting_for;
  EXPECT_NE(missing.find("for pool rollouts, which they are to be beside and which does not exist"),
            std::string::npos)
      << missing;
  EXPECT_EQ(testing::find_pool(rt.status(), "reward")->placement, "beside pool rollouts");

  // Two rollouts on two of the three nodes: the four reward members follow
  // them there, in the same turn (the head visits "reward" first, finds no
  // node, places the rollouts, and looks again); spread alone would have
  // put some on the third node.
  rt.pool<Worker>("rollouts", on_market("any").members(2).at_most_per_node(1));
  auto e = members_by_node(cluster.address(), "rollouts", 2);
  auto r = members_by_node(cluster.address(), "reward", 4);
  ASSERT_EQ(e.size(), 2u);
  ASSERT_EQ(r.size(), 2u);
  for (const auto& [node, n] : r) EXPECT_EQ(e.count(node), 1u) << node << " hosts no rollout";
  EXPECT_EQ(reward.call(&Worker::twice, int64_t{21}).get(std::chrono::seconds(60)), 42);

  // A pool away from the rollouts takes the third node, the only one
  // without them; packed, it would have taken the fullest node, a
  // rollout's, first.
  std::string third;
  for (const auto& n : rt.status().nodes) {
    if (!e.count(n.id)) third = n.id;
  }
  ASSERT_FALSE(third.empty());
  rt.pool<Worker>("trainer", on_market("any").members(2).pack().away_from_pool("rollouts"));
  auto t = members_by_node(cluster.address(), "trainer", 2);
  EXPECT_EQ(t[third], 2);

  // Near, not beside: the rollouts' nodes have one free slot each, the
  // third node two. Three members take those two slots, then the third
  // node rather than wait; spread alone would have put two on the third.
  rt.pool<Worker>("scorer", on_market("any").members(3).near_pool("rollouts"));
  auto near = members_by_node(cluster.address(), "scorer", 3);
  EXPECT_EQ(near[third], 1);
  for (const auto& [node, n] : e) EXPECT_EQ(near[node], 1) << node;
  EXPECT_EQ(testing::find_pool(rt.status(), "scorer")->placement, "near pool rollouts");
  rt.remove_pool("scorer");

  // The other way round, across a restart: "guard" keeps away from "late",
  // which does not exist yet; "late", pinned to guard's node, waits there.
  rt.pool<Worker>("guard", on_market("any").on_node(third).away_from_pool("late"));
  members_by_node(cluster.address(), "guard", 1);
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  members_by_node(cluster.address(), "guard", 1);  // its node said hello again
  rt.pool<Worker>("late", on_market("any").on_node(third));
  auto l = members_by_node(cluster.address(), "late", 0);
  EXPECT_EQ(l[""], 1);
  const std::string clash = testing::find_pool(rt.status(), "late")->waiting_for;
  EXPECT_NE(clash.find("1 hosting a member of a pool it must not share a node with"),
            std::string::npos)
      << clash;
  // Once the guard is gone, nothing keeps "late" off its node.
  rt.remove_pool("guard");
  auto l2 = members_by_node(cluster.address(), "late", 1);
  EXPECT_EQ(l2[third], 1);

  // Creating a pool that exists keeps its options, and says which.
  const std::string type = testing::find_pool(rt.status(), "reward")->type;
  EXPECT_EQ(rt.create_pool("reward", type, on_market("any").members(4).beside_pool("rollouts")),
            "");
  EXPECT_EQ(
      rt.create_pool("reward", type, on_market("spot").members(8)),
      "market 'any' (asked 'spot'), members 4 (asked 8), beside pool 'rollouts' (asked none)");
  EXPECT_EQ(testing::counter(rt.status(), "pools_kept_options"), 1u);
  EXPECT_EQ(testing::find_pool(rt.status(), "reward")->size, 4);
}

// Every waiting pool says why, up to the first 256 in a status; the rest
// say only how many members wait (each explanation visits every node).
TEST(Placement, StatusExplainsTheFirstWaitingPools) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  for (int i = 0; i < 260; ++i) rt.spawn<Worker>("waiting-" + std::to_string(i));
  size_t explained = 0, counted = 0;
  for (const auto& p : rt.status().pools) {
    explained += p.waiting_for == "1 member(s) wait: no node has joined";
    counted +=
        p.waiting_for == "1 member(s) wait (reasons are given for the first 256 waiting pools)";
  }
  EXPECT_EQ(explained, 256u);
  EXPECT_EQ(counted, 4u);
}

TEST(Placement, ABadStrategyOrAgingIsRefused) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  auto refused = [&](const Placement& where, const std::string& why) {
    try {
      rt.pool<Worker>("badly-placed", where);
      ADD_FAILURE() << "a pool was created that should be refused for: " << why;
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  Placement where = on_market("any");
  where.strategy = "scatter";
  refused(where, "spread or pack");
  refused(on_market("any").age_priorities(std::chrono::milliseconds(-1)),
          "priority aging must be between");
  refused(on_market("any").age_priorities(std::chrono::hours(24 * 31)), "30 days");
  refused(on_market("any").at_most_per_node(-1), "max members per node");
  refused(on_market("any").members(3).at_most_per_node(2).on_node("node-a"),
          "could never place all its members");
  refused(on_market("any").on_node("node-a").prefer_node("node-b"), "cannot prefer node node-b");
  refused(on_market("any").beside_pool("badly-placed"), "beside or away from itself");
  refused(on_market("any").away_from_pool("badly-placed"), "beside or away from itself");
  refused(on_market("any").beside_pool("other").away_from_pool("other"),
          "both beside and away from pool other");
  refused(on_market("any").members(2).sequence_parallel(2).preemptive(),
          "preemption by priority is not for pools with SP groups");
  // The head goes on serving, and created none of them.
  const ClusterStatus s = rt.status();
  EXPECT_EQ(testing::counter(s, "rejected_pools"), 10u);
  EXPECT_EQ(testing::find_pool(s, "badly-placed"), nullptr);
}

}  // namespace
}  // namespace spotlight

// SP groups formed by the head (DESIGN.md §3, "Elastic SP groups"): a pool
// with an SP degree runs each call on a group of members that all-reduce
// through a Gloo communicator built from the head's KV; when a member's node
// is killed with SIGKILL the group re-forms around the survivors with a new
// epoch, without restarting them, and the call resumes from its last commit.
#include <gtest/gtest.h>

#include <csignal>
#include <set>

#include "common/process.h"
#include "support/cluster.h"
#include "support/sp_test_actors.h"

namespace spotlight {
namespace {

using testing::wait_for_status;
using testing_actors::sp_expected_total;
using testing_actors::SpReport;
using testing_actors::SpSummer;

using testing::counter;

ClusterOptions sp_cluster(int nodes) {
  ClusterOptions o = testing::cluster_options(nodes, 1);
  o.load = {SPOTLIGHT_SP_TEST_ACTORS};
  return o;
}

const NodeStatus* node_of_actor(const ClusterStatus& s, uint64_t actor) {
  for (const auto& a : s.actors) {
    if (a.id != actor) continue;
    for (const auto& n : s.nodes) {
      if (n.id == a.node) return &n;
    }
  }
  return nullptr;
}

TEST(SpGroups, PoolFormsGroupsAndEachCallRunsOnEveryMember) {
  LocalCluster cluster(sp_cluster(4));
  auto rt = cluster.connect();
  auto pool = rt.pool<SpSummer>("sp", on_market("any").members(4).sequence_parallel(2));
  ClusterStatus formed;
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    formed = s;
    return s.groups.size() == 2;
  }));
  std::set<uint64_t> members, epochs;
  for (const auto& g : formed.groups) {
    EXPECT_EQ(g.pool, "sp");
    EXPECT_EQ(g.members.size(), 2u);
    members.insert(g.members.begin(), g.members.end());
    epochs.insert(g.epoch);
  }
  EXPECT_EQ(members.size(), 4u) << "every member in exactly one group";
  EXPECT_EQ(epochs.size(), 2u) << "each formation has its own epoch";

  constexpr int kCalls = 6;
  std::vector<Future<SpReport>> fs;
  for (int i = 0; i < kCalls; ++i) fs.push_back(pool.call(&SpSummer::run, int64_t{5}, int64_t{0}));
  std::set<std::string> groups;
  for (auto& f : fs) {
    SpReport r = f.get(std::chrono::seconds(30));
    EXPECT_EQ(r.total, sp_expected_total(5, 2)) << "both ranks took part in every all-reduce";
    EXPECT_EQ(r.members.size(), 2u);
    EXPECT_EQ(r.formations, 1) << "one communicator per formation, reused by its later tasks";
    groups.insert(r.group);
  }
  EXPECT_EQ(groups.size(), 2u) << "both groups got work";
  // Rank 1's completions may reach the head after rank 0's results.
  ClusterStatus after;
  EXPECT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    after = s;
    return counter(s, "sp_member_results") + counter(s, "sp_member_results_late") >= kCalls;
  })) << "rank 1 ran every call too";
  EXPECT_EQ(counter(after, "sp_member_results") + counter(after, "sp_member_results_late"),
            static_cast<uint64_t>(kCalls));
  EXPECT_EQ(counter(after, "sp_groups_broken"), 0u);
}

constexpr int64_t kSteps = 30;

// Three nodes of one slot, a pool of 3 at degree 2 (one group and a free
// member), and a call of kSteps steps that has committed a few of them.
struct BusyGroup {
  LocalCluster cluster{sp_cluster(3)};
  Runtime rt = cluster.connect();
  Future<SpReport> f;
  ClusterStatus before;
  SpGroupStatus group;
  BusyGroup() {
    auto pool = rt.pool<SpSummer>("sp", on_market("any").members(3).sequence_parallel(2));
    f = pool.call(&SpSummer::run, kSteps, int64_t{40});
    EXPECT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
      before = s;
      return counter(s, "commits") >= 5 && s.groups.size() == 1 && s.groups[0].task != 0;
    }));
    if (!before.groups.empty()) group = before.groups[0];
  }
};

// Kills the node of one member (rank `victim_rank`) while the group runs a
// call; a third, free member takes its place.
void kill_member_mid_call(int victim_rank) {
  BusyGroup b;
  ASSERT_EQ(b.group.members.size(), 2u);
  auto& [cluster, rt, f, before, group] = b;
  const uint64_t victim = group.members[victim_rank];
  const uint64_t survivor = group.members[1 - victim_rank];
  const NodeStatus* victim_node = node_of_actor(before, victim);
  const NodeStatus* survivor_node = node_of_actor(before, survivor);
  ASSERT_NE(victim_node, nullptr);
  ASSERT_NE(survivor_node, nullptr);
  const uint64_t committed = counter(before, "commits");
  common::signal_process(static_cast<pid_t>(victim_node->pid), SIGKILL);

  SpReport r = f.get(std::chrono::seconds(60));
  EXPECT_EQ(r.total, sp_expected_total(kSteps, 2)) << "the same result as an undisturbed run";
  EXPECT_TRUE(r.resumed);
  EXPECT_GE(r.started_at, static_cast<int64_t>(committed) - 1) << "resumed from its last commit";
  EXPECT_GT(r.epoch, group.epoch) << "a new formation";
  EXPECT_EQ(r.members.size(), 2u);
  EXPECT_EQ(std::count(r.members.begin(), r.members.end(), victim), 0) << "the killed member is out";
  EXPECT_EQ(std::count(r.members.begin(), r.members.end(), survivor), 1) << "the survivor is in";

  ClusterStatus after = rt.status();
  EXPECT_GE(counter(after, "sp_groups_broken"), 1u);
  EXPECT_GE(counter(after, "sp_groups_formed"), 2u);
  const NodeStatus* survivor_after = node_of_actor(after, survivor);
  ASSERT_NE(survivor_after, nullptr) << "the survivor was not moved or restarted";
  EXPECT_EQ(survivor_after->pid, survivor_node->pid);
  EXPECT_EQ(survivor_after->state, "alive");
  for (const auto& a : after.actors) {
    if (a.id == survivor) {
      EXPECT_EQ(a.incarnation, 1u) << "the survivor's actor was never re-placed";
    }
  }
}

TEST(SpGroups, KillNineOfRankOneReformsAroundTheSurvivorAndResumes) { kill_member_mid_call(1); }
TEST(SpGroups, KillNineOfRankZeroReformsAroundTheSurvivorAndResumes) { kill_member_mid_call(0); }

// SIGTERM to the node of one member mid-call: the node has notice, the
// whole group yields after the same step (SpMember::should_yield), and the
// call resumes in a new group without computing any step twice.
void drain_member_mid_call(int victim_rank) {
  BusyGroup b;
  ASSERT_EQ(b.group.members.size(), 2u);
  auto& [cluster, rt, f, before, group] = b;
  const uint64_t victim = group.members[victim_rank];
  const NodeStatus* victim_node = node_of_actor(before, victim);
  ASSERT_NE(victim_node, nullptr);
  const std::string victim_id = victim_node->id;
  common::signal_process(static_cast<pid_t>(victim_node->pid), SIGTERM);

  SpReport r = f.get(std::chrono::seconds(60));
  EXPECT_EQ(r.total, sp_expected_total(kSteps, 2));
  EXPECT_EQ(r.attempt, 1u) << "a yield is not a failed attempt";
  EXPECT_TRUE(r.resumed);
  EXPECT_GT(r.epoch, group.epoch);
  EXPECT_EQ(std::count(r.members.begin(), r.members.end(), victim), 0) << "the member with notice left";
  EXPECT_LE(r.steps_run, kSteps) << "rank 0's actor computed no step twice";
  ClusterStatus after;
  EXPECT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    after = s;
    for (const auto& n : s.nodes) {
      if (n.id == victim_id) return n.state == "dead";
    }
    return false;
  })) << "the drained node left";
  EXPECT_EQ(counter(after, "commits"), static_cast<uint64_t>(kSteps)) << "with notice no step is computed twice";
  EXPECT_EQ(counter(after, "nodes_lost"), 0u);
  EXPECT_GE(counter(after, "tasks_handed_back"), 1u);
}

TEST(SpGroups, DrainOfRankOnesNodeYieldsTheGroupAndLosesNoStep) { drain_member_mid_call(1); }

// Runtime::cancel of a call a group runs: both members see it through
// should_yield (SpMember agrees on it), stop at the same step, and the group
// re-forms with a new epoch before it takes the next call.
TEST(SpGroups, ACancelledCallStopsTheGroupWhichReforms) {
  BusyGroup b;
  auto& [cluster, rt, f, before, group] = b;
  EXPECT_EQ(rt.cancel(f), CancelOutcome::kCancelled);
  EXPECT_THROW(f.get(std::chrono::seconds(60)), CancelledError);
  auto pool = rt.actor<SpSummer>("sp");
  SpReport r = pool.call(&SpSummer::run, int64_t{3}, int64_t{1}).get(std::chrono::seconds(60));
  EXPECT_EQ(r.total, sp_expected_total(3, 2));
  EXPECT_FALSE(r.resumed) << "a new call, not the cancelled one";
  EXPECT_GT(r.epoch, group.epoch) << "a new formation";
  ClusterStatus after = rt.status();
  // The new group has a member of the old one, which ended the cancelled run
  // first. The run stopped within a step of the cancel: the commits it made
  // after it (stale) are few, where going on would have made some 25.
  EXPECT_LE(counter(after, "stale_commits"), 3u);
  EXPECT_EQ(counter(after, "tasks_cancelled_leased"), 1u);
  EXPECT_GE(counter(after, "sp_groups_broken"), 1u);
  EXPECT_EQ(counter(after, "nodes_lost"), 0u);
}

// A group's rendezvous keys live as long as the group: each formation
// writes its members' addresses to the head's KV, and a pool that re-forms
// around preemptions for weeks must not keep every formation's keys.
TEST(SpGroups, TheHeadForgetsAFormationsRendezvousKeysWhenItsGroupEnds) {
  BusyGroup b;
  auto& [cluster, rt, f, before, group] = b;
  const uint64_t keys = counter(before, "kv_keys");
  ASSERT_GT(keys, 0u) << "the running group rendezvoused through the head's KV";
  ASSERT_GT(counter(before, "kv_bytes"), 0u);
  auto pool = rt.actor<SpSummer>("sp");
  constexpr int kFormations = 3;
  for (int i = 0; i < kFormations; ++i) {
    // A cancelled run breaks its group; the next call runs in a new formation.
    ASSERT_EQ(rt.cancel(f), CancelOutcome::kCancelled);
    EXPECT_THROW(f.get(std::chrono::seconds(60)), CancelledError);
    f = pool.call(&SpSummer::run, kSteps, int64_t{40});
    ASSERT_TRUE(wait_for_status(cluster.address(),
                                [&](const ClusterStatus& s) {
                                  return s.groups.size() == 1 && s.groups[0].task != 0 &&
                                         counter(s, "kv_keys") == keys &&
                                         counter(s, "kv_keys_dropped") == (i + 1) * keys;
                                }))
        << "formation " << i + 2 << " holds as many keys as the first, and the last one's are gone";
  }
  ClusterStatus running = rt.status();
  EXPECT_EQ(counter(running, "sp_groups_broken"), static_cast<uint64_t>(kFormations));
  // Removing the pool ends its last group, and its keys with it.
  rt.remove_pool("sp");
  EXPECT_THROW(f.get(std::chrono::seconds(60)), RejectedError);
  ClusterStatus removed = rt.status();
  EXPECT_EQ(counter(removed, "kv_keys"), 0u);
  EXPECT_EQ(counter(removed, "kv_bytes"), 0u);
}
TEST(SpGroups, DrainOfRankZerosNodeYieldsTheGroupAndLosesNoStep) { drain_member_mid_call(0); }

// The head is killed with SIGKILL while a group runs a call, and restarted
// on the same store: the members keep running (their communicator does not
// need the head), the restarted head takes rank 0's lease back and forms
// its groups again with new epochs, and the call completes once.
TEST(SpGroups, HeadKilledMidCallLosesNothing) {
  BusyGroup b;
  ASSERT_EQ(b.group.members.size(), 2u);
  b.cluster.kill_head(SIGKILL);
  b.cluster.start_head();
  SpReport r = b.f.get(std::chrono::seconds(60));
  EXPECT_EQ(r.total, sp_expected_total(kSteps, 2));
  EXPECT_EQ(r.attempt, 1u);
  ClusterStatus after;
  EXPECT_TRUE(wait_for_status(b.cluster.address(), [&](const ClusterStatus& s) {
    after = s;
    return s.tasks_live == 0 && !s.groups.empty();
  }));
  EXPECT_EQ(counter(after, "nodes_lost"), 0u);
  EXPECT_GT(after.groups[0].epoch, b.group.epoch) << "formed again by the new boot";
  // The pool still works in its new formation.
  auto pool = b.rt.pool<SpSummer>("sp", on_market("any").members(3).sequence_parallel(2));
  EXPECT_EQ(pool.call(&SpSummer::run, int64_t{3}, int64_t{0}).get(std::chrono::seconds(30)).total,
            sp_expected_total(3, 2));
}

TEST(SpGroups, AMemberThatJoinsLateCompletesAGroup) {
  LocalCluster cluster(sp_cluster(1));
  auto rt = cluster.connect();
  auto pool = rt.pool<SpSummer>("sp", on_market("any").members(2).sequence_parallel(2));
  auto f = pool.call(&SpSummer::run, int64_t{3}, int64_t{0});
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return !s.pools.empty() && s.pools[0].placed == 1 && s.pools[0].queued == 1;
  })) << "one member alone forms no group: the call waits";
  EXPECT_TRUE(cluster.connect().status().groups.empty());
  cluster.add_node(1, "spot");
  SpReport r = f.get(std::chrono::seconds(30));
  EXPECT_EQ(r.total, sp_expected_total(3, 2));
}

TEST(SpGroups, BadDegreeIsRefused) {
  LocalCluster cluster(sp_cluster(1));
  auto rt = cluster.connect();
  EXPECT_THROW(rt.pool<SpSummer>("too-wide", on_market("any").members(2).sequence_parallel(3)), RejectedError);
  EXPECT_THROW(rt.pool<SpSummer>("zero", on_market("any").members(2).sequence_parallel(0)), RejectedError);
  rt.pool<SpSummer>("sp", on_market("any").members(2).sequence_parallel(2));
  EXPECT_THROW(rt.pool<SpSummer>("sp", on_market("any").members(2).sequence_parallel(1)), RejectedError)
      << "an existing pool keeps its degree";
}

}  // namespace
}  // namespace spotlight

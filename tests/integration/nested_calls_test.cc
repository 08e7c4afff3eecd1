// Calls made from inside running tasks (TaskContext::runtime()): an actor
// that calls a pool, creates one, and gets a rejected call as an error; a
// parent whose machine dies after its calls ran gets them back in its second
// run instead of running them again, from the start or from a commit, and
// across a restart of the head.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>

#include "common/process.h"
#include "support/cluster.h"
#include "support/raw_peer.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"
#include "wire/child_ids.h"

namespace spotlight {
namespace {

using testing::busy_node;
using testing::cluster_options;
using testing::counter;
using testing::find_pool;
using testing::lines_in;
using testing::wait_for_status;
using testing_actors::Fanout;
using testing_actors::FanoutReport;
using testing_actors::Gate;
using testing_actors::Recorder;
using testing_actors::Worker;

TEST(NestedCalls, AnActorCallsAPoolCreatesOneAndGetsRejectionsAsErrors) {
  LocalCluster cluster(cluster_options(2, 3));
  auto rt = cluster.connect();
  rt.pool<Worker>("workers", on_market("any").members(2));
  auto fan = rt.spawn<Fanout>("fan");

  FanoutReport r = fan.call(&Fanout::twice_all, std::string("workers"), int64_t{100})
                       .get(std::chrono::seconds(30));
  EXPECT_EQ(r.sum, 2 * (99 * 100 / 2));
  EXPECT_EQ(r.attempt, 1u);

  // A call to a name the head does not know fails inside the task, and the
  // task's failure reaches the driver with the head's reason.
  try {
    fan.call(&Fanout::twice_all, std::string("nobody"), int64_t{1}).get(std::chrono::seconds(30));
    FAIL() << "a call to an unknown pool must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no actor or pool named 'nobody'"), std::string::npos)
        << e.what();
  }

  // A pool created from inside a task is a pool like any other.
  auto who = fan.call(&Fanout::spawn_and_ask, std::string("made-inside"), int64_t{2}, int64_t{40})
                 .get(std::chrono::seconds(30));
  EXPECT_GE(who.size(), 1u);
  EXPECT_LE(who.size(), 2u);
  const ClusterStatus s = rt.status();
  const PoolStatus* made = find_pool(s, "made-inside");
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(made->size, 2);
  EXPECT_EQ(made->type, "testing_actors::Worker");

  // Once the parents are done and their results received, the head holds
  // none of the calls they made.
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& st) {
    return st.tasks_live == 0;
  })) << "calls made by finished tasks are kept";
}

// Node 0 (reserved) hosts the recorder and the gate; a parent on a spot node
// records keys i % 3 for i in [0, keys) (committing after commit_at), then
// waits at the gate. Returns once it waits there.
struct ParentAtTheGate {
  ParentAtTheGate(int64_t keys, int64_t commit_at) : cluster(cluster_options(1, 3)), dir("nested") {
    cluster.add_node(1, "spot");
    rt = cluster.connect();
    rec = rt.spawn<Recorder>("rec", on_market("reserved"));
    rt.spawn<Gate>("gate", on_market("reserved"));
    auto parents = rt.pool<Fanout>("parents", on_market("spot").members(1).ahead(1));
    f = parents.call(&Fanout::record_then_pass, std::string("rec"), std::string("gate"), dir.path(),
                     keys, commit_at);
    // Its calls ran and its last waits at the gate.
    EXPECT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
      waiting = s;
      const PoolStatus* g = find_pool(s, "gate");
      return g && g->leased == 1 && busy_node(s, "parents");
    }));
  }
  void open_gate() const { std::ofstream(dir.path() + "/open").flush(); }
  LocalCluster cluster;
  testing::TempDir dir;
  Runtime rt{nullptr};
  ActorHandle<Recorder> rec{nullptr, ""};
  Future<FanoutReport> f;
  ClusterStatus waiting;  // the status that showed it waiting
};

// With `head_too`, the head is killed (-9) and restarted on its store as
// well, after the parent's node: the calls it keeps for the parent are
// durable. With `commit_at`, the parent commits its progress after that many
// calls and the second run resumes from the commit: it makes the first run's
// later calls again (the same keys recur, so only their order tells them apart).
void parent_runs_again(bool head_too, int64_t commit_at = -1) {
  constexpr int64_t kKeys = 20;
  ParentAtTheGate p(kKeys, commit_at);
  ASSERT_NE(busy_node(p.waiting, "parents"), nullptr);
  auto& cluster = p.cluster;
  auto& rt = p.rt;
  const NodeStatus victim = *busy_node(p.waiting, "parents");
  common::signal_process(static_cast<pid_t>(victim.pid), SIGKILL);
  if (head_too) {
    cluster.kill_head();
    cluster.start_head();
  }
  cluster.add_node(1, "spot");  // where the parent runs again

  // Its second run makes the same calls (from the start, or those after the
  // commit): the finished ones answered from the head's store, and the
  // gate's, still running, which it now waits for.
  const uint64_t again = static_cast<uint64_t>(kKeys - (commit_at + 1) + 1);
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    return counter(s, "child_calls_answered_again") >= again;
  }));
  p.open_gate();

  FanoutReport r = p.f.get(std::chrono::seconds(30));
  EXPECT_EQ(r.attempt, 2u) << "the parent ran again after its node died";
  EXPECT_NE(r.pid, victim.pid);
  int64_t keys = 0;
  for (int64_t i = 0; i < kKeys; ++i) keys += i % 3;
  EXPECT_EQ(r.sum, keys + 1000);
  const Recorder::Stats st = p.rec.call(&Recorder::stats).get(std::chrono::seconds(30));
  EXPECT_EQ(st.executions, kKeys) << "a call of the first run ran again";
  EXPECT_EQ(st.distinct, 3);
  EXPECT_EQ(lines_in(p.dir.path() + "/runs"), 1u) << "the gate's call ran twice";
  if (!head_too) {
    EXPECT_EQ(counter(rt.status(), "nodes_lost"), 1u);
  }
}

TEST(NestedCalls, AParentThatRunsAgainGetsItsCallsBackInsteadOfMakingThemTwice) {
  parent_runs_again(false);
}

TEST(NestedCalls, TheCallsKeptForAParentSurviveAHeadRestart) {
  parent_runs_again(true);
}

TEST(NestedCalls, AParentResumedFromACommitGetsTheCallsMadeAfterIt) {
  parent_runs_again(false, 6);
}

// The head takes a task's calls only from the node that runs the task: a
// run it has given up on (its node taken for dead, then back) cannot take
// the calls of the run that replaced it. Played here by raw connections that
// say they belong to a node.
TEST(NestedCalls, ATasksCallsAreTakenOnlyFromTheNodeThatRunsIt) {
  ParentAtTheGate p(1, -1);
  const ClusterStatus& s = p.waiting;
  ASSERT_NE(busy_node(s, "parents"), nullptr);
  const std::string runner = busy_node(s, "parents")->id;
  std::string other;
  for (const auto& n : s.nodes) {
    if (n.id != runner) other = n.id;
  }
  ASSERT_FALSE(other.empty());

  // The parent's next call, as its node would make it (its first was the record).
  const Blob args{pack(std::make_tuple(int64_t{5}))};
  const uint64_t key = wire::child_call_key(0, 0, 2);
  const wire::Call call{wire::child_call_id(p.f.task_id(), key, "rec", "record", args.data),
                        "rec",
                        "record",
                        args,
                        0,
                        0,
                        p.f.task_id(),
                        key};
  testing::RawPeer stale(p.cluster.address());
  stale.hello_client("raw-stale", other);
  stale.send(wire::encode(wire::Calls{{call}}));
  auto refused = stale.reply();
  ASSERT_TRUE(refused && refused->type == wire::MsgType::kResults);
  const auto r = refused->body<wire::Results>().results.at(0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.payload.data.find("does not run on node " + other), std::string::npos)
      << r.payload.data;

  testing::RawPeer current(p.cluster.address());
  current.hello_client("raw-current", runner);
  current.send(wire::encode(wire::Calls{{call}}));
  // Its result may come before the head's announcement of acceptance, which it stands for.
  auto answer = current.reply();
  ASSERT_TRUE(answer.has_value());
  if (answer->type == wire::MsgType::kResults) {
    const auto done = answer->body<wire::Results>().results.at(0);
    EXPECT_EQ(done.id, call.id);
    ASSERT_TRUE(done.ok) << done.payload.data;
    EXPECT_EQ(unpack<int64_t>(done.payload.data), 5);
  } else {
    ASSERT_EQ(answer->type, wire::MsgType::kAccepted);
    EXPECT_EQ(answer->body<wire::Accepted>().ids, std::vector<uint64_t>{call.id});
  }

  p.open_gate();
  EXPECT_EQ(p.f.get(std::chrono::seconds(30)).sum, 0 + 1000);
  EXPECT_EQ(counter(p.rt.status(), "rejected_stale_parent"), 1u);
  EXPECT_EQ(p.rec.call(&Recorder::stats).get(std::chrono::seconds(30)).executions, 2)
      << "the parent's record and the one the node's connection made";
}

}  // namespace
}  // namespace spotlight

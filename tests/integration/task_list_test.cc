// Runtime::tasks and `spotlight tasks`: the calls the head holds, filtered
// by pool and state, the earliest accepted first; what an operator needs to
// find a stuck call and cancel it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/cluster.h"
#include "support/command.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing::wait_for_status;
using testing_actors::Gate;
using testing_actors::open_gate;
using testing_actors::Worker;

std::vector<uint64_t> ids_of(const TaskList& l) {
  std::vector<uint64_t> ids;
  for (const auto& t : l.tasks) ids.push_back(t.id);
  return ids;
}

TEST(TaskList, ListsWaitingLeasedAndFinishedCallsByPoolAndState) {
  testing::TempDir dir("task-list");
  LocalCluster cluster(cluster_options(0));  // no node yet: every call waits
  auto rt = cluster.connect();
  auto workers = rt.spawn<Worker>("list-workers");
  auto gate = rt.spawn<Gate>("list-gate");
  std::vector<Future<int64_t>> twice, passes;
  const auto submitted = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < 3; ++i) twice.push_back(workers.call(&Worker::twice, i));
  passes.push_back(gate.with(CallOptions{.priority = 5}).call(&Gate::pass, dir.path(), int64_t{0}));
  rt.wait_accepted();
  {
    // A driver that goes after its call was accepted: nobody acknowledges
    // that call's result, so the head lists it until it expires.
    auto gone = cluster.connect();
    passes.push_back(gone.actor<Gate>("list-gate")
                         .with(CallOptions{.priority = 5})
                         .call(&Gate::pass, dir.path(), int64_t{1}));
    gone.wait_accepted();
  }

  const auto accepted_by = std::chrono::steady_clock::now();
  TaskList all = rt.tasks();
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
  };
  EXPECT_EQ(all.matching, 5u);
  for (const TaskInfo& t : all.tasks) {
    // Accepted after `submitted`; waiting since, never leased.
    EXPECT_LE(t.age_ms, since(submitted) + 1) << t.id;
    EXPECT_GE(t.age_ms, 0) << t.id;
    EXPECT_EQ(t.in_state_ms, t.age_ms) << "queued since its acceptance";
  }
  EXPECT_EQ(ids_of(all),
            (std::vector<uint64_t>{twice[0].task_id(), twice[1].task_id(), twice[2].task_id(),
                                   passes[0].task_id(), passes[1].task_id()}))
      << "in the order accepted";
  const TaskInfo& first = all.tasks[0];
  EXPECT_EQ(first.mailbox, "list-workers");
  EXPECT_EQ(first.method, "twice");
  EXPECT_EQ(first.state, "queued");
  EXPECT_EQ(first.max_attempts, 3u);
  EXPECT_GT(first.args_bytes, 0u);
  EXPECT_EQ(all.tasks[3].priority, 5);

  TaskList gated = rt.tasks({.mailbox = "list-gate"});
  EXPECT_EQ(ids_of(gated), (std::vector<uint64_t>{passes[0].task_id(), passes[1].task_id()}));
  TaskList waiting = rt.tasks({.mailbox = "list-workers", .state = "queued"});  // from its mailbox
  EXPECT_EQ(waiting.matching, 3u);
  EXPECT_EQ(ids_of(waiting),
            (std::vector<uint64_t>{twice[0].task_id(), twice[1].task_id(), twice[2].task_id()}));
  EXPECT_EQ(rt.tasks({.mailbox = "list-workers", .state = "leased"}).matching, 0u);
  TaskList two = rt.tasks({.limit = 2});
  EXPECT_EQ(two.matching, 5u);
  EXPECT_EQ(ids_of(two), (std::vector<uint64_t>{twice[0].task_id(), twice[1].task_id()}));

  // A node runs the workers' calls; the gate holds its first call, leased, and the second behind
  // it.
  const auto node_added = std::chrono::steady_clock::now();
  cluster.add_node(2, "reserved");
  for (auto& f : twice) f.get(60s);
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus&) {
    return rt.tasks({.state = "leased"}).matching == 2;
  }));
  TaskList leased = rt.tasks({.state = "leased"});
  EXPECT_EQ(ids_of(leased), (std::vector<uint64_t>{passes[0].task_id(), passes[1].task_id()}));
  EXPECT_FALSE(leased.tasks[0].node.empty());
  EXPECT_NE(leased.tasks[0].actor, 0u);
  EXPECT_EQ(leased.tasks[0].attempts, 1u);
  // Leased since the node came, which was after the calls were accepted.
  const int64_t wait_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(node_added - accepted_by).count();
  for (const TaskInfo& t : leased.tasks) {
    EXPECT_GE(t.in_state_ms, 0);
    EXPECT_LE(t.in_state_ms, since(node_added) + 1) << "leased once the node came";
    EXPECT_GE(t.age_ms, wait_ms) << "accepted before the node was started";
  }

  // The gone driver's call is cancelled by id: it stays listed, as done.
  EXPECT_EQ(rt.cancel(passes[1].task_id()), CancelOutcome::kCancelled);
  TaskList done = rt.tasks({.mailbox = "list-gate", .state = "done"});
  ASSERT_EQ(done.tasks.size(), 1u);
  EXPECT_EQ(done.tasks[0].id, passes[1].task_id());
  EXPECT_EQ(done.tasks[0].outcome, "cancelled");
  EXPECT_EQ(done.tasks[0].in_state_ms, -1) << "no longer queued or leased";
  EXPECT_GE(done.tasks[0].age_ms, 0);
  open_gate(dir.path());
  EXPECT_EQ(passes[0].get(60s), 0);

  // The CLI lists the same, and refuses a bad state clearly.
  const std::string cli = std::string(SPOTLIGHT_TEST_BIN) + " tasks --key " + cluster.key() +
                          " --address " + cluster.address();
  auto table = testing::run_command(cli + " --limit 1");
  EXPECT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("matching calls shown"), std::string::npos) << table.out;
  auto js = testing::run_command(cli + " --json");
  ASSERT_EQ(js.code, 0) << js.out;
  EXPECT_TRUE(nlohmann::json::parse(js.out).contains("matching")) << js.out;
  auto bad = testing::run_command(cli + " --state lost");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("lost"), std::string::npos) << bad.out;

  // The head refuses a bad query with the reason.
  try {
    rt.tasks({.state = "lost"});
    ADD_FAILURE() << "a bad state was accepted";
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find("queued, leased or done"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rt.tasks({.limit = 0}), RejectedError);
}

// Filters by method, node, outcome and caller: the failed calls of a
// pool, what one node runs, one driver's calls.
TEST(TaskList, FiltersByMethodNodeOutcomeAndCaller) {
  testing::TempDir dir("task-filter");
  LocalCluster cluster(cluster_options(1));  // a reserved node, for the gate
  auto rt = cluster.connect();
  auto workers = rt.spawn<Worker>("filter-workers", on_market("spot"));
  auto gate = rt.spawn<Gate>("filter-gate");
  Future<int64_t> held = gate.call(&Gate::pass, dir.path(), int64_t{0});
  std::vector<uint64_t> gone_ids;
  {
    // A driver that leaves once its calls are accepted, before any node can
    // run them: nobody acknowledges their results, so the head lists them,
    // finished, until they expire.
    auto gone = cluster.connect();
    auto w = gone.actor<Worker>("filter-workers");
    gone_ids.push_back(w.call(&Worker::twice, int64_t{1}).task_id());
    gone_ids.push_back(w.call(&Worker::twice, int64_t{2}).task_id());
    gone_ids.push_back(w.call(&Worker::fail, std::string("boom")).task_id());
    gone.wait_accepted();
  }
  cluster.add_node(2, "spot");
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus&) {
    return rt.tasks({.state = "done"}).matching == 3 && rt.tasks({.state = "leased"}).matching == 1;
  }));
  const TaskList leased = rt.tasks({.state = "leased"});
  const std::string node = leased.tasks.at(0).node;
  const uint32_t mine = leased.tasks.at(0).caller;
  const uint32_t theirs = rt.tasks({.state = "done"}).tasks.at(0).caller;
  ASSERT_NE(mine, theirs);

  EXPECT_EQ(ids_of(rt.tasks({.method = "twice"})),
            (std::vector<uint64_t>{gone_ids[0], gone_ids[1]}));
  EXPECT_EQ(ids_of(rt.tasks({.outcome = "ok"})), (std::vector<uint64_t>{gone_ids[0], gone_ids[1]}));
  const TaskList failed = rt.tasks({.outcome = "error"});
  EXPECT_EQ(ids_of(failed), std::vector<uint64_t>{gone_ids[2]});
  EXPECT_EQ(failed.tasks.at(0).outcome, "method");
  EXPECT_EQ(rt.tasks({.outcome = "method"}).matching, 1u);
  EXPECT_EQ(rt.tasks({.outcome = "cancelled"}).matching, 0u);
  EXPECT_EQ(rt.tasks({.mailbox = "filter-gate", .outcome = "error"}).matching, 0u);
  EXPECT_EQ(ids_of(rt.tasks({.caller = theirs})), gone_ids);
  EXPECT_EQ(ids_of(rt.tasks({.caller = mine})), std::vector<uint64_t>{held.task_id()});
  EXPECT_EQ(ids_of(rt.tasks({.node = node})), std::vector<uint64_t>{held.task_id()});
  EXPECT_EQ(rt.tasks({.method = "twice", .node = node}).matching, 0u);
  EXPECT_EQ(rt.tasks({.node = "no-such-node"}).matching, 0u);
  EXPECT_EQ(rt.tasks({.state = "leased", .method = "pass"}).matching, 1u);

  // Contradictions and unknown outcomes are refused with the reason.
  auto refused = [&](const TaskQuery& q, const std::string& why) {
    try {
      rt.tasks(q);
      ADD_FAILURE() << "accepted; expected: " << why;
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({.state = "queued", .node = node}, "a query by node lists leased calls, not queued");
  refused({.state = "leased", .outcome = "ok"}, "a query by outcome lists done calls");
  refused({.node = node, .outcome = "ok"}, "which have no outcome yet");
  refused({.outcome = "exploded"}, "an outcome is ok, error or an error kind");

  // The CLI filters the same, and refuses an unknown outcome itself.
  const std::string cli = std::string(SPOTLIGHT_TEST_BIN) + " tasks --key " + cluster.key() +
                          " --address " + cluster.address();
  auto js = testing::run_command(cli + " --outcome error --json");
  ASSERT_EQ(js.code, 0) << js.out;
  EXPECT_EQ(nlohmann::json::parse(js.out)["matching"], 1) << js.out;
  auto by_node = testing::run_command(cli + " --node " + node + " --method pass --json");
  ASSERT_EQ(by_node.code, 0) << by_node.out;
  EXPECT_EQ(nlohmann::json::parse(by_node.out)["tasks"][0]["id"], held.task_id()) << by_node.out;
  auto bad = testing::run_command(cli + " --outcome exploded");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("exploded"), std::string::npos) << bad.out;

  open_gate(dir.path());
  EXPECT_EQ(held.get(60s), 0);
}

}  // namespace
}  // namespace spotlight

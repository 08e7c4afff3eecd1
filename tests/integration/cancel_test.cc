// Runtime::cancel: a call that has not finished fails with CancelledError and
// never runs (again). A waiting call leaves its mailbox, durably; one its
// actor holds leased ahead is dropped on the node; a running one sees
// TaskContext::cancelled(), and its actor goes on to the next call; the calls
// a cancelled task made are cancelled with it.
#include <gtest/gtest.h>

#include <fstream>

#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing::counter;
using testing::find_pool;
using testing::wait_for_status;
using testing_actors::Gate;
using testing_actors::gate_runs;
using testing_actors::open_gate;
using testing_actors::SpinCounts;
using testing_actors::Spinner;

// The error a future fails with, or a failure when it does not.
template <class T>
CancelledError cancelled_error(Future<T>& f) {
  try {
    f.get(60s);
  } catch (const CancelledError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected CancelledError, got " << e.what();
    return CancelledError("");
  }
  ADD_FAILURE() << "expected CancelledError, got a result";
  return CancelledError("");
}

TEST(Cancel, AWaitingCallNeverRunsEvenAfterAHeadRestart) {
  testing::TempDir dir("cancel-queued");
  LocalCluster cluster(cluster_options(0));  // no node: every call waits in its mailbox
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("cancel-gate");
  std::vector<Future<int64_t>> calls;
  for (int64_t key = 0; key < 3; ++key) calls.push_back(gate.call(&Gate::pass, dir.path(), key));

  // Named twice, and one id no client made: cancelled, then already so, then unknown.
  const uint64_t unknown = (uint64_t{4000} << 40) | 1;
  EXPECT_EQ(rt.cancel({calls[1].task_id(), calls[1].task_id(), unknown}),
            (std::vector<CancelOutcome>{CancelOutcome::kCancelled, CancelOutcome::kCancelled,
                                        CancelOutcome::kNotHeld}));
  // Resolved before cancel() returned.
  EXPECT_TRUE(calls[1].ready());
  CancelledError e = cancelled_error(calls[1]);
  EXPECT_EQ(e.kind(), ErrorKind::kCancelled);
  EXPECT_NE(std::string(e.what()).find("before it ran"), std::string::npos) << e.what();
  ClusterStatus s = rt.status();
  EXPECT_EQ(counter(s, "tasks_cancelled_queued"), 1u);
  const PoolStatus* p = find_pool(s, "cancel-gate");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->queued, 2u);

  // The head that committed the cancel dies; the next one does not run it.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  cluster.add_node(1, "reserved");
  open_gate(dir.path());
  EXPECT_EQ(calls[0].get(60s), 0);
  EXPECT_EQ(calls[2].get(60s), 2);
  EXPECT_EQ(gate_runs(dir.path()), (std::vector<int64_t>{0, 2}));
  // Finished and received: nothing to cancel.
  EXPECT_EQ(rt.cancel(Future<int64_t>()), CancelOutcome::kFinished);
}

uint64_t task_id_in(const std::string& dir, int64_t key) {
  std::ifstream in(dir + "/" + std::to_string(key) + ".id");
  uint64_t id = 0;
  in >> id;
  return id;
}

TEST(Cancel, ARunningCallSeesItAndACallLeasedBehindItNeverStarts) {
  testing::TempDir dir("cancel-running");
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto spinner = rt.spawn<Spinner>("spinner", on_market("any").ahead(16));
  auto running = spinner.call(&Spinner::until_cancelled, dir.path(), int64_t{7});
  auto behind = spinner.call(&Spinner::until_cancelled, dir.path(), int64_t{8});
  // The first runs (it committed) and the second waits on the node, leased ahead.
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "spinner");
    return counter(s, "commits") >= 1 && p && p->leased == 2 && p->queued == 0;
  }));

  EXPECT_EQ(rt.cancel({running.task_id(), behind.task_id()}),
            (std::vector<CancelOutcome>{CancelOutcome::kCancelled, CancelOutcome::kCancelled}));
  EXPECT_NE(std::string(cancelled_error(running).what()).find("after it was leased"),
            std::string::npos);
  cancelled_error(behind);

  // The actor runs calls in order: this one answers once the cancelled run
  // has ended, having seen its cancellation, and the one behind it never started.
  SpinCounts c = spinner.call(&Spinner::counts).get(60s);
  EXPECT_EQ(c.runs, 1);
  EXPECT_EQ(c.seen, 1);
  ClusterStatus s = rt.status();
  EXPECT_EQ(counter(s, "tasks_cancelled_leased"), 2u);
  const PoolStatus* p = find_pool(s, "spinner");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->leased, 0u);
  // Cancelling what finished changes nothing.
  auto done = spinner.call(&Spinner::counts);
  done.get(60s);
  EXPECT_NE(rt.cancel(done), CancelOutcome::kCancelled);
}

// A Spinner "parent" whose running task called a Spinner "child" with key 9
// and waits for it; the child runs (it committed).
struct ParentWaitsOnChild {
  testing::TempDir dir{"cancel-children"};
  LocalCluster cluster{cluster_options(1, 2)};
  Runtime rt = cluster.connect();
  ActorHandle<Spinner> parents = rt.spawn<Spinner>("parent");
  ActorHandle<Spinner> children = rt.spawn<Spinner>("child");
  Future<int64_t> parent =
      parents.call(&Spinner::wait_on, std::string("child"), dir.path(), int64_t{9});
  bool child_runs = wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "child");
    return counter(s, "commits") >= 1 && p && p->leased == 1;
  });
};

TEST(Cancel, TheCallsACancelledTaskMadeAreCancelledWithIt) {
  ParentWaitsOnChild t;
  ASSERT_TRUE(t.child_runs);
  EXPECT_EQ(t.rt.cancel(t.parent), CancelOutcome::kCancelled);
  cancelled_error(t.parent);
  SpinCounts c = t.children.call(&Spinner::counts).get(60s);
  EXPECT_EQ(c.runs, 1);
  EXPECT_EQ(c.seen, 1) << "the child never saw its cancellation";
  EXPECT_EQ(counter(t.rt.status(), "tasks_cancelled_leased"), 2u);
  // The parent's run, whose child call failed, ended too: its actor answers.
  EXPECT_EQ(t.parents.call(&Spinner::counts).get(60s).runs, 0);
}

TEST(Cancel, WithoutChildrenTheCallsATaskMadeGoOnAndAnyClientCancelsById) {
  ParentWaitsOnChild t;
  ASSERT_TRUE(t.child_runs);
  EXPECT_EQ(t.rt.cancel(t.parent, false), CancelOutcome::kCancelled);
  cancelled_error(t.parent);
  ClusterStatus s = t.rt.status();
  EXPECT_EQ(counter(s, "tasks_cancelled_leased"), 1u);
  const PoolStatus* p = find_pool(s, "child");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->leased, 1u) << "the child call was cancelled with its parent";

  // Its id (the task wrote it) is the parent's run's call, not this
  // client's: another client cancels it.
  const uint64_t child = task_id_in(t.dir.path(), 9);
  ASSERT_NE(child, 0u);
  EXPECT_EQ(t.cluster.connect().cancel(child), CancelOutcome::kCancelled);
  SpinCounts c = t.children.call(&Spinner::counts).get(60s);
  EXPECT_EQ(c.runs, 1);
  EXPECT_EQ(c.seen, 1);
}

}  // namespace
}  // namespace spotlight

// Machines that go away: kill -9 of a node mid-task, drain with a deadline
// (by the tool and by SIGTERM), and attempt limits. Tasks have K steps and
// commit after each one; the head counts every commit, so a step computed
// twice shows up as one commit too many.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/process.h"
#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::busy_node;
using testing::cluster_options;
using testing::wait_for_status;
using testing_actors::Stepper;
using testing_actors::StepReport;

using testing::counter;

TEST(Preemption, KillNineMidTaskResumesElsewhereFromTheLastCommit) {
  LocalCluster cluster(cluster_options(2, 1));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("steppers", on_market("any").members(2).ahead(1));
  constexpr int64_t kSteps = 20;
  auto f = pool.call(&Stepper::run, 1, kSteps, 50);
  ClusterStatus before;
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    before = s;
    return counter(s, "commits") >= 5 && busy_node(s, "steppers");
  }));
  const NodeStatus* victim = busy_node(before, "steppers");
  ASSERT_NE(victim, nullptr);
  uint64_t committed = counter(before, "commits");
  common::signal_process(static_cast<pid_t>(victim->pid), SIGKILL);

  StepReport r = f.get(std::chrono::seconds(30));
  EXPECT_EQ(r.attempt, 2u) << "the crash used up one attempt";
  EXPECT_TRUE(r.resumed);
  EXPECT_NE(r.pid, victim->pid) << "finished on the surviving node";
  EXPECT_GE(r.started_at, static_cast<int64_t>(committed)) << "resumed from the last commit";
  EXPECT_EQ(r.started_at + r.ran, kSteps);
  ClusterStatus after = rt.status();
  // Without notice at most the step in flight is computed again.
  EXPECT_LE(counter(after, "commits"), static_cast<uint64_t>(kSteps) + 1);
  EXPECT_EQ(counter(after, "nodes_lost"), 1u);
  EXPECT_EQ(counter(after, "tasks_requeued"), 1u);
}

// Drain by the tool or by SIGTERM: every task leaves the node before the
// deadline, resumes where it stopped, and no step is computed twice.
void drain_moves_everything(bool by_signal) {
  LocalCluster cluster(cluster_options(2, 2));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("drainers", on_market("any").members(4).ahead(2));
  constexpr int kTasks = 8;
  constexpr int64_t kSteps = 20;
  std::vector<Future<StepReport>> fs;
  for (int i = 0; i < kTasks; ++i) fs.push_back(pool.call(&Stepper::run, i, kSteps, 25));
  ClusterStatus before;
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    before = s;
    return counter(s, "commits") >= 8 && busy_node(s, "drainers");
  }));
  NodeStatus victim = *busy_node(before, "drainers");
  auto t0 = std::chrono::steady_clock::now();
  if (by_signal) {
    common::signal_process(static_cast<pid_t>(victim.pid), SIGTERM);
  } else {
    rt.drain(victim.id, std::chrono::seconds(30));
  }
  // The node hands everything back and leaves long before its deadline.
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    for (const auto& n : s.nodes) {
      if (n.id == victim.id) return n.state == "dead";
    }
    return false;
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  int resumed = 0;
  for (int i = 0; i < kTasks; ++i) {
    StepReport r = fs[i].get(std::chrono::seconds(30));
    EXPECT_EQ(r.key, i);
    EXPECT_EQ(r.attempt, 1u) << "a yield is not a failed attempt";
    EXPECT_EQ(r.started_at + r.ran, kSteps);
    resumed += r.resumed;
  }
  EXPECT_GE(resumed, 1) << "at least one task moved mid-way";
  ClusterStatus after = rt.status();
  EXPECT_EQ(counter(after, "commits"), static_cast<uint64_t>(kTasks * kSteps))
      << "with notice no step is computed twice";
  EXPECT_EQ(counter(after, "nodes_drained"), 1u);
  EXPECT_EQ(counter(after, "nodes_lost"), 0u);
  EXPECT_EQ(counter(after, "tasks_requeued"), 0u) << "nothing was left for liveness to clean up";
  EXPECT_GE(counter(after, "tasks_handed_back"), 1u);
}

TEST(Preemption, DrainByTheToolMovesEveryTaskBeforeTheDeadline) { drain_moves_everything(false); }
TEST(Preemption, SigtermDrainsTheNode) { drain_moves_everything(true); }

TEST(Preemption, AttemptsLostToCrashesRunOut) {
  LocalCluster cluster(cluster_options(2, 1));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("fragile", on_market("any").members(2).ahead(1));
  auto f = pool.with(CallOptions{1}).call(&Stepper::run, 7, 40, 50);
  ClusterStatus before;
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    before = s;
    return counter(s, "commits") >= 2 && busy_node(s, "fragile");
  }));
  common::signal_process(static_cast<pid_t>(busy_node(before, "fragile")->pid), SIGKILL);
  try {
    f.get(std::chrono::seconds(30));
    FAIL() << "a task allowed one attempt ran twice";
  } catch (const CrashedError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCrashed);
    EXPECT_NE(std::string(e.what()).find("1 attempt"), std::string::npos) << e.what();
  }
}

// A node that stops answering past its liveness (a long GC pause, a VM
// stall) is declared dead and its leases go back to their mailbox; when it
// wakes, it says hello again still holding them. The head takes back its
// actor, tells it to drop the old copies, and leases the calls again, to the
// same node under the same ids: each call must then run, and only the one
// that was running when the node stopped may run twice.
TEST(Preemption, ANodePausedPastItsLivenessComesBackAndEveryCallRuns) {
  LocalCluster cluster(cluster_options(1, 1));
  testing::TempDir gate("paused-gate");
  auto rt = cluster.connect();
  auto pool = rt.spawn<testing_actors::Gate>("paused", on_market("any").ahead(8));
  std::vector<Future<int64_t>> calls;
  for (int64_t k = 0; k < 8; ++k)
    calls.push_back(pool.call(&testing_actors::Gate::pass, gate.path(), k));
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return !s.pools.empty() &&
           s.pools[0].leased == 8;  // one runs at the gate, seven wait behind it
  }));
  const pid_t node = static_cast<pid_t>(cluster.node_pid(0));
  common::signal_process(node, SIGSTOP);
  const bool declared_dead = wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.nodes.size() == 1 && s.nodes[0].state == "dead";
  });
  common::signal_process(node, SIGCONT);
  ASSERT_TRUE(declared_dead);
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.nodes.size() == 1 && s.nodes[0].state == "alive" && counter(s, "actors_adopted") >= 1;
  }));
  testing_actors::open_gate(gate.path());
  for (int64_t k = 0; k < 8; ++k)
    EXPECT_EQ(calls[static_cast<size_t>(k)].get(std::chrono::seconds(30)), k);
  std::map<int64_t, int> runs;
  for (int64_t k : testing_actors::gate_runs(gate.path())) runs[k] += 1;
  EXPECT_GE(runs[0], 1);
  EXPECT_LE(runs[0], 2) << "the call running when the node stopped: its old run and its new lease";
  for (int64_t k = 1; k < 8; ++k)
    EXPECT_EQ(runs[k], 1) << "call " << k << " waited behind it: one run";
  EXPECT_GE(counter(rt.status(), "stale_tasks_cancelled_on_nodes"), 8u);
}

// CPU seconds `pid` has used (user and system), from /proc.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // past "pid (comm) "
  std::string f;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// While the head is down, its nodes and clients wait for it: they try a
// heartbeat once a period and sleep in between. (Sleeping until the next
// beat is due, a node whose beat could not leave once spun on it.)
TEST(Preemption, NodesAndClientsSleepWhileTheHeadIsDown) {
  LocalCluster cluster(cluster_options(1, 1));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("idle", on_market("any").members(1));
  ASSERT_EQ(pool.call(&Stepper::run, 1, 1, 0).get(std::chrono::seconds(30)).key, 1);
  const pid_t node = static_cast<pid_t>(cluster.node_pid(0));
  cluster.kill_head(SIGKILL);
  const double node_before = cpu_seconds(node), self_before = cpu_seconds(getpid());
  // The window is the stimulus, not a wait: under the 3 s after which both
  // give the head up and say hello again instead.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double node_used = cpu_seconds(node) - node_before;
  const double self_used = cpu_seconds(getpid()) - self_before;
  EXPECT_LT(node_used, 0.3) << "the node used " << node_used << " CPU s of 1.5 s with no head";
  EXPECT_LT(self_used, 0.3) << "this client used " << self_used << " CPU s of 1.5 s with no head";
  cluster.start_head();
  EXPECT_EQ(pool.call(&Stepper::run, 2, 1, 0).get(std::chrono::seconds(30)).key, 2);
}

// The head itself stops past the liveness (a VM stall, a long GC-like pause
// of its process) while its nodes go on beating. When it wakes, their
// heartbeats are still on their way in: it must not blame its nodes for its
// own absence, and the task running through the pause finishes on its first
// attempt, every step computed once.
TEST(Preemption, AHeadPausedPastTheLivenessBlamesNoNode) {
  LocalCluster cluster(cluster_options(2, 1));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("through-a-pause", on_market("any").members(2).ahead(1));
  constexpr int64_t kSteps = 40;
  auto f = pool.call(&Stepper::run, 3, kSteps, 50);
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "commits") >= 2 && busy_node(s, "through-a-pause");
  }));
  const pid_t head = static_cast<pid_t>(cluster.head_pid());
  common::signal_process(head, SIGSTOP);
  // The pause is the stimulus, not a wait: twice the head's 850 ms liveness,
  // under the nodes' own 3 s patience with a silent head.
  std::this_thread::sleep_for(std::chrono::milliseconds(1700));
  common::signal_process(head, SIGCONT);
  StepReport r = f.get(std::chrono::seconds(30));
  EXPECT_EQ(r.attempt, 1u) << "the pause cost no attempt";
  EXPECT_EQ(r.started_at + r.ran, kSteps);
  ClusterStatus after = rt.status();
  EXPECT_GE(counter(after, "head_stalls"), 1u) << "the head saw its own absence";
  // The gap between two turns spans the pause wherever it fell. The pause
  // fell on the head's poll (a head this idle works well under 1 % of the
  // time), which the longest stretch of work between two polls leaves out.
  EXPECT_GE(counter(after, "turn_gap_ms_max"), 1700u);
  EXPECT_LT(counter(after, "turn_busy_ms_max"), 1000u) << "an idle wait counted as work";
  EXPECT_EQ(counter(after, "nodes_lost"), 0u) << "no node was blamed for the head's pause";
  EXPECT_EQ(counter(after, "tasks_requeued"), 0u);
  EXPECT_EQ(counter(after, "commits"), static_cast<uint64_t>(kSteps)) << "no step computed twice";
  for (const NodeStatus& n : after.nodes) EXPECT_EQ(n.state, "alive") << n.id;
}

}  // namespace
}  // namespace spotlight

namespace spotlight {
namespace {

// Bounded mailboxes: a full mailbox refuses with a clear error; a client over
// its in-flight bound waits for room (or refuses, if asked to).
TEST(Backpressure, FullMailboxRefusesAndClientWaitsForRoom) {
  auto opts = cluster_options(0);
  opts.head_args = {"--max-mailbox", "5"};
  LocalCluster cluster(opts);
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("bounded", on_market("any").members(1).ahead(1));
  std::vector<Future<StepReport>> fs;
  for (int i = 0; i < 8; ++i) fs.push_back(pool.call(&Stepper::run, i, 1, 0));
  // No node yet: five wait in the mailbox, three are refused.
  int refused = 0;
  for (int i = 5; i < 8; ++i) {
    try {
      fs[i].get(std::chrono::seconds(10));
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find("is full"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 3);
  cluster.add_node(1, "spot");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(fs[i].get(std::chrono::seconds(30)).key, i);

  ConnectOptions strict;
  strict.max_pending = 2;
  strict.wait_when_full = false;
  auto rt2 = cluster.connect(strict);
  auto slow = rt2.pool<Stepper>("bounded", on_market("any").members(1));
  auto a = slow.call(&Stepper::run, 100, 3, 100);
  auto b = slow.call(&Stepper::run, 101, 3, 100);
  EXPECT_THROW(slow.call(&Stepper::run, 102, 1, 0).get(), RejectedError);
  EXPECT_EQ(a.get().key, 100);

  ConnectOptions patient;
  patient.max_pending = 2;
  auto rt3 = cluster.connect(patient);
  auto p = rt3.pool<Stepper>("bounded", on_market("any").members(1));
  std::vector<Future<StepReport>> waited;
  for (int i = 0; i < 6; ++i) waited.push_back(p.call(&Stepper::run, 200 + i, 1, 10));  // waits for room
  for (int i = 0; i < 6; ++i) EXPECT_EQ(waited[i].get().key, 200 + i);
  EXPECT_EQ(b.get().key, 101);
}

}  // namespace
}  // namespace spotlight

namespace spotlight {
namespace {

using testing_actors::Ledger;

// A lone stateful actor restarts elsewhere from its last checkpoint, after a
// crash and after a drain, with a new incarnation each time.
TEST(ActorCheckpoint, StateSurvivesCrashAndDrain) {
  LocalCluster cluster(cluster_options(2, 1));
  auto rt = cluster.connect();
  auto ledger = rt.spawn<Ledger>("ledger");
  for (int i = 1; i <= 10; ++i) ledger.call(&Ledger::add, i);
  EXPECT_EQ(ledger.call(&Ledger::total).get(), 55);
  int64_t first = ledger.call(&Ledger::pid).get();
  common::signal_process(static_cast<pid_t>(first), SIGKILL);
  EXPECT_EQ(ledger.call(&Ledger::add, 11).get(std::chrono::seconds(30)), 66) << "restored after kill -9";
  int64_t second = ledger.call(&Ledger::pid).get();
  EXPECT_NE(second, first);

  cluster.add_node(1, "reserved");
  std::string node_id;
  for (const auto& n : rt.status().nodes) {
    if (n.pid == second) node_id = n.id;
  }
  ASSERT_FALSE(node_id.empty());
  rt.drain(node_id, std::chrono::seconds(30));
  EXPECT_EQ(ledger.call(&Ledger::add, 100).get(std::chrono::seconds(30)), 166) << "restored after a drain";
  EXPECT_NE(ledger.call(&Ledger::pid).get(), second);
  for (const auto& a : rt.status().actors) {
    if (a.pool == "ledger") {
      EXPECT_EQ(a.incarnation, 3u);
    }
  }
}

}  // namespace
}  // namespace spotlight

namespace spotlight {
namespace {

// Three of four nodes vanish at once (a bulk preemption): every task finishes
// on the survivor, each result delivered once.
TEST(Preemption, BulkPreemptionOfThreeOfFourNodes) {
  LocalCluster cluster(cluster_options(4, 1));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("bulk", on_market("any").members(4).ahead(1));
  constexpr int kTasks = 12;
  std::vector<Future<StepReport>> fs;
  for (int i = 0; i < kTasks; ++i) fs.push_back(pool.call(&Stepper::run, i, 10, 20));
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    int busy = 0;
    for (const auto& n : s.nodes) busy += n.running > 0;
    return busy == 4 && counter(s, "commits") >= 8;
  }));
  for (int i = 0; i < 3; ++i) cluster.kill_node(i, SIGKILL);
  std::set<int64_t> keys;
  for (int i = 0; i < kTasks; ++i) {
    StepReport r = fs[i].get(std::chrono::seconds(60));
    EXPECT_EQ(r.started_at + r.ran, 10);
    EXPECT_EQ(r.pid, cluster.node_pid(3));
    keys.insert(r.key);
  }
  EXPECT_EQ(keys.size(), static_cast<size_t>(kTasks));
  ClusterStatus s = rt.status();
  EXPECT_EQ(counter(s, "nodes_lost"), 3u);
  EXPECT_LE(counter(s, "commits"), static_cast<uint64_t>(kTasks * 10 + 3)) << "at most a step per task lost";
}

// The head is killed while tasks run on live nodes and restarted on the same
// store: nodes and the caller find it again on their own, nothing is lost.
TEST(Preemption, HeadKilledUnderLoadLosesNothing) {
  LocalCluster cluster(cluster_options(2, 2));
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("steady", on_market("any").members(4).ahead(2));
  constexpr int kTasks = 40;
  std::vector<Future<StepReport>> fs;
  for (int i = 0; i < kTasks; ++i) fs.push_back(pool.call(&Stepper::run, i, 5, 20));
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "commits") >= 20;
  }));
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  int went_on = 0, resumed = 0;
  for (int i = 0; i < kTasks; ++i) {
    StepReport r = fs[i].get(std::chrono::seconds(60));
    EXPECT_EQ(r.key, i);
    EXPECT_EQ(r.started_at + r.ran, 5);
    went_on += r.attempt == 1 && !r.resumed;
    resumed += r.resumed;
  }
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) { return s.tasks_live == 0; }));
  // The nodes came back with their actors: the restarted head took them, and
  // their running tasks, back instead of starting over.
  ClusterStatus s = rt.status();
  EXPECT_EQ(counter(s, "actors_adopted"), 4u);
  EXPECT_EQ(counter(s, "nodes_lost"), 0u);
  // Results that reached the old head uncommitted, or went out while it was
  // down, are kept by their nodes until a head acknowledges them: none of
  // their tasks ran again (a run again resumes from the task's commits).
  EXPECT_EQ(resumed, 0) << "a task whose result died with the old head ran again";
  // A lease whose frame died with the old head starts over (attempt 2).
  EXPECT_GE(went_on, kTasks - 4);
}

}  // namespace
}  // namespace spotlight

// CallOptions::deadline: a call whose run cannot start in time fails with
// TimeoutError and never runs, whether it waits in its mailbox (the head
// times it out, also after a restart: the deadline is stored with the call)
// or on its node behind other calls (the node refuses to start it); a run
// that started before the deadline goes on to its end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

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
using testing_actors::Recorder;
using testing_actors::Stepper;
using testing_actors::StepReport;

// The call failed because its deadline passed (not because a wait gave up).
template <class T>
void expect_timed_out(Future<T>& f) {
  try {
    f.get(60s);
    ADD_FAILURE() << "the call ran";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("did not start before its deadline"), std::string::npos)
        << e.what();
  }
}

TEST(Deadline, ACallNoActorStartsInTimeFailsAndNeverRunsAcrossAHeadRestart) {
  LocalCluster cluster(cluster_options(0));  // no node: nothing can start
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("deadline-recorder");
  std::vector<Future<int64_t>> late, patient;
  for (int64_t i = 0; i < 5; ++i) {
    late.push_back(rec.with(CallOptions{.deadline = 1500ms}).call(&Recorder::record, i));
    patient.push_back(rec.call(&Recorder::record, 100 + i));
  }
  rt.wait_accepted();
  // The head that accepted them dies; the one that replaces it reads their deadlines from its
  // store.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  for (auto& f : late) expect_timed_out(f);
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "deadline-recorder");
    return counter(s, "tasks_timed_out") == 5 && p && p->queued == 5;  // out of the mailbox
  }));

  cluster.add_node(1, "reserved");
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(patient[i].get(60s), 100 + i);
  Recorder::Stats stats = rec.call(&Recorder::stats).get(30s);
  EXPECT_EQ(stats.executions, 5) << "a call whose deadline passed ran";
}

TEST(Deadline, ACallWaitingOnItsNodePastItsDeadlineDoesNotStart) {
  testing::TempDir temp("deadline");
  const std::string& dir = temp.path();
  LocalCluster cluster(cluster_options(1, 1));
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("deadline-gate");  // one member: calls run one after another
  Future<int64_t> first = gate.call(&Gate::pass, dir, int64_t{0});
  Future<int64_t> second =
      gate.with(CallOptions{.deadline = 300ms}).call(&Gate::pass, dir, int64_t{1});
  // Both are leased to the one actor (it prefetches): the second waits on the
  // node behind the first. (On a slow machine the head may time it out
  // before it leases it; the outcome is the same.)
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, "deadline-gate");
    return (p && p->leased == 2) || counter(s, "tasks_timed_out") == 1;
  }));
  // The deadline itself is what this test is about: let it pass. It counts
  // from the acceptance, which came before the lease just seen.
  std::this_thread::sleep_for(1s);
  std::ofstream(dir + "/open").flush();
  EXPECT_EQ(first.get(60s), 0);
  expect_timed_out(second);
  std::ifstream runs(dir + "/runs");
  std::string all((std::istreambuf_iterator<char>(runs)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "0\n") << "only the first call ran";
}

TEST(Deadline, ARunThatStartedInTimeGoesOnToItsEnd) {
  LocalCluster cluster(cluster_options(1, 1));
  auto rt = cluster.connect();
  auto stepper = rt.spawn<Stepper>("deadline-stepper");
  stepper.call(&Stepper::run, int64_t{0}, int64_t{1}, int64_t{1}).get(30s);  // placed
  // Six steps of 500 ms under a deadline of 2 s: the run starts at once,
  // and goes on past its deadline to its end.
  Future<StepReport> r = stepper.with(CallOptions{.deadline = 2s})
                             .call(&Stepper::run, int64_t{1}, int64_t{6}, int64_t{500});
  StepReport rep = r.get(60s);
  EXPECT_EQ(rep.ran, 6);
  EXPECT_EQ(rep.attempt, 1u);
}

TEST(Deadline, ADeadlineOutOfRangeIsRefused) {
  LocalCluster cluster(cluster_options(1, 1));
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("deadline-refused");
  for (auto bad : {-5ms, std::chrono::milliseconds(int64_t{366} * 24 * 3600 * 1000),
                   std::chrono::milliseconds::max()}) {
    auto f = rec.with(CallOptions{.deadline = bad}).call(&Recorder::record, int64_t{1});
    try {
      f.get(30s);
      ADD_FAILURE() << "a deadline of " << bad.count() << " ms was taken";
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find("a deadline must be between"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(rec.call(&Recorder::stats).get(30s).executions, 0);
}

}  // namespace
}  // namespace spotlight

// A caller that waits for its result reads the client's socket itself while
// no other thread does (runtime/client/client.h). These tests hold the
// promises around that: every waiting thread gets its own result whoever
// reads the socket, a wait that gives up leaves the result to the I/O
// thread, a caller waiting on a slow call holds up nobody else, and a wait
// for several calls returns those that are ready.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing_actors::Gate;
using testing_actors::Stepper;
using testing_actors::StepReport;
using testing_actors::Worker;

// Eight threads make synchronous calls through one runtime at once: the
// socket passes between them and the I/O thread all the time, and each must
// see exactly its own answers.
TEST(CallerIo, ManyThreadsWaitingOnOneClientEachGetTheirOwnResults) {
  LocalCluster cluster(cluster_options(1, 4));
  auto rt = cluster.connect();
  auto pool = rt.pool<Worker>("caller-io-pool", on_market("any").members(2));
  constexpr int kThreads = 8, kCalls = 200;
  std::atomic<int> wrong{0}, right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        int64_t x = t * 100000 + i;
        try {
          (pool.call(&Worker::twice, x).get(20s) == 2 * x ? right : wrong)++;
        } catch (const std::exception&) {
          wrong++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(right.load(), kThreads * kCalls);
}

// A wait that times out while this thread reads the socket hands it back:
// the I/O thread then takes the result in, with nobody waiting for it.
TEST(CallerIo, AWaitThatGivesUpLeavesTheResultToTheIoThread) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto stepper = rt.spawn<Stepper>("caller-io-stepper");
  auto f = stepper.call(&Stepper::run, int64_t{7}, int64_t{3}, int64_t{100});  // 300 ms of work
  EXPECT_FALSE(f.wait_for(20ms));
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!f.ready() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();  // ready() only looks: it never reads the socket
  }
  ASSERT_TRUE(f.ready()) << "the I/O thread never took the result in";
  StepReport r = f.get();
  EXPECT_EQ(r.key, 7);
  EXPECT_EQ(r.ran, 3);
}

// One thread waits on a call that runs for seconds (it may hold the socket
// all that time); another thread's 200 synchronous calls to a second actor
// all come back meanwhile.
TEST(CallerIo, ACallerWaitingOnASlowCallHoldsUpNobody) {
  LocalCluster cluster(cluster_options(1, 4));
  auto rt = cluster.connect();
  auto stepper = rt.spawn<Stepper>("caller-io-slow");
  auto worker = rt.spawn<Worker>("caller-io-fast");
  worker.call(&Worker::twice, int64_t{1}).get(20s);  // placed
  std::atomic<bool> slow_started{false};
  StepReport slow_result;
  std::thread slow([&] {
    auto f = stepper.call(&Stepper::run, int64_t{1}, int64_t{30}, int64_t{100});  // 3 s of work
    slow_started = true;
    slow_result = f.get();
  });
  while (!slow_started.load()) std::this_thread::yield();
  for (int64_t i = 0; i < 200; ++i) ASSERT_EQ(worker.call(&Worker::twice, i).get(20s), 2 * i);
  auto done_fast = std::chrono::steady_clock::now();
  slow.join();
  auto done_slow = std::chrono::steady_clock::now();
  EXPECT_EQ(slow_result.ran, 30);
  // The fast calls did not wait for the slow one: it finished well after them.
  EXPECT_GT(done_slow - done_fast, 1s);
}

// Dropping the last Runtime and handle closes the client even while threads
// wait on its calls (their waits keep it alive): those calls fail with a
// connection error, as they always did, rather than wait for results.
TEST(CallerIo, DroppingTheRuntimeFailsTheCallsThatThreadsWaitOn) {
  LocalCluster cluster(cluster_options(1, 4));
  std::optional<Runtime> rt = cluster.connect();
  std::optional<ActorHandle<Stepper>> slow = rt->spawn<Stepper>("caller-io-abandoned");
  slow->call(&Stepper::run, int64_t{0}, int64_t{1}, int64_t{1}).get(20s);  // placed
  // Two waiters: one may hold the socket while the other waits for it.
  std::vector<Future<StepReport>> calls;
  for (int64_t k = 1; k <= 2; ++k) calls.push_back(slow->call(&Stepper::run, k, int64_t{600}, int64_t{100}));
  std::atomic<int> connection_errors{0}, started{0};
  std::vector<std::thread> waiters;
  for (auto& f : calls) {
    waiters.emplace_back([&, f]() mutable {
      ++started;
      try {
        f.get();
      } catch (const ConnectionError&) {
        ++connection_errors;
      }
    });
  }
  while (started.load() < 2) std::this_thread::yield();
  auto dropped = std::chrono::steady_clock::now();
  slow.reset();
  rt.reset();
  for (auto& w : waiters) w.join();
  EXPECT_EQ(connection_errors.load(), 2);
  // The calls run for a minute; their waits ended within a few heartbeats.
  EXPECT_LT(std::chrono::steady_clock::now() - dropped, 20s);
}

// spotlight::wait (Ray's wait) returns the calls that are ready as they
// come: a gated call that cannot finish until the test opens its gate never
// counts, a call that failed does, and a wait for more than are ready ends
// at its timeout with what is ready.
TEST(CallerIo, WaitReturnsTheReadyCallsAndNotTheOthers) {
  testing::TempDir temp("wait");
  const std::string& dir = temp.path();
  LocalCluster cluster(cluster_options(1, 4));
  auto rt = cluster.connect();
  auto gates = rt.pool<Gate>("caller-io-gates", on_market("any").members(2));
  auto workers = rt.pool<Worker>("caller-io-workers", on_market("any").members(2));
  std::vector<Future<int64_t>> calls;
  calls.push_back(gates.call(&Gate::pass, dir, int64_t{0}));        // held until the gate opens
  calls.push_back(workers.call(&Worker::twice, int64_t{21}));       // ready soon
  calls.push_back(gates.call(&Gate::pass, dir, int64_t{2}));        // held
  calls.push_back(workers.call(&Worker::fail, std::string("no")));  // ready soon, as an error

  EXPECT_EQ(spotlight::wait(calls, 2), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(calls[1].get(), 42);
  EXPECT_THROW(calls[3].get(), MethodError);
  // Three cannot be ready while the gate is shut: the wait ends at its timeout.
  EXPECT_EQ(spotlight::wait(calls, 3, 200ms), (std::vector<size_t>{1, 3}));

  std::ofstream(dir + "/open").flush();
  EXPECT_EQ(spotlight::wait(calls, 10), (std::vector<size_t>{0, 1, 2, 3}))
      << "n is capped at the count";
  EXPECT_EQ(calls[0].get(), 0);
  EXPECT_EQ(calls[2].get(), 2);
  std::vector<Future<int64_t>> none{Future<int64_t>()};
  EXPECT_THROW(spotlight::wait(none), std::invalid_argument);
}

}  // namespace
}  // namespace spotlight

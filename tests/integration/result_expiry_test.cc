// head --result-ttl-s: the stored results of a driver that is gone (it died,
// or closed before they came) are dropped once it has been gone that long,
// durably; a result another client fetched first is kept; a later fetch of
// an expired one says so.
#include <gtest/gtest.h>

#include <set>

#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing::counter;
using testing::wait_for_status;
using testing_actors::Gate;
using testing_actors::open_gate;
using testing_actors::Worker;

constexpr const char* kPool = "expiry-workers";

TEST(ResultExpiry, AGoneDriversResultsExpireUnlessFetchedAndStayGone) {
  ClusterOptions o = cluster_options(0);  // no node yet: the calls wait until their driver is gone
  // The driver counts as gone 3 x 200 ms after its last word; its results go 1 s later.
  o.head_args = {"--liveness-ms", "200", "--result-ttl-s", "1"};
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  rt.pool<Worker>(kPool, on_market("any").members(2));
  std::vector<uint64_t> ids;
  {
    auto gone = cluster.connect();
    auto workers = gone.actor<Worker>(kPool);
    for (int64_t i = 0; i < 5; ++i) ids.push_back(workers.call(&Worker::twice, i).task_id());
    gone.wait_accepted();
  }  // closed with every call in flight
  // Before the TTL, another client may still take one over.
  auto kept = rt.fetch<int64_t>(ids[0]);
  // The calls run only once their caller has expired: their results are
  // dropped as they come.
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "clients_expired") == 1;
  }));
  cluster.add_node(2, "reserved");
  EXPECT_EQ(kept.get(30s), 0);
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "results_expired") == 4 && s.tasks_live == 0;
  })) << "the four results nobody fetched were not dropped";
  auto expect_expired = [&](uint64_t id) {
    try {
      rt.fetch<int64_t>(id).get(30s);
      ADD_FAILURE() << "an expired result was still held";
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find("expired"), std::string::npos) << e.what();
    }
  };
  expect_expired(ids[1]);

  // The drop was journaled: a restarted head does not bring them back.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  auto after = cluster.connect();
  EXPECT_EQ(after.status().tasks_live, 0u);
  try {
    after.fetch<int64_t>(ids[2]).get(30s);
    ADD_FAILURE() << "an expired result came back after a restart";
  } catch (const RejectedError&) {
  }
}

// A TTL of 0 keeps results until they are fetched, however long their caller is gone.
TEST(ResultExpiry, ATtlOfZeroKeepsThem) {
  ClusterOptions o = cluster_options(0);
  o.head_args = {"--liveness-ms", "200", "--result-ttl-s", "0"};
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  rt.pool<Worker>(kPool, on_market("any"));
  uint64_t id = 0;
  {
    auto gone = cluster.connect();
    id = gone.actor<Worker>(kPool).call(&Worker::who).task_id();
    gone.wait_accepted();
  }
  cluster.add_node(1, "reserved");
  // Gone for 3 x 200 ms, and then for five times as long again.
  ASSERT_TRUE(
      wait_for_status(cluster.address(), [](const ClusterStatus& s) { return s.tasks_live == 1; }));
  const auto until = std::chrono::steady_clock::now() + 3s;
  EXPECT_FALSE(wait_for_status(
      cluster.address(), [](const ClusterStatus& s) { return s.tasks_live == 0; },
      std::chrono::duration_cast<std::chrono::milliseconds>(until -
                                                            std::chrono::steady_clock::now())));
  EXPECT_FALSE(rt.fetch<std::string>(id).get(30s).empty());
  EXPECT_EQ(counter(rt.status(), "clients_retired"), 0u)
      << "a client's record stays while its results may";
}

// A driver gone past the TTL that holds no call any more is retired: its
// record leaves the head, durably, so a head that serves short-lived drivers
// for months holds the records of those that matter. A call of a retired
// driver is still explained.
TEST(ResultExpiry, GoneClientsWithNoCallLeftAreRetiredForGood) {
  ClusterOptions o = cluster_options(1);
  o.head_args = {"--liveness-ms", "200", "--result-ttl-s",
                 "1.5"};  // long enough to reconnect after a restart
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  auto pool = rt.pool<Worker>(kPool, on_market("any"));
  EXPECT_EQ(pool.call(&Worker::twice, int64_t{1}).get(30s), 2);
  testing::TempDir gate_dir("expiry-gate");
  constexpr const char* kGate = "expiry-gate";
  rt.spawn<Gate>(kGate);
  const uint64_t known = counter(rt.status(), "clients_known");
  ASSERT_GE(known, 1u);
  constexpr int kDrivers = 4;
  uint64_t abandoned = 0;
  for (int i = 0; i < kDrivers; ++i) {
    auto driver = cluster.connect();
    auto w = driver.actor<Worker>(kPool);
    EXPECT_EQ(w.call(&Worker::twice, int64_t{i}).get(30s), 2 * i);  // received: nothing left
  }
  {
    // Leaves a call whose result nobody receives. It waits at a gate until
    // the driver has closed: a result that came first would be received by
    // the driver's connection (and acknowledged as it closes), with nothing
    // left to expire.
    auto driver = cluster.connect();
    abandoned = driver.actor<Gate>(kGate).call(&Gate::pass, gate_dir.path(), int64_t{7}).task_id();
    driver.wait_accepted();
  }
  open_gate(gate_dir.path());
  ClusterStatus s;
  ASSERT_TRUE(wait_for_status(cluster.address(),
                              [&](const ClusterStatus& st) {
                                s = st;
                                return counter(st, "clients_retired") == kDrivers + 1;
                              }))
      << "retired: " << counter(s, "clients_retired");
  EXPECT_EQ(counter(s, "clients_known"), known) << "only the connected driver's record is left";
  EXPECT_EQ(counter(s, "results_expired"), 1u) << "the abandoned result went first";
  EXPECT_EQ(s.tasks_live, 0u);
  auto fetch_says_expired = [](Runtime& r, uint64_t id) {
    try {
      r.fetch<int64_t>(id).get(30s);
      ADD_FAILURE() << "a retired client's call was still held";
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find("expired"), std::string::npos) << e.what();
    }
  };
  fetch_says_expired(rt, abandoned);

  // Journaled: a head killed and restarted does not bring the records back,
  // nor does one that stopped cleanly (its tables were written).
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  auto again = cluster.connect();
  EXPECT_EQ(counter(again.status(), "clients_known"), known + 1)
      << "the driver that just connected";
  cluster.kill_head(SIGTERM);
  cluster.start_head();
  auto third = cluster.connect();
  EXPECT_LE(counter(third.status(), "clients_known"), known + 2);
  fetch_says_expired(third, abandoned);
  EXPECT_EQ(third.actor<Worker>(kPool).call(&Worker::twice, int64_t{4}).get(30s), 8)
      << "still serving";
}

// Past head --max-clients, the numbers of retired drivers are given out
// again, so new drivers keep coming however many came before; no task id is
// ever used twice, and a number stays taken while a call its driver made is
// held for another client. While no number is free, a new driver is refused
// at once with the reason, and the head goes on serving.
TEST(ResultExpiry, RetiredDriversNumbersAreGivenOutAgain) {
  constexpr uint64_t kMost = 3;
  ClusterOptions o = cluster_options(1);
  o.head_args = {"--liveness-ms", "200",           "--result-ttl-s",
                 "0.3",           "--max-clients", std::to_string(kMost)};
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  auto pool = rt.pool<Worker>(kPool, on_market("any"));
  EXPECT_EQ(pool.call(&Worker::twice, int64_t{1}).get(30s), 2);
  ASSERT_EQ(counter(rt.status(), "clients_known"), 1u);
  // A driver leaves a call that never runs (its pool waits for a node that
  // never joins), fetched by rt: the driver is retired, its call stays.
  rt.pool<Worker>("expiry-nowhere", on_market("any").on_node("no-such-node"));
  uint64_t kept = 0;
  {
    auto driver = cluster.connect();
    kept = driver.actor<Worker>("expiry-nowhere").call(&Worker::twice, int64_t{0}).task_id();
    driver.wait_accepted();
    rt.fetch<int64_t>(kept);
  }
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    return counter(s, "clients_retired") == 1;
  }));
  // Twelve drivers one after another, each retired before the next comes:
  // one number is left for all of them.
  constexpr int kDrivers = 12;
  std::set<uint64_t> ids{kept};
  for (int i = 0; i < kDrivers; ++i) {
    {
      auto driver = cluster.connect();
      auto f = driver.actor<Worker>(kPool).call(&Worker::twice, int64_t{i});
      EXPECT_NE(f.task_id() >> 40, kept >> 40) << "the number of a call still held";
      EXPECT_TRUE(ids.insert(f.task_id()).second) << "task id " << f.task_id() << " used twice";
      EXPECT_EQ(f.get(30s), 2 * i);
    }
    ASSERT_TRUE(wait_for_status(cluster.address(),
                                [&](const ClusterStatus& s) {
                                  return counter(s, "clients_retired") ==
                                         static_cast<uint64_t>(i + 2);
                                }))
        << "driver " << i;
  }
  EXPECT_EQ(counter(rt.status(), "client_numbers_reused"), kDrivers - 1u);

  // The one free number held: the next driver hears why at once.
  std::vector<Runtime> holders;
  holders.push_back(cluster.connect());
  try {
    cluster.connect();
    ADD_FAILURE() << "a driver was taken with no client number free";
  } catch (const ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find("no client number free"), std::string::npos) << e.what();
  }
  EXPECT_GE(counter(rt.status(), "clients_refused_full"), 1u);
  EXPECT_EQ(pool.call(&Worker::twice, int64_t{5}).get(30s), 10) << "still serving";
  // Once the holder is gone and retired, a driver is taken again.
  holders.clear();
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    return counter(s, "clients_retired") == kDrivers + 2;
  }));
  auto late = cluster.connect();
  EXPECT_EQ(late.actor<Worker>(kPool).call(&Worker::twice, int64_t{6}).get(30s), 12);
}

}  // namespace
}  // namespace spotlight

// A driver that dies does not take its calls with it: a new client fetches
// them by task id (Runtime::fetch), becomes their caller, durably, and gets
// each result, whether it was stored before the fetch or after. The test
// starts this same executable as the driver (`fetch_test --driver ADDRESS
// FILE N`) and kills it with SIGKILL.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/process.h"
#include "support/cluster.h"
#include "support/raw_peer.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"
#include "wire/envelope.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing::counter;
using testing::find_pool;
using testing::RawPeer;
using testing::wait_for_status;
using testing_actors::Recorder;
using testing_actors::Worker;

constexpr const char* kPool = "fetch-workers";

// True once `pool` holds `queued` calls waiting and none leased.
bool pool_holds(const std::string& address, uint64_t queued) {
  return wait_for_status(address, [&](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, kPool);
    return p && p->queued == queued && p->leased == 0;
  });
}

std::string log_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Fetch, ANewClientCollectsTheCallsOfADriverKilledMidJob) {
  constexpr int kCalls = 40;
  testing::TempDir temp("fetch");
  const std::string& dir = temp.path();
  LocalCluster cluster(cluster_options(0));  // no node yet: every call waits in its mailbox
  auto rt = cluster.connect();
  rt.pool<Worker>(kPool, on_market("any").members(2));

  // The driver submits its calls, writes their ids, and dies with them in flight.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t driver =
      common::spawn({self, "--driver", cluster.address(), dir + "/ids", std::to_string(kCalls)},
                    dir + "/driver.log", {"SPOTLIGHT_CLUSTER_KEY=" + cluster.key()});
  const std::string text = common::wait_for_file(dir + "/ids", 60s);
  ASSERT_FALSE(text.empty()) << log_of(dir + "/driver.log");
  std::vector<uint64_t> ids;
  std::istringstream in(text);
  for (uint64_t id; in >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kCalls));
  // wait_accepted() returned before the driver wrote its ids: the head holds every call.
  auto held = cluster_status(cluster.address());
  ASSERT_NE(find_pool(held, kPool), nullptr);
  ASSERT_EQ(find_pool(held, kPool)->queued, static_cast<uint64_t>(kCalls))
      << "wait_accepted() returned early";
  ASSERT_TRUE(common::signal_process(driver, SIGKILL));
  ASSERT_NE(common::wait_exit(driver, 10s), -1);

  // A new client takes over the first half while they still wait for a node.
  auto collector = cluster.connect();
  std::vector<Future<int64_t>> first;
  for (int i = 0; i < kCalls / 2; ++i) {
    first.push_back(collector.fetch<int64_t>(ids[i]));
    EXPECT_EQ(first.back().task_id(), ids[i]);
  }
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return counter(s, "claimed_calls") == kCalls / 2;
  }));
  // The claims are durable: a head killed and restarted still sends those
  // results to the collector, not to the dead driver.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  cluster.add_node(2, "reserved");
  for (int i = 0; i < kCalls / 2; ++i) EXPECT_EQ(first[i].get(60s), 2 * i);
  // The collector asked again after the restart, and its claims were found in the store.
  auto after_restart = collector.status();
  EXPECT_EQ(counter(after_restart, "fetches"), static_cast<uint64_t>(kCalls / 2));
  EXPECT_EQ(counter(after_restart, "claimed_calls"), 0u) << "a claim was lost with the head";

  // The second half finished with nobody to receive them: they stay stored,
  // while the first half, acknowledged by the collector, is forgotten.
  ASSERT_TRUE(pool_holds(cluster.address(), 0));
  ASSERT_TRUE(wait_for_status(cluster.address(),
                              [](const ClusterStatus& s) { return s.tasks_live == kCalls / 2; }));
  // Another client acknowledging them (as a caller that lost its calls to a
  // fetch does with its rejections) forgets nothing: only a call's caller can.
  RawPeer intruder(cluster.address());
  intruder.send(wire::encode(wire::HelloClient{"fetch-intruder", {}, {}}));
  ASSERT_TRUE(intruder.reply().has_value());
  intruder.send(
      wire::encode(wire::AckResults{std::vector<uint64_t>(ids.begin() + kCalls / 2, ids.end())}));
  intruder.send(wire::encode_empty(wire::MsgType::kStatusRequest, 7));
  auto answered = intruder.reply();  // after the turn that took in the acknowledgement
  ASSERT_TRUE(answered.has_value());
  EXPECT_EQ(answered->body<ClusterStatus>().tasks_live, static_cast<uint64_t>(kCalls / 2));

  for (int i = kCalls / 2; i < kCalls; ++i)
    EXPECT_EQ(collector.fetch<int64_t>(ids[i]).get(30s), 2 * i);
  // The collector acknowledged everything it received: nothing stays stored.
  EXPECT_TRUE(
      wait_for_status(cluster.address(), [](const ClusterStatus& s) { return s.tasks_live == 0; }));

  // Calls the head does not hold are refused, saying why as far as it can tell.
  auto late = cluster.connect();
  const uint64_t never = (ids[0] >> 40 << 40) | (kCalls + 1000);  // the driver never made it
  for (auto [id, why] :
       {std::pair{ids[0], "its result was received"}, std::pair{never, "it was never accepted"},
        std::pair{uint64_t{12345}, "no client of this head made it"}}) {
    try {
      late.fetch<int64_t>(id).get(30s);
      ADD_FAILURE() << "fetching call " << id << " did not fail";
    } catch (const RejectedError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("is not held by this head: ")),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

// The next frame of `type` that `peer` receives (others are skipped).
wire::Envelope next_of(RawPeer& peer, wire::MsgType type) {
  for (int i = 0; i < 100; ++i) {
    auto env = peer.reply(10s);
    if (!env) break;
    if (env->type == type) return std::move(*env);
  }
  ADD_FAILURE() << "no " << wire::to_string(type) << " arrived";
  return {};
}

// A caller that missed the news that its call was fetched (it was away) and
// sends it again after the fetcher received its result: the head no longer
// holds the call, and must not take it as a new one and run it again.
TEST(Fetch, AResubmissionAfterTheFetcherReceivedTheResultDoesNotRunAgain) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("fetch-recorder");
  RawPeer driver(cluster.address());  // a client that will not read what it is sent
  driver.send(wire::encode(wire::HelloClient{"fetch-raw-driver", {}, {}}));
  const uint64_t id =
      (uint64_t{next_of(driver, wire::MsgType::kWelcome).body<wire::Welcome>().client_num} << 40) |
      1;
  const wire::Calls call{
      {wire::Call{id, "fetch-recorder", "record", Blob{pack(std::make_tuple(int64_t{7}))}, 0, 0}}};
  driver.send(wire::encode(call));
  driver.send(wire::encode_empty(wire::MsgType::kSync, 9));
  EXPECT_EQ(next_of(driver, wire::MsgType::kOk).request_id, 9u);

  auto collector = cluster.connect();
  Future<int64_t> taken = collector.fetch<int64_t>(id);
  // The head tells the driver at once; it does not listen.
  const auto told = next_of(driver, wire::MsgType::kResults).body<wire::Results>();
  ASSERT_EQ(told.results.size(), 1u);
  EXPECT_NE(told.results[0].payload.data.find("was fetched by another client"), std::string::npos);
  cluster.add_node(1, "reserved");
  EXPECT_EQ(taken.get(60s), 7);
  ASSERT_TRUE(
      wait_for_status(cluster.address(), [](const ClusterStatus& s) { return s.tasks_live == 0; }));

  // The driver reconnects (the head may have dropped its silent connection)
  // and resends what it still awaits, as the client library does.
  driver.send(wire::encode(wire::HelloClient{"fetch-raw-driver", {id}, {}}));
  next_of(driver, wire::MsgType::kWelcome);
  driver.send(wire::encode(call));
  wire::Envelope answer = next_of(driver, wire::MsgType::kResults);
  bool refused = false;
  for (const auto& r : answer.body<wire::Results>().results) {
    if (r.id != id) continue;
    refused = !r.ok && r.kind == static_cast<int32_t>(ErrorKind::kRejected);
    EXPECT_NE(r.payload.data.find("its result was received"), std::string::npos) << r.payload.data;
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(rec.call(&Recorder::stats).get(30s).executions, 1) << "the call ran again";

  // A Fetch over the head's bound is refused as a whole, and the head serves on.
  driver.send(wire::encode(wire::Fetch{std::vector<uint64_t>((1u << 20) + 1, id)}));
  EXPECT_EQ(next_of(driver, wire::MsgType::kError).body<wire::Error>().code,
            static_cast<int32_t>(wire::ErrorCode::kBadRequest));
  EXPECT_EQ(rec.call(&Recorder::stats).get(30s).executions, 1);
}

TEST(Fetch, ACallerStillWaitingIsToldItsCallWasFetched) {
  LocalCluster cluster(cluster_options(0));
  auto owner = cluster.connect();
  auto workers = owner.pool<Worker>(kPool, on_market("any").members(1));
  Future<int64_t> mine = workers.call(&Worker::twice, int64_t{21});
  ASSERT_NE(mine.task_id(), 0u);
  ASSERT_TRUE(pool_holds(cluster.address(), 1));

  auto other = cluster.connect();
  Future<int64_t> taken = other.fetch<int64_t>(mine.task_id());
  Future<int64_t> again =
      other.fetch<int64_t>(mine.task_id());  // the same wait, not a second claim
  try {
    mine.get(30s);
    ADD_FAILURE() << "the call's first caller got a result after another client fetched it";
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find("was fetched by another client"), std::string::npos)
        << e.what();
  }
  cluster.add_node(1, "reserved");
  EXPECT_EQ(taken.get(60s), 42);
  EXPECT_EQ(again.get(1s), 42);
  auto s = owner.status();
  EXPECT_EQ(counter(s, "claimed_calls"), 1u);
  EXPECT_EQ(counter(s, "fetches"), 1u);
}

// The driver of the first test: submits `n` calls by name, writes their ids,
// and waits to be killed.
int driver(const std::string& address, const std::string& ids_file, int n) {
  auto rt = connect(address);
  std::ostringstream ids;
  std::vector<Future<int64_t>> calls;
  for (int64_t i = 0; i < n; ++i) {
    calls.push_back(rt.call<int64_t>(kPool, "twice", i));
    ids << calls.back().task_id() << "\n";
  }
  rt.wait_accepted();  // the ids are worth recording only once the calls are durable
  {
    std::ofstream out(ids_file + ".tmp");
    out << ids.str();
  }
  std::filesystem::rename(ids_file + ".tmp", ids_file);
  while (true) pause();
}

}  // namespace
}  // namespace spotlight

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--driver") {
    return spotlight::driver(argv[2], argv[3], std::stoi(argv[4]));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

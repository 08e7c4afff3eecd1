// Nothing accepted is lost when the head is killed, and nothing finished runs
// again: calls queued at a kill -9, results stored for a caller that is away,
// a kill after compactions, a compaction that fails, results sent into a
// head that dies before taking them in.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "common/process.h"
#include "support/cluster.h"
#include "support/sqlite.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::find_pool;
using testing::wait_for_status;
using testing_actors::Gate;
using testing_actors::Recorder;
using testing_actors::Worker;

// Two nodes of `market` join; each of `fs` (call i recorded i) completes,
// and no call ran twice.
void finish_on_new_nodes(LocalCluster& cluster, ActorHandle<Recorder>& rec,
                         std::vector<Future<int64_t>>& fs, const std::string& market) {
  const int n = static_cast<int>(fs.size());
  cluster.add_node(2, market);
  cluster.add_node(2, market);
  for (int i = 0; i < n; ++i) EXPECT_EQ(fs[i].get(std::chrono::seconds(60)), i);
  Recorder::Stats stats = rec.call(&Recorder::stats).get();
  EXPECT_EQ(stats.executions, n) << "no call ran twice";
  EXPECT_EQ(stats.distinct, n);
  // The client received every result and acknowledged it: nothing stays live.
  EXPECT_TRUE(
      wait_for_status(cluster.address(), [](const ClusterStatus& s) { return s.tasks_live == 0; }));
}

// Submits `n` calls to `rec` (pool `pool`) that no node can run yet, kills the
// head with SIGKILL and restarts it on its store, which must hold them all;
// then two nodes of `market` join and every call completes exactly once.
void kill_while_queued_then_finish(LocalCluster& cluster, ActorHandle<Recorder>& rec,
                                   const std::string& pool, int n, const std::string& market) {
  std::vector<Future<int64_t>> fs;
  for (int i = 0; i < n; ++i) fs.push_back(rec.call(&Recorder::record, int64_t{i}));
  // Every call is accepted (committed) and waits.
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    const PoolStatus* p = find_pool(s, pool);
    return p && p->queued == static_cast<uint64_t>(n);
  }));

  cluster.kill_head(SIGKILL);
  cluster.start_head();
  // The restarted head has all of them from its store.
  ClusterStatus after = cluster_status(cluster.address());
  EXPECT_EQ(after.boot, 2u);
  const PoolStatus* p = find_pool(after, pool);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->queued, static_cast<uint64_t>(n));
  EXPECT_EQ(after.tasks_live, static_cast<uint64_t>(n));

  finish_on_new_nodes(cluster, rec, fs, market);
}

TEST(Durability, KillNineOfTheHeadLosesNothing) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("recorder");
  kill_while_queued_then_finish(cluster, rec, "recorder", 1000, "reserved");
}

TEST(Durability, ResultsStoredWhileTheCallerIsAwayAreDeliveredOnce) {
  LocalCluster cluster(cluster_options(1));
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("recorder2");
  std::vector<Future<int64_t>> fs;
  for (int i = 0; i < 200; ++i) fs.push_back(rec.call(&Recorder::record, int64_t{i}));
  for (int i = 0; i < 200; ++i) EXPECT_EQ(fs[i].get(), i);
  // Kill the head mid-stream of a second batch; the client resubmits what it
  // has no result for, and the head answers from its store or runs it once.
  std::vector<Future<int64_t>> more;
  for (int i = 200; i < 400; ++i) more.push_back(rec.call(&Recorder::record, int64_t{i}));
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(more[i].get(std::chrono::seconds(60)), 200 + i);
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.tasks_live == 0;
  }));
}

// Compactions fold the journal into the store's tables and drop the journal
// file; a head killed after several of them restarts from tables plus the
// journal written since, and still loses nothing.
TEST(Durability, KillNineAfterCompactionsLosesNothing) {
  ClusterOptions o = cluster_options(1);
  o.head_args = {"--compact-mib", "0.25"};
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  auto w = rt.spawn<Worker>("compacting");
  // Results of 512 KiB at a time go through the journal until the head has
  // compacted four times. A compaction that is still writing its tables when
  // the next 0.25 MiB arrive is not doubled, so how many a given volume
  // brings depends on the machine's speed: count them, do not assume them.
  auto compactions = [&] {
    return testing::counter(cluster_status(cluster.address()), "compactions");
  };
  for (int round = 0; round < 64 && compactions() < 4; ++round) {
    std::vector<Future<std::string>> blobs;
    for (int i = 0; i < 256; ++i) blobs.push_back(w.call(&Worker::blob, int64_t{2048}));
    for (auto& f : blobs) ASSERT_EQ(f.get(std::chrono::seconds(60)).size(), 2048u);
  }
  ASSERT_GE(compactions(), 4u);
  // No spot node yet: these calls wait.
  auto rec = rt.spawn<Recorder>("parked", on_market("spot"));
  kill_while_queued_then_finish(cluster, rec, "parked", 500, "spot");
}

// A compaction's snapshot taken over many turns (--snapshot-records 1: one
// task per turn). A head killed while it is being taken leaves the tables
// of the compaction before and loses nothing; a node that leases, finishes
// and forgets the tasks it still owes (copied first, as they were at its
// cut) loses nothing either, nor runs a call twice.
TEST(Durability, KillNineWhileASnapshotIsTakenLosesNothing) {
  ClusterOptions o = cluster_options(0);
  o.head_args = {"--compact-mib", "0.25", "--snapshot-records", "1"};
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("snapshotted", on_market("spot"));
  std::vector<Future<int64_t>> fs;
  auto submit = [&](int n) {
    const int from = static_cast<int>(fs.size());
    for (int i = from; i < from + n; ++i) fs.push_back(rec.call(&Recorder::record, int64_t{i}));
    rt.wait_accepted(std::chrono::seconds(60));
  };
  auto snapshot_begun = [&] {
    return wait_for_status(cluster.address(), [](const ClusterStatus& s) {
      return testing::counter(s, "snapshot_tasks_left") > 0;
    });
  };
  submit(40000);
  // A restarted head holds every task as changed since the last compaction:
  // the next snapshot owes all of them, some 40,000 turns' worth.
  cluster.kill_head(SIGKILL);
  cluster.start_head();
  submit(10000);  // 0.25 MiB of journal and more: the next compaction begins
  ASSERT_TRUE(snapshot_begun());
  cluster.kill_head(SIGKILL);  // within a few milliseconds of seeing it with tasks left
  cluster.start_head();
  const ClusterStatus back = cluster_status(cluster.address());
  EXPECT_EQ(back.tasks_live, fs.size()) << "every accepted call, from the older files";
  EXPECT_EQ(find_pool(back, "snapshotted")->queued, fs.size());

  submit(10000);
  ASSERT_TRUE(snapshot_begun());
  finish_on_new_nodes(cluster, rec, fs, "spot");  // they run while the snapshot is taken
  EXPECT_GT(testing::counter(cluster_status(cluster.address()), "snapshot_tasks_copied_early"), 0u)
      << "no task changed while it was owed: the snapshot ended before the node began";
}

// A compaction that cannot write the store's tables (here a trigger makes
// SQLite refuse them) stops the head with the reason: it cannot take that
// snapshot again. Nothing it accepted is lost: a head restarted on the
// mended store replays the journal files the compaction left, and every call
// completes once.
TEST(Durability, AHeadWhoseCompactionFailsStopsAndARestartLosesNothing) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("spotlight-failed-compaction-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "head.db").string();
  testing::exec_sqlite(path, "CREATE TABLE tasks(id INTEGER PRIMARY KEY, rec BLOB)");
  testing::exec_sqlite(path, testing::kFailTaskInserts);

  ClusterOptions o = cluster_options(0);
  o.store = path;
  o.head_args = {"--compact-mib", "0.01"};
  LocalCluster cluster(o);
  auto rt = cluster.connect();
  auto rec = rt.spawn<Recorder>("doomed", on_market("spot"));
  std::vector<Future<int64_t>> calls;
  for (int i = 0; i < 500; ++i) calls.push_back(rec.call(&Recorder::record, int64_t{i}));
  // About 25 KiB of accepted calls: the first compaction that writes a task fails.
  const int status = common::wait_exit(cluster.head_pid(), std::chrono::seconds(30));
  ASSERT_TRUE(status > 0 && WIFEXITED(status)) << "the head did not stop: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream log(std::filesystem::path(cluster.log_dir()) / "head.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  const size_t reason = text.find("a compaction failed: ");
  ASSERT_NE(reason, std::string::npos) << text;
  EXPECT_NE(text.find("injected fault", reason), std::string::npos) << text;

  testing::exec_sqlite(path, "DROP TRIGGER fail");
  cluster.start_head();
  finish_on_new_nodes(cluster, rec, calls, "spot");
  cluster.stop();
  std::filesystem::remove_all(dir);
}

// Lines of DIR/runs (one per run of a Gate task).
std::vector<std::string> runs_in(const std::string& dir) {
  std::ifstream in(dir + "/runs");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Tasks that finish while the head is stopped send their results into its
// socket; the head is then killed, so it never took them in. Their node kept
// them (no head acknowledged them) and sends them again to the restarted
// head: every call completes, and none ran twice.
TEST(Durability, ResultsSentToADyingHeadAreNotLostNorRunAgain) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("spotlight-gates-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  LocalCluster cluster(cluster_options(1, 4));
  auto rt = cluster.connect();
  auto gates = rt.pool<Gate>("gates", on_market("any").members(4));
  std::vector<Future<int64_t>> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(gates.call(&Gate::pass, dir, int64_t{i}));
  ASSERT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.nodes.size() == 1 && s.nodes[0].running == 4;
  }));

  ASSERT_EQ(kill(cluster.head_pid(), SIGSTOP), 0);
  std::ofstream(dir + "/open").flush();
  // Each run records itself just before it returns; its result leaves at once.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (runs_in(dir).size() < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling another process's file
  ASSERT_EQ(runs_in(dir).size(), 4u);
  cluster.kill_head(SIGKILL);
  cluster.start_head();

  for (int i = 0; i < 4; ++i) EXPECT_EQ(calls[i].get(std::chrono::seconds(60)), i);
  std::vector<std::string> runs = runs_in(dir);
  EXPECT_EQ(runs.size(), 4u) << "a task whose result the dead head never took in ran again";
  EXPECT_EQ(std::set<std::string>(runs.begin(), runs.end()).size(), 4u);
  cluster.stop();
  std::filesystem::remove_all(dir);
}

// A client acknowledges results lazily (with its next calls, or within a few
// milliseconds); one that leaves right after its last result must still
// acknowledge it, or the head would keep that result for a caller that is gone.
TEST(Durability, ACallerThatLeavesAtOnceLeavesNoResultBehind) {
  LocalCluster cluster(cluster_options(1));
  {
    auto rt = cluster.connect();
    auto rec = rt.spawn<Recorder>("recorder3");
    for (int i = 0; i < 50; ++i) ASSERT_EQ(rec.call(&Recorder::record, int64_t{i}).get(), i);
  }  // the client closes here, its last acknowledgement not yet due
  EXPECT_TRUE(wait_for_status(cluster.address(), [](const ClusterStatus& s) {
    return s.tasks_live == 0;
  }));
}

}  // namespace
}  // namespace spotlight

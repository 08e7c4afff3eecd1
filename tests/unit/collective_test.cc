// Communicator over Gloo: every collective on 2, 3 and 4 real processes
// (forked, rendezvous through a file KvStore), re-forming a new epoch in the
// same processes, threads with the in-memory store, and the failures: a
// member that never arrives, a member that dies, bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <thread>
#include <vector>

#include "spotlight/collective.h"

using namespace spotlight::collective;
using namespace std::chrono_literals;

namespace {

std::string temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("spotlight-kv-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(std::rand()));
  std::filesystem::create_directories(d);
  return d.string();
}

// Runs body(rank) in `n` forked processes; true if every one exits 0.
template <class F>
bool in_processes(int n, F body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      bool ok = false;
      try {
        ok = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
      std::fflush(stderr);
      ::_exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  bool all = true;
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    all = all && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return all;
}

// Every collective once; returns whether each result is what it must be.
bool exercise(Communicator& c) {
  const int n = c.size(), me = c.rank();
  bool ok = c.rank() >= 0 && c.rank() < n;
  // all_to_all: block r of rank s holds s*100 + r*10 + k.
  std::vector<int32_t> send(size_t(n) * 4), recv(size_t(n) * 4, -1);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < 4; ++k) send[size_t(r) * 4 + k] = me * 100 + r * 10 + k;
  c.all_to_all(send.data(), recv.data(), 4 * sizeof(int32_t));
  for (int s = 0; s < n; ++s)
    for (int k = 0; k < 4; ++k) ok = ok && recv[size_t(s) * 4 + k] == s * 100 + me * 10 + k;
  // all_gather
  const int64_t mine[2] = {me, 2 * me};
  std::vector<int64_t> all(size_t(n) * 2, -1);
  c.all_gather(mine, all.data(), sizeof mine);
  for (int s = 0; s < n; ++s) ok = ok && all[size_t(s) * 2] == s && all[size_t(s) * 2 + 1] == 2 * s;
  // broadcast from the last rank
  std::vector<double> b(1000, 0.0);
  if (me == n - 1) std::iota(b.begin(), b.end(), 0.5);
  c.broadcast(b.data(), b.size() * sizeof(double), n - 1);
  for (size_t i = 0; i < b.size(); ++i) ok = ok && b[i] == double(i) + 0.5;
  // all_reduce: sum of floats, max of int64, min of doubles
  std::vector<float> f(5000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = float(me) + float(i);
  c.all_reduce(f.data(), f.size(), DataType::kFloat32, ReduceOp::kSum);
  for (size_t i = 0; i < f.size(); ++i) ok = ok && f[i] == float(n) * float(i) + float(n * (n - 1) / 2);
  int64_t mx = me * 7;
  c.all_reduce(&mx, 1, DataType::kInt64, ReduceOp::kMax);
  ok = ok && mx == (n - 1) * 7;
  double mn = 3.0 + me;
  c.all_reduce(&mn, 1, DataType::kFloat64, ReduceOp::kMin);
  ok = ok && mn == 3.0;
  // send/recv: rank 0 sends each rank its own block, and gets one back from each.
  std::vector<int64_t> p2p(300);
  for (int s = 1; s < n; ++s) {
    if (me == 0) {
      std::iota(p2p.begin(), p2p.end(), int64_t{1000} * s);
      c.send(p2p.data(), p2p.size() * sizeof(int64_t), s);
    } else if (me == s) {
      c.recv(p2p.data(), p2p.size() * sizeof(int64_t), 0);
      for (size_t i = 0; i < p2p.size(); ++i) ok = ok && p2p[i] == int64_t{1000} * s + int64_t(i);
    }
  }
  for (int s = 1; s < n; ++s) {
    int64_t back = -1;
    if (me == s) {
      back = 7 * s;
      c.send(&back, sizeof back, 0);
    } else if (me == 0) {
      c.recv(&back, sizeof back, s);
      ok = ok && back == 7 * s;
    }
  }
  c.barrier();
  return ok;
}

}  // namespace

TEST(Collectives, EveryCollectiveOnTwoThreeAndFourProcesses) {
  for (int n : {2, 3, 4}) {
    const auto dir = temp_dir();
    EXPECT_TRUE(in_processes(n, [&](int rank) {
      auto kv = make_file_kv(dir);
      auto c = make_gloo_communicator(*kv, "g", 1, rank, n);
      return c->size() == n && c->rank() == rank && c->epoch() == 1 && exercise(*c);
    })) << n << " processes";
    std::filesystem::remove_all(dir);
  }
}

TEST(Collectives, SurvivorsFormTheNextEpochInTheSameProcesses) {
  // Four members at epoch 1; then three of them (ranks renumbered) at epoch 2,
  // through the same store, without restarting a process.
  const auto dir = temp_dir();
  EXPECT_TRUE(in_processes(4, [&](int rank) {
    auto kv = make_file_kv(dir);
    auto first = make_gloo_communicator(*kv, "g", 1, rank, 4);
    if (!exercise(*first)) return false;
    if (rank == 2) return true;  // leaves the group
    const int new_rank = rank < 2 ? rank : rank - 1;
    auto second = make_gloo_communicator(*kv, "g", 2, new_rank, 3);
    return second->epoch() == 2 && second->size() == 3 && exercise(*second);
  }));
  std::filesystem::remove_all(dir);
}

TEST(Collectives, ThreadsRendezvousThroughTheMemoryStore) {
  auto kv = make_memory_kv();
  std::vector<int> ok(3, 0);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] { ok[r] = exercise(*make_gloo_communicator(*kv, "threads", 7, r, 3)); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok, std::vector<int>(3, 1));
}

// Both test stores forget a key as the head's KV does.
TEST(Collectives, TheTestStoresEraseKeys) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("spotlight-kv-erase-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  for (auto kv : {make_memory_kv(), make_file_kv(dir.string())}) {
    kv->set("a/b c", "1");
    EXPECT_TRUE(kv->erase("a/b c"));
    EXPECT_EQ(kv->wait("a/b c", std::chrono::milliseconds(0)), std::nullopt);
    EXPECT_FALSE(kv->erase("a/b c"));
  }
  std::filesystem::remove_all(dir);
}

TEST(Collectives, AMemberThatNeverArrivesIsAnErrorNotAHang) {
  auto kv = make_memory_kv();
  GlooOptions o;
  o.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(make_gloo_communicator(*kv, "lonely", 1, 0, 2, o), CollectiveError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(Collectives, APeerThatDiesFailsTheCollectiveWithAnError) {
  // Rank 1 connects and exits at once (its sockets close as after kill -9);
  // rank 0's next collective must throw CollectiveError, not hang or abort.
  const auto dir = temp_dir();
  EXPECT_TRUE(in_processes(2, [&](int rank) {
    auto kv = make_file_kv(dir);
    GlooOptions o;
    o.timeout = 2000ms;
    auto c = make_gloo_communicator(*kv, "dies", 1, rank, 2, o);
    c->barrier();  // both are connected
    if (rank == 1) ::_exit(0);
    std::vector<float> buf(1 << 16, 1.0f);
    try {
      for (int i = 0; i < 100; ++i) c->all_reduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const CollectiveError& e) {
      return std::string(e.what()).find("all_reduce failed in epoch 1") != std::string::npos;
    }
    return false;
  }));
  std::filesystem::remove_all(dir);
}

TEST(Collectives, BadArgumentsGetAClearError) {
  auto kv = make_memory_kv();
  EXPECT_THROW(make_gloo_communicator(*kv, "g", 1, 2, 2), CollectiveError);
  EXPECT_THROW(make_gloo_communicator(*kv, "g", 1, -1, 2), CollectiveError);
  EXPECT_THROW(make_gloo_communicator(*kv, "g", 1, 0, 0), CollectiveError);
  auto solo = make_gloo_communicator(*kv, "solo", 1, 0, 1);
  double x = 1;
  EXPECT_THROW(solo->broadcast(&x, sizeof x, 1), CollectiveError);
  EXPECT_THROW(solo->send(&x, sizeof x, 0), CollectiveError) << "not to itself";
  EXPECT_THROW(solo->recv(&x, sizeof x, 3), CollectiveError) << "not from a stranger";
  EXPECT_TRUE(exercise(*solo));
}

// How long a compaction holds the head while a backlog waits: N calls are
// submitted to an actor that no node can host (market spot, no nodes), and
// once all are queued the head's status counters are read.
// Build and run (from the repository root, after tools/run build):
//   g++ -std=c++20 -O2 -Iruntime/include -I. -Iruntime docs/runs/2026-12-01-backlog.cc \
//       -Lbuild/lib -lspotlight_runtime -Wl,-rpath,$PWD/build/lib -lzmq -lpthread -o
//       /tmp/backlog-bin
//   /tmp/backlog-bin N COMPACT_MIB BIN_DIR
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "spotlight/spotlight.h"

namespace backlog {
struct Echo {
  int64_t ping(int64_t x) { return x; }
};
}  // namespace backlog
SPOTLIGHT_ACTOR(backlog::Echo, ping)

using namespace spotlight;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s N COMPACT_MIB BIN_DIR\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]);
  ClusterOptions co;
  co.nodes = 0;
  co.spotlight_bin = std::string(argv[3]) + "/spotlight";
  co.head_args = {"--compact-mib", argv[2]};
  auto cluster = local_cluster(co);
  ConnectOptions cop;
  cop.max_pending = static_cast<size_t>(n) + 1;
  auto rt = cluster.connect(cop);
  auto echo = rt.spawn<backlog::Echo>("backlog", on_market("spot"));
  std::vector<Future<int64_t>> fs;
  fs.reserve(n);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) fs.push_back(echo.call(&backlog::Echo::ping, i));
  for (;;) {
    ClusterStatus s = cluster_status(cluster.address());
    uint64_t queued = 0;
    for (const auto& p : s.pools) {
      if (p.name == "backlog") queued = p.queued;
    }
    if (queued == static_cast<uint64_t>(n)) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf(
          "{\"queued\": %d, \"seconds\": %.2f, \"compactions\": %llu, \"compaction_ms_max\": "
          "%llu}\n",
          n, secs, static_cast<unsigned long long>(s.counters["compactions"]),
          static_cast<unsigned long long>(s.counters["compaction_ms_max"]));
      break;
    }
  }
  cluster.stop();
}

// Times State::compaction() over N freshly accepted tasks: the pause a
// compaction makes on the head's thread (docs/benchmarks.md, scale section).
// Build and run (from the repository root, after tools/run build):
//   g++ -std=c++20 -O2 -Iruntime/include -I. -Iruntime docs/runs/2026-12-03-snapshot.cc \
//       -Lbuild/lib -lspotlight_runtime -Wl,-rpath,$PWD/build/lib -lzmq -lpthread -o /tmp/snapshot
//   /tmp/snapshot 1000000
#include <chrono>
#include <cstdio>
#include "head/state.h"
using namespace spotlight;
int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::stoull(argv[1]) : 1000000;
  head::State st;
  store::PoolRecord pool{"scale-gate", "Gate", "any", 1, 1, 16};
  st.apply_pool(pool);
  for (uint64_t i = 1; i <= n; ++i) {
    store::TaskRecord t;
    t.id = (uint64_t{1} << 40) | i; t.ord = i; t.caller = 1; t.mailbox = "scale-gate"; t.method = "pass";
    t.args.data = pack(std::make_tuple(int64_t(i)));
    t.accepted_ms = 1764000000000;
    st.apply_accept(t);
  }
  {
    for (auto& [id, t] : st.tasks) st.mark_dirty(id, t);
    auto t0 = std::chrono::steady_clock::now();
    uint64_t sum = 0;
    for (uint64_t id : st.dirty_tasks) { auto it = st.tasks.find(id); sum += it->second.ord; }
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("lookups alone: %.1f ms (%llu)\n", ms, (unsigned long long)sum);
    t0 = std::chrono::steady_clock::now();
    std::string buf; buf.reserve(st.dirty_tasks.size() * 80);
    for (uint64_t id : st.dirty_tasks) { auto it = st.tasks.find(id); struct A { std::string& s; void write(const char* d, size_t n) { s.append(d, n); } } a{buf}; msgpack::pack(a, static_cast<const store::TaskRecord&>(it->second)); }
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("lookups + pack: %.1f ms (%zu bytes)\n", ms, buf.size());
    st.dirty_tasks.clear();
    for (auto& [id, t] : st.tasks) t.dirty = false;
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& [id, t] : st.tasks) st.mark_dirty(id, t);
    auto t0 = std::chrono::steady_clock::now();
    auto c = st.compaction();
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto t1 = std::chrono::steady_clock::now();
    { auto gone = std::move(c); }
    auto free_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    std::printf("snapshot of %llu tasks: %.1f ms (freeing it %.1f ms)\n", (unsigned long long)n, ms, free_ms);
  }
}

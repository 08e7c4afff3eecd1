// hello: a Counter actor, a pool of Square workers, and a Summer actor that calls the pool.
//   hello --address HOST:PORT    against a running cluster whose nodes load libhello_actors.so
//   hello --local                starts a local cluster (head + 2 nodes) first
// Prints its results and exits 0 when they are right.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "hello_actors.h"
#include "spotlight/spotlight.h"

namespace {
std::string actor_library() {
  auto exe = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  return (exe / ".." / "lib" / "libhello_actors.so").lexically_normal().string();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Spotlight hello: a counter and a pool of squares"};
  std::string address;
  bool local = false;
  int calls = 1000;
  auto* a = app.add_option("--address", address, "HOST:PORT of a running head");
  app.add_flag("--local", local, "Start a local cluster (head + 2 nodes) first")->excludes(a);
  app.add_option("--calls", calls, "Calls to the pool")->check(CLI::Range(1, 10000000));
  CLI11_PARSE(app, argc, argv);
  if (address.empty() && !local) {
    std::fprintf(stderr, "hello: give --address HOST:PORT or --local\n");
    return 2;
  }
  try {
    std::optional<spotlight::LocalCluster> cluster;
    if (local) {
      spotlight::ClusterOptions co;
      co.nodes = 2;
      co.slots = 3;
      co.load = {actor_library()};
      cluster.emplace(co);
      address = cluster->address();
      std::printf("local cluster: head at %s, 2 nodes x 3 slots\n", address.c_str());
    }
    auto rt = spotlight::connect(address);

    auto counter = rt.spawn<hello::Counter>("counter", spotlight::on_market("any"));
    for (int i = 1; i <= 10; ++i) counter.call(&hello::Counter::add, i);
    hello::Tally t = counter.call(&hello::Counter::get).get();
    std::printf("counter: value %lld after %lld calls (expected 55 after 10)\n",
                static_cast<long long>(t.value), static_cast<long long>(t.calls));
    bool ok = t.value == 55 && t.calls == 10;

    auto squares = rt.pool<hello::Square>("squares", spotlight::on_market("any").members(3));
    std::vector<spotlight::Future<int64_t>> fs;
    for (int i = 0; i < calls; ++i) fs.push_back(squares.call(&hello::Square::square, i));
    int64_t sum = 0, expected = 0;
    for (int i = 0; i < calls; ++i) {
      sum += fs[i].get();
      expected += static_cast<int64_t>(i) * i;
    }
    std::printf("squares: sum of %d squares = %lld (expected %lld)\n", calls,
                static_cast<long long>(sum), static_cast<long long>(expected));
    ok = ok && sum == expected;

    // An actor calling the pool from inside its own method.
    auto summer = rt.spawn<hello::Summer>("summer", spotlight::on_market("any"));
    const int64_t inner =
        summer.call(&hello::Summer::sum_of_squares, std::string("squares"), int64_t{100}).get();
    std::printf("summer: the actor's own 100 calls to the pool sum to %lld (expected 328350)\n",
                static_cast<long long>(inner));
    ok = ok && inner == 328350;

    std::map<std::string, int> members;
    std::vector<spotlight::Future<std::string>> ws;
    for (int i = 0; i < 60; ++i) ws.push_back(squares.call(&hello::Square::where));
    for (auto& w : ws) members[w.get()]++;
    std::printf("squares: 60 calls served by %zu pool members\n", members.size());

    try {
      squares.call(&hello::Square::checked_sqrt, -4.0).get();
      std::printf("error: expected an exception\n");
      ok = false;
    } catch (const spotlight::MethodError& e) {
      std::printf("squares: checked_sqrt(-4) raised %s: %s\n", e.type().c_str(), e.what());
    }
    std::printf("%s\n", ok ? "hello: all results right" : "hello: WRONG RESULTS");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}

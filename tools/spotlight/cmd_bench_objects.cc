// `spotlight bench objects`: a weight version's trip through the object
// store, on a local cluster of two nodes: put on one node, copied by a slot
// of the other node, then read by that slot's sibling from memory; and a
// driver's puts and gets (Runtime::objects()) to and from a node. Ceilings
// from the same run: memcpy in this process, and ZeroMQ bulk transfer on
// loopback in the same chunk size the stores use.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "spotlight/spotlight.h"
#include "tools/spotlight/bench_actors.h"
#include "tools/spotlight/commands.h"
#include "transport/cluster_key.h"
#include "transport/socket.h"

namespace spotlight::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 8u << 20;  // as the node stores copy

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double memcpy_gbps(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::vector<double> runs;
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    runs.push_back(bytes / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  return median(runs);
}

// `bytes` in kChunk messages, DEALER -> ROUTER over TCP loopback, each chunk
// asked for by the receiver as the stores do (four ahead); with a secure
// `key` under CURVE, as the object servers and their fetchers are.
double zmq_bulk_gbps(size_t bytes, const transport::ClusterKey& key = {}) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  transport::curve_server(router, key);
  router.bind("tcp://127.0.0.1:*");
  const std::string ep = router.get(zmq::sockopt::last_endpoint);
  const size_t chunks = (bytes + kChunk - 1) / kChunk;
  std::thread server([&] {
    std::string chunk(kChunk, 'x');
    for (size_t i = 0; i < chunks; ++i) {
      zmq::message_t id, ask;
      (void)router.recv(id);
      (void)router.recv(ask);
      router.send(id, zmq::send_flags::sndmore);
      router.send(zmq::buffer(chunk), zmq::send_flags::none);
    }
  });
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  transport::curve_client(dealer, key);
  dealer.connect(ep);
  std::vector<char> out(bytes);
  auto t0 = Clock::now();
  size_t asked = 0, got = 0;
  while (asked < chunks && asked < 4) dealer.send(zmq::buffer(std::string("c"))), ++asked;
  while (got < chunks) {
    zmq::message_t m;
    (void)dealer.recv(m);
    std::memcpy(out.data() + got * kChunk, m.data(), std::min(m.size(), bytes - got * kChunk));
    ++got;
    if (asked < chunks) dealer.send(zmq::buffer(std::string("c"))), ++asked;
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  server.join();
  return bytes / s / 1e9;
}

}  // namespace

CLI::App* add_bench_objects(CLI::App& bench) {
  auto mb = std::make_shared<int>(256);
  auto json = std::make_shared<bool>(false);
  auto insecure = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("objects", "Object store: put, copy to another node, read by a sibling slot");
  cmd->add_option("--mb", *mb, "Size of the object (a weight version), MiB")->check(CLI::Range(1, 4096));
  cmd->add_flag("--json", *json, "End with one JSON line of the figures");
  cmd->add_flag("--insecure", *insecure,
                "Run the cluster without a cluster key (no CURVE), and skip the CURVE ceiling");
  cmd->callback([=] {
    const size_t bytes = size_t(*mb) << 20;
    std::printf("Ceilings on this machine, same run\n");
    const double mc = memcpy_gbps(bytes);
    std::printf("  %-24s %8.2f GB/s\n", "memcpy", mc);
    const double zb = zmq_bulk_gbps(bytes);
    std::printf("  %-24s %8.2f GB/s (TCP loopback, %zu MiB chunks)\n", "zmq_bulk", zb, kChunk >> 20);
    double zc = 0;
    if (!*insecure) {
      // The cluster's object servers run CURVE under its key: their own ceiling.
      zc = zmq_bulk_gbps(bytes, transport::ClusterKey::generate());
      std::printf("  %-24s %8.2f GB/s (the same under CURVE)\n", "zmq_bulk_curve", zc);
    }

    ClusterOptions co;
    co.nodes = 1;
    co.slots = 2;
    co.market = "reserved";
    co.insecure = *insecure;
    auto cluster = local_cluster(co);
    cluster.add_node(2, "spot");
    auto rt = cluster.connect();
    auto writer = rt.spawn<bench::ObjectBench>("objects-writer", on_market("reserved"));
    auto reader = rt.spawn<bench::ObjectBench>("objects-reader", on_market("spot"));
    auto sibling = rt.spawn<bench::ObjectBench>("objects-sibling", on_market("spot"));
    std::printf("Object store, %d MiB, two nodes on this machine, %s (3 rounds, medians)\n", *mb,
                *insecure ? "no cluster key" : "CURVE with a cluster key");
    std::vector<double> put_ms, copy_gbps, sibling_us, driver_put_ms, from_driver_gbps,
        driver_get_gbps;
    ObjectStore& driver = rt.objects();
    const std::string driver_bytes(bytes, 'd');
    for (int round = 0; round < 3; ++round) {
      const std::string id = "bench/weights@" + std::to_string(round);
      auto p = writer.call(&bench::ObjectBench::put, id, int64_t(bytes)).get(std::chrono::seconds(120));
      auto c = reader.call(&bench::ObjectBench::get, id).get(std::chrono::seconds(120));
      auto s = sibling.call(&bench::ObjectBench::get, id).get(std::chrono::seconds(120));
      if (c.bytes != bytes || s.bytes != bytes || c.fetches != uint64_t(2 * round + 1) ||
          s.fetches != c.fetches) {
        throw std::runtime_error("object bench: the reader did not copy exactly once per version");
      }
      put_ms.push_back(p.ns / 1e6);
      copy_gbps.push_back(bytes / double(c.ns));
      sibling_us.push_back(s.ns / 1e3);
      // A driver's version, copied by a node; the node's version, copied by the driver.
      const std::string mine = "bench/driver@" + std::to_string(round);
      std::string copy = driver_bytes;  // touched before the clock starts, as the actors' are
      auto t0 = Clock::now();
      driver.put(mine, std::move(copy));
      driver_put_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      auto d = reader.call(&bench::ObjectBench::get, mine).get(std::chrono::seconds(120));
      if (d.bytes != bytes || d.fetches != uint64_t(2 * round + 2)) {
        throw std::runtime_error("object bench: the reader did not copy the driver's version once");
      }
      from_driver_gbps.push_back(bytes / double(d.ns));
      t0 = Clock::now();
      ObjectRef theirs = driver.get(id, std::chrono::seconds(120));
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      if (theirs->size() != bytes || driver.stats().fetches != uint64_t(round + 1)) {
        throw std::runtime_error("object bench: the driver did not copy the node's version once");
      }
      driver_get_gbps.push_back(bytes / ns);
      driver.release(mine);
    }
    // The cluster stops when the callback returns, after `rt`: a driver's
    // store tells the head it is going on close.
    const double pm = median(put_ms), cg = median(copy_gbps), su = median(sibling_us);
    const double dp = median(driver_put_ms), fd = median(from_driver_gbps),
                 dg = median(driver_get_gbps);
    std::printf("  %-24s %8.1f ms\n", "put", pm);
    std::printf("  %-24s %8.2f GB/s (%.0f%% of zmq_bulk, %.0f%% of memcpy)\n", "copy from the other node", cg,
                100 * cg / zb, 100 * cg / mc);
    std::printf("  %-24s %8.1f us (no copy: the node's memory)\n", "get by a sibling slot", su);
    std::printf("  %-24s %8.1f ms\n", "put by the driver", dp);
    std::printf("  %-24s %8.2f GB/s (%.0f%% of zmq_bulk)\n", "node copies the driver's", fd,
                100 * fd / zb);
    std::printf("  %-24s %8.2f GB/s (%.0f%% of zmq_bulk)\n", "driver copies a node's", dg,
                100 * dg / zb);
    if (*json) {
      nlohmann::json out = {{"object_put_ms", pm},
                            {"object_copy_gbps", cg},
                            {"object_sibling_get_us", su},
                            {"object_driver_put_ms", dp},
                            {"object_copy_from_driver_gbps", fd},
                            {"object_driver_get_gbps", dg},
                            {"memcpy_gbps", mc},
                            {"zmq_bulk_gbps", zb}};
      if (!*insecure) out["zmq_bulk_curve_gbps"] = zc;
      std::cout << out.dump() << std::endl;
    }
  });
  return cmd;
}

}  // namespace spotlight::cli

// `spotlight bench`: runtime microbenchmarks under Ray's metric names, with the
// raw ZeroMQ ceiling on loopback, and the bare-TCP one under it, measured in
// the same run.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "common/process.h"
#include "spotlight/spotlight.h"
#include "tools/spotlight/bench_actors.h"
#include "tools/spotlight/commands.h"
#include "tools/spotlight/socket_ceiling.h"
#include "transport/socket.h"
#include "transport/spin.h"

namespace spotlight::cli {
namespace {

using Clock = std::chrono::steady_clock;
// Tasks an actor may hold leased ahead of running them: deep enough that the
// pipeline head -> node -> head never drains while calls are waiting.
constexpr int kPrefetch = 1024;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Waits for a message the way the runtime's threads do, so that with
// SPOTLIGHT_SPIN_US set the ceiling spins as the calls do; without it, a
// plain blocking receive (no extra poll per message).
void recv_as_runtime(zmq::socket_t& s, zmq::message_t& m) {
  if (transport::spin_budget().count() > 0) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    transport::poll(&item, 1, std::chrono::milliseconds(-1));
  }
  (void)s.recv(m);
}

// DEALER -> ROUTER request/reply over TCP loopback, one at a time; with a
// secure `key` under CURVE, as the cluster's sockets are.
double zmq_roundtrips(int n, const transport::ClusterKey& key = {}) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  transport::curve_server(router, key);
  router.bind("tcp://127.0.0.1:*");
  std::string ep = router.get(zmq::sockopt::last_endpoint);
  std::thread server([&] {
    for (int i = 0; i < n; ++i) {
      zmq::message_t id, body;
      recv_as_runtime(router, id);
      (void)router.recv(body);  // the rest of a multipart message is there with its first part
      router.send(id, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
  });
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  transport::curve_client(dealer, key);
  dealer.connect(ep);
  std::string payload(32, 'x');
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    dealer.send(zmq::buffer(payload));
    zmq::message_t reply;
    recv_as_runtime(dealer, reply);
  }
  double s = seconds_since(t0);
  server.join();
  return n / s;
}

// PUSH -> PULL of 100-byte messages over TCP loopback (CURVE with a secure `key`).
double zmq_oneway(int n, const transport::ClusterKey& key = {}) {
  zmq::context_t ctx(1);
  zmq::socket_t pull(ctx, zmq::socket_type::pull);
  transport::curve_server(pull, key);
  pull.bind("tcp://127.0.0.1:*");
  std::string ep = pull.get(zmq::sockopt::last_endpoint);
  zmq::socket_t push(ctx, zmq::socket_type::push);
  transport::curve_client(push, key);
  push.connect(ep);
  zmq::message_t first;
  push.send(zmq::buffer(std::string(100, 'x')));
  (void)pull.recv(first);  // connection is up before the clock starts
  std::thread sender([&] {
    std::string payload(100, 'x');
    for (int i = 0; i < n; ++i) push.send(zmq::buffer(payload));
  });
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    zmq::message_t m;
    (void)pull.recv(m);
  }
  double s = seconds_since(t0);
  sender.join();
  return n / s;
}

// Pipelined: keeps up to `window` calls in flight, like Ray's async benchmark.
double calls_async(ActorHandle<bench::Echo>& h, int n, int window = 10000) {
  return bench::echo_pipelined(h, n, window);
}

}  // namespace

void add_bench(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto sync_calls = std::make_shared<int>(20000);
  auto async_calls = std::make_shared<int>(200000);
  CLI::App* cmd = app.add_subcommand("bench", "Runtime microbenchmarks (Ray's metric names)");
  cmd->add_flag("--json", *json,
                "End with one JSON line of the five figures and the bare-TCP ceiling (tcp_roundtrips)");
  cmd->add_option("--sync-calls", *sync_calls, "Calls in the synchronous runs")->check(CLI::Range(100, 100000000));
  cmd->add_option("--async-calls", *async_calls, "Calls in the pipelined runs")->check(CLI::Range(100, 100000000));
  auto insecure = std::make_shared<bool>(false);
  cmd->add_flag("--insecure", *insecure,
                "Run the cluster without a cluster key (no CURVE), and skip the CURVE ceilings");
  // `spotlight bench sp`: SP re-formation against a restart. The DiT needs
  // LibTorch, which this binary does not link: run spotlight-sp-bench, built
  // beside it, with the remaining arguments.
  CLI::App* sp = cmd->add_subcommand("sp", "SP group re-formation after a kill, against a restart (DiT, Gloo)");
  sp->allow_extras();
  sp->prefix_command();
  sp->callback([sp] {
    std::vector<std::string> args{common::self_dir() + "/spotlight-sp-bench"};
    for (const auto& a : sp->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    throw CLI::RuntimeError("cannot run " + args[0] + " (built with the models; is it there?)", 1);
  });
  CLI::App* objects = add_bench_objects(*cmd);
  CLI::App* sp_groups = add_bench_sp_groups(*cmd);
  CLI::App* scale = add_bench_scale(*cmd);
  CLI::App* preempt = add_bench_preempt(*cmd);
  cmd->callback([=] {
    if (sp->parsed() || objects->parsed() || sp_groups->parsed() || scale->parsed() ||
        preempt->parsed()) {
      return;
    }
    nlohmann::json out;
    auto report = [&](const char* name, double v, const char* unit, double ceiling = 0) {
      out[name] = std::round(v);
      std::printf("%-34s %12.0f %s", name, v, unit);
      if (ceiling > 0) std::printf("   (%.1f%% of the ZeroMQ ceiling)", 100.0 * v / ceiling);
      std::printf("\n");
      std::fflush(stdout);
    };
    if (auto spin = transport::spin_budget(); spin.count() > 0) {
      std::printf("Latency mode: threads poll up to %lld us before they sleep (SPOTLIGHT_SPIN_US)\n",
                  static_cast<long long>(spin.count()));
    }
    std::printf("ZeroMQ ceiling on loopback (same machine, same run)\n");
    double rt = zmq_roundtrips(*sync_calls);
    report("zmq_roundtrips", rt, "round trips/s");
    double ow = zmq_oneway(*async_calls * 5);
    report("zmq_oneway", ow, "msgs/s (100 B)");
    // What the kernel alone allows: ZeroMQ's round trip adds its I/O threads' hand-offs to this.
    const double tcp = bench::tcp_roundtrips(*sync_calls);
    report("tcp_roundtrips", tcp, "round trips/s (bare TCP, no ZeroMQ)");
    if (!*insecure) {
      // The cluster runs CURVE (its cluster key): its own ceiling, for comparison.
      transport::ClusterKey key = transport::ClusterKey::generate();
      report("zmq_roundtrips_curve", zmq_roundtrips(*sync_calls, key), "round trips/s");
      report("zmq_oneway_curve", zmq_oneway(*async_calls * 5, key), "msgs/s (100 B)");
    }

    std::printf("Actor calls through a local cluster (head + 1 node, durable mailboxes, %s)\n",
                *insecure ? "no cluster key" : "CURVE with a cluster key");
    const int n = 2;  // callers and actors in the n:n run
    ClusterOptions co;
    co.insecure = *insecure;
    co.nodes = 1;
    co.slots = 2 * n + 1;  // the 1:1 echo, n echoes and n callers
    auto cluster = local_cluster(co);
    auto runtime = cluster.connect();
    auto echo = runtime.spawn<bench::Echo>("bench-echo", on_market("any").ahead(kPrefetch));
    echo.call(&bench::Echo::ping, 0).get();  // placed and warm
    const double sync = bench::echo_sync(echo, *sync_calls);
    report("1_1_actor_calls_sync", sync, "calls/s", rt);
    // A durable call crosses loopback four times (caller -> head -> node ->
    // head -> caller): two round trips, so half of either ceiling bounds it
    // before any work is done.
    std::printf("%-34s %12.0f calls/s at most with bare TCP (%.1f%% reached), %.0f with ZeroMQ\n",
                "  two round trips per call", tcp / 2, 100.0 * sync / (tcp / 2), rt / 2);
    report("1_1_actor_calls_async", calls_async(echo, *async_calls), "calls/s", ow);

    // n callers, each with its own connection, each calling its own actor.
    std::vector<Runtime> callers;
    std::vector<ActorHandle<bench::Echo>> actors;
    for (int i = 0; i < n; ++i) {
      callers.push_back(cluster.connect());
      actors.push_back(callers.back().spawn<bench::Echo>("bench-echo-" + std::to_string(i), on_market("any").ahead(kPrefetch)));
      actors.back().call(&bench::Echo::ping, 0).get();
    }
    std::vector<std::thread> threads;
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] { calls_async(actors[i], *async_calls / n); });
    }
    for (auto& t : threads) t.join();
    report("n_n_actor_calls_async", (*async_calls / n) * n / seconds_since(t0), "calls/s", ow);

    // The same from n caller actors (Ray's n:n shape: its callers are actors).
    // Their calls are the callers' tasks' own: the head keeps each one until
    // its caller's task is done, so that a second run would get it back.
    std::vector<Future<double>> runs;
    std::vector<ActorHandle<bench::Caller>> caller_actors;
    for (int i = 0; i < n; ++i) {
      caller_actors.push_back(runtime.spawn<bench::Caller>("bench-caller-" + std::to_string(i)));
      caller_actors.back()
          .call(&bench::Caller::run, actors[i].name(), 1, 1)
          .get();  // placed and connected
    }
    t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      runs.push_back(
          caller_actors[i].call(&bench::Caller::run, actors[i].name(), *async_calls / n, 10000));
    }
    for (auto& r : runs) r.get();
    report("n_n_actor_calls_async_from_actors", (*async_calls / n) * n / seconds_since(t0),
           "calls/s", ow);
    cluster.stop();
    if (*json) {
      nlohmann::json figures = {{"1_1_actor_calls_sync", out["1_1_actor_calls_sync"]},
                             {"1_1_actor_calls_async", out["1_1_actor_calls_async"]},
                             {"n_n_actor_calls_async", out["n_n_actor_calls_async"]},
                             {"zmq_roundtrips", out["zmq_roundtrips"]},
                             {"zmq_oneway", out["zmq_oneway"]},
                             {"tcp_roundtrips", out["tcp_roundtrips"]}};
      std::cout << figures.dump() << std::endl;
    }
  });
}

}  // namespace spotlight::cli

// The command line: status, stop, hello against a running cluster, and clear
// refusals of bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "support/cluster.h"
#include "support/command.h"
#include "support/temp_dir.h"

namespace spotlight {
namespace {

using testing::cluster_options;

using testing::CmdResult;
CmdResult run(const std::string& cmd) { return testing::run_command(cmd); }

const std::string kBin = SPOTLIGHT_TEST_BIN;

TEST(Cli, StatusHelloAndStop) {
  LocalCluster cluster(cluster_options(2, 3));  // hello places 5 actors
  // The key in the environment (drivers), or with --key (the CLI).
  CmdResult hello = run("SPOTLIGHT_CLUSTER_KEY=" + cluster.key() + " " + SPOTLIGHT_HELLO_BIN +
                        " --address " + cluster.address());
  EXPECT_EQ(hello.code, 0) << hello.out;
  EXPECT_NE(hello.out.find("all results right"), std::string::npos) << hello.out;
  const std::string key = " --key " + cluster.key();

  // Without the key: refused, and told why.
  CmdResult keyless = run(kBin + " status --address " + cluster.address());
  EXPECT_NE(keyless.code, 0);
  EXPECT_NE(keyless.out.find("refused the handshake"), std::string::npos) << keyless.out;

  CmdResult table = run(kBin + " status" + key + " --address " + cluster.address());
  EXPECT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("NODES"), std::string::npos);
  EXPECT_NE(table.out.find("squares"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("hello::Counter"), std::string::npos) << table.out;

  CmdResult js = run(kBin + " status --json" + key + " --address " + cluster.address());
  ASSERT_EQ(js.code, 0) << js.out;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["state"], "alive");
  bool found = false;
  for (const auto& p : j["pools"]) found |= p["name"] == "squares" && p["size"] == 3;
  EXPECT_TRUE(found) << js.out;

  // An id no client made: the head says it does not hold it.
  CmdResult cancel =
      run(kBin + " cancel 4398046511104001" + key + " --address " + cluster.address());
  EXPECT_EQ(cancel.code, 0) << cancel.out;
  EXPECT_NE(cancel.out.find("4398046511104001 not_held"), std::string::npos) << cancel.out;

  CmdResult stop = run(kBin + " stop" + key + " --address " + cluster.address());
  EXPECT_EQ(stop.code, 0) << stop.out;
  // The head is gone: status now fails with a clear message.
  CmdResult gone = run(kBin + " status --timeout-ms 300" + key + " --address " + cluster.address());
  EXPECT_NE(gone.code, 0);
  EXPECT_NE(gone.out.find("no answer"), std::string::npos) << gone.out;
}

TEST(Cli, BadArgumentsAreRefusedClearly) {
  struct Case {
    std::string args;
    std::string says;
  } cases[] = {
      {"", "subcommand"},
      {"join", "head"},
      {"join localhost", "HOST:PORT"},
      {"join 127.0.0.1:1 --market moon", "moon"},
      {"join 127.0.0.1:1 --slots 0", "slots"},
      {"join 127.0.0.1:1 --load /no/such/lib.so", "lib.so"},
      {"head --port 70000", "port"},
      {"head --sync sometimes", "sometimes"},
      {"head --compact-mib 0", "compact-mib"},
      {"head --port 0 --store /no/such/dir/head.db", "cannot open"},
      {"bench --sync-calls 1", "sync-calls"},
      {"join 127.0.0.1:1 --key 12ab", "64 hex digits"},
      {"status --key " + std::string(64, 'x'), "64 hex digits"},
      {"head --port 0 --key 0", "64 hex digits"},
      {"frobnicate", "frobnicate"},
      {"cancel", "ids"},
      {"head --port 0 --metrics-port 70000", "metrics-port"},
      {"head --port 0 --metrics-port 0 --metrics-host example.com", "metrics-host"},
      {"cancel 12x", "12x"},
      {"bench scale --actors -1", "actors"},
      {"bench scale --queued many", "queued"},
  };
  for (const auto& c : cases) {
    CmdResult r = run(kBin + " " + c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << " said: " << r.out;
  }
}

// `spotlight bench scale` at a small size: every phase runs, checks its
// results (a wrong echo or pass fails the command, and so does a queued call
// lost to the head's restart) and reports a figure.
TEST(Cli, BenchScaleRunsEveryPhase) {
  CmdResult r =
      run(kBin + " bench scale --actors 40 --pools 10 --queued 3000 --sync-calls 100 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("waited in the head's mailbox at once"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  for (const char* key : {"1_1_actor_calls_sync", "1_1_actor_calls_sync_beside_actors",
                          "actor_create_call_remove_per_second", "actors_spawned_per_second",
                          "actors_launched_per_second", "actors_removed_per_second",
                          "queued_calls_accepted_per_second", "queued_calls_run_per_second",
                          "queued_calls_head_peak_rss_mib", "queued_calls_head_restart_seconds",
                          "queued_calls_first_call_after_restart_seconds",
                          "queued_calls_sync_beside_p50_ms", "queued_calls_sync_beside_max_ms"}) {
    ASSERT_TRUE(j.contains(key)) << key << " missing: " << r.out;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  // Milliseconds, which a small run may round to 0.
  for (const char* key : {"queued_calls_head_longest_turn_ms", "queued_calls_head_longest_stall_ms"}) {
    ASSERT_TRUE(j.contains(key)) << key << " missing: " << r.out;
    EXPECT_GE(j[key].get<double>(), 0) << key;
  }
}

// `spotlight bench` at a small size: the five figures the issue names, in
// Ray's names, and the bare-TCP ceiling under ZeroMQ's, which bounds a
// synchronous call (two round trips) on this machine.
TEST(Cli, BenchReportsItsFiguresAndTheCeilingsUnderThem) {
  CmdResult r = run(kBin + " bench --sync-calls 200 --async-calls 2000 --insecure --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("two round trips per call"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  for (const char* key : {"1_1_actor_calls_sync", "1_1_actor_calls_async", "n_n_actor_calls_async",
                          "zmq_roundtrips", "zmq_oneway", "tcp_roundtrips"}) {
    ASSERT_TRUE(j.contains(key)) << key << " missing: " << r.out;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
}

// The head makes a cluster key on first start, keeps it beside its store
// (its owner's only), prints it with the join command, and finds it again
// when it restarts on the same store.
TEST(Cli, HeadMakesKeepsAndPrintsItsKey) {
  testing::TempDir temp("cli");
  const std::string dir = temp.path();
  auto start_head = [&](const std::vector<std::string>& extra = {}) {
    std::filesystem::remove(dir + "/port");
    std::vector<std::string> argv{kBin,          "head",       "--port",  "0",
                                  "--bind",      "127.0.0.1",  "--store", dir + "/head.db",
                                  "--port-file", dir + "/port"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::filesystem::remove(dir + "/head.log");
    pid_t head = common::spawn(argv, dir + "/head.log", {"SPOTLIGHT_CLUSTER_KEY="});
    std::string port = common::wait_for_file(dir + "/port", std::chrono::seconds(10));
    EXPECT_FALSE(port.empty());
    return std::make_pair(head, "127.0.0.1:" + port);
  };
  auto stop = [&](pid_t head, const std::string& address, const std::string& key) {
    ConnectOptions o;
    o.cluster_key = key;
    connect(address, o).stop_cluster();
    EXPECT_EQ(common::wait_exit(head, std::chrono::seconds(10)), 0);
    return run("cat " + dir + "/head.log").out;
  };

  auto [head, address] = start_head();
  std::string key = run("cat " + dir + "/head.db.key").out;
  ASSERT_EQ(key.size(), 65u) << key;  // 64 hex digits and a newline
  key.pop_back();
  EXPECT_EQ(
      std::filesystem::status(dir + "/head.db.key").permissions() & std::filesystem::perms::all,
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::string printed = stop(head, address, key);
  EXPECT_NE(printed.find("SPOTLIGHT_CLUSTER_KEY=" + key + " spotlight join " + address),
            std::string::npos)
      << printed;

  // Restarted on the same store: the same key.
  std::tie(head, address) = start_head();
  printed = stop(head, address, key);
  EXPECT_NE(printed.find("SPOTLIGHT_CLUSTER_KEY=" + key + " spotlight join"), std::string::npos)
      << printed;

  // --insecure: no key at all, and a warning that says what that means.
  std::tie(head, address) = start_head({"--insecure"});
  printed = stop(head, address, "none");
  EXPECT_NE(printed.find("spotlight join " + address), std::string::npos) << printed;
  EXPECT_EQ(printed.find("SPOTLIGHT_CLUSTER_KEY="), std::string::npos) << printed;
  EXPECT_NE(printed.find("anyone who reaches port"), std::string::npos) << printed;

  // A damaged key file stops the head with a clear error rather than a new key.
  std::ofstream(dir + "/head.db.key") << "not a key\n";
  CmdResult damaged = run(kBin + " head --port 0 --bind 127.0.0.1 --store " + dir + "/head.db");
  EXPECT_NE(damaged.code, 0);
  EXPECT_NE(damaged.out.find("is damaged"), std::string::npos) << damaged.out;
}

}  // namespace
}  // namespace spotlight

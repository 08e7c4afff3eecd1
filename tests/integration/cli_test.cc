// The command line: status, stop, hello against a running cluster, and clear
// refusals of bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "support/cluster.h"
#include "support/command.h"

#include <filesystem>

namespace spotlight {
namespace {

using testing::cluster_options;

using testing::CmdResult;
CmdResult run(const std::string& cmd) { return testing::run_command(cmd); }

const std::string kBin = SPOTLIGHT_TEST_BIN;

TEST(Cli, StatusHelloAndStop) {
  LocalCluster cluster(cluster_options(2, 3));  // hello places 5 actors
  CmdResult hello = run(std::string(SPOTLIGHT_HELLO_BIN) + " --address " + cluster.address());
  EXPECT_EQ(hello.code, 0) << hello.out;
  EXPECT_NE(hello.out.find("all results right"), std::string::npos) << hello.out;

  CmdResult table = run(kBin + " status --address " + cluster.address());
  EXPECT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("NODES"), std::string::npos);
  EXPECT_NE(table.out.find("squares"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("hello::Counter"), std::string::npos) << table.out;

  CmdResult js = run(kBin + " status --json --address " + cluster.address());
  ASSERT_EQ(js.code, 0) << js.out;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["state"], "alive");
  bool found = false;
  for (const auto& p : j["pools"]) found |= p["name"] == "squares" && p["size"] == 3;
  EXPECT_TRUE(found) << js.out;

  CmdResult stop = run(kBin + " stop --address " + cluster.address());
  EXPECT_EQ(stop.code, 0) << stop.out;
  // The head is gone: status now fails with a clear message.
  CmdResult gone = run(kBin + " status --timeout-ms 300 --address " + cluster.address());
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
      {"frobnicate", "frobnicate"},
  };
  for (const auto& c : cases) {
    CmdResult r = run(kBin + " " + c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << " said: " << r.out;
  }
}

TEST(Cli, HeadPrintsTheJoinCommand) {
  char tmpl[] = "/tmp/spotlight-cli-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string log = dir + "/head.log";
  pid_t head = common::spawn({kBin, "head", "--port", "0", "--bind", "127.0.0.1", "--store",
                              dir + "/head.db", "--port-file", dir + "/port"},
                             log);
  std::string port = common::wait_for_file(dir + "/port", std::chrono::seconds(10));
  ASSERT_FALSE(port.empty());
  stop_cluster("127.0.0.1:" + port);
  EXPECT_EQ(common::wait_exit(head, std::chrono::seconds(10)), 0);
  CmdResult out = run("cat " + log);
  EXPECT_NE(out.out.find("spotlight join 127.0.0.1:" + port), std::string::npos) << out.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spotlight

// `spotlight replay` on a compressed slice of the real p3 trace: with notice
// nothing is lost, delivered twice or recomputed; without notice nothing is
// lost or delivered twice and at most one step per preemption is recomputed.
// (The speed targets are measured by the benchmark, not asserted here.)
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/command.h"

namespace {

nlohmann::json replay(const std::string& args) {
  std::string cmd = std::string(SPOTLIGHT_TEST_BIN) + " replay " + SPOTLIGHT_TRACES_DIR +
                    "/p3-trace.csv --json " + args;
  auto [code, out] = spotlight::testing::run_command(cmd);
  EXPECT_EQ(code, 0) << out;
  std::string last = out.substr(out.rfind('{'));
  std::printf("%s", out.c_str());
  return nlohmann::json::parse(last);
}

TEST(Replay, SliceWithNoticeLosesAndRecomputesNothing) {
  auto j = replay("--to-min 40 --compress 120 --notice 120");
  EXPECT_GT(j["preemptions"].get<int>(), 0);
  EXPECT_GT(j["accepted"].get<int>(), 0);
  EXPECT_EQ(j["lost"], 0);
  EXPECT_EQ(j["completed"], j["accepted"]);
  EXPECT_EQ(j["delivered_twice"], 0);
  EXPECT_EQ(j["steps_recomputed"], 0);
}

TEST(Replay, SliceWithoutNoticeLosesNothing) {
  auto j = replay("--to-min 40 --compress 120 --notice 0");
  int preemptions = j["preemptions"].get<int>();
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(j["lost"], 0);
  EXPECT_EQ(j["delivered_twice"], 0);
  EXPECT_LE(j["steps_recomputed"].get<int>(), preemptions);
  EXPECT_GT(j["detect_ms_p50"].get<double>(), 0) << "kills are detected and measured";
}

}  // namespace

// The head's metrics text: every line a scraper reads is well formed, label
// values are escaped, and the hand-over between threads answers each request
// with a rendering made after it.
#include "head/metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <thread>

namespace spotlight::head {
namespace {

ClusterStatus sample_status() {
  ClusterStatus s;
  s.boot = 3;
  s.tasks_live = 12;
  NodeStatus alive;
  alive.id = "n1";
  alive.market = "spot";
  alive.state = "alive";
  alive.slots = 4;
  alive.used = 2;
  alive.running = 5;
  alive.last_heartbeat_ms = 250;
  NodeStatus draining = alive;
  draining.id = "n2";
  draining.notice_ms_ago = 1000;
  NodeStatus dead = alive;
  dead.id = "n3";
  dead.state = "dead";
  s.nodes = {alive, draining, dead};
  PoolStatus p;
  p.name = "odd \"pool\"\\\nname";
  p.type = "Explorer";
  p.market = "spot";
  p.size = 4;
  p.placed = 3;
  p.queued = 7;
  p.leased = 2;
  p.by_priority = {{5, 3}, {0, 4}};
  s.pools = {p};
  s.groups = {SpGroupStatus{p.name, "g", 1, {1, 2}, 0}};
  s.counters = {{"calls", 40}, {"error_malformed", 2}, {"odd-name", 1}};
  return s;
}

TEST(Metrics, EveryLineIsWellFormedAndLabelsAreEscaped) {
  const std::string text = prometheus_text(sample_status());
  // A sample: name, optional {label="value",...} with escaped values, a number.
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? -?[0-9.e+]+$)");
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream in(text);
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind('#', 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
    } else {
      EXPECT_TRUE(std::regex_match(line, sample)) << line;
      ++samples;
    }
  }
  EXPECT_GT(samples, 20);
  const std::string pool = R"(pool="odd \"pool\"\\\nname")";
  EXPECT_NE(text.find("spotlight_pool_queued{" + pool + "} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("spotlight_pool_queued_by_priority{" + pool + ",priority=\"5\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("spotlight_pool_leased{" + pool + "} 2\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_sp_groups{" + pool + "} 1\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_nodes{state=\"alive\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_nodes{state=\"draining\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_nodes{state=\"dead\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_node_tasks_leased{node=\"n1\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_node_heartbeat_age_seconds{node=\"n1\"} 0.25\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE spotlight_calls_total counter\nspotlight_calls_total 40\n"),
            std::string::npos);
  EXPECT_NE(text.find("spotlight_odd_name_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_tasks_live 12\n"), std::string::npos);
}

TEST(Metrics, AnUnservedRequestTimesOutAndAServedOneGetsAFreshRendering) {
  MetricsExchange x;
  EXPECT_FALSE(x.request(std::chrono::milliseconds(20)).has_value());
  int renders = 0;
  x.serve([&] { return std::to_string(++renders); });
  EXPECT_EQ(renders, 1) << "the timed-out request was still due";
  x.serve([&] { return std::to_string(++renders); });
  EXPECT_EQ(renders, 1) << "nobody waits: nothing rendered";

  std::optional<std::string> got;
  std::thread asker([&] { got = x.request(std::chrono::seconds(20)); });
  // The loop turns until the request has been answered, as the head's does.
  while (true) {
    x.serve([&] { return std::to_string(++renders); });
    if (renders == 2) break;
    std::this_thread::yield();
  }
  asker.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "2");
}

}  // namespace
}  // namespace spotlight::head

// The head's metrics text: every line a scraper reads is well formed, label
// values are escaped, and the hand-over between threads answers each request
// with a rendering made after it.
#include "head/metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <thread>

#include "head/latency.h"

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
  LatencyHistogram h;
  for (int i = 0; i < 3; ++i) h.observe(std::chrono::microseconds(2));
  h.observe(std::chrono::milliseconds(40));
  p.answered = h.status();
  PoolStatus idle;  // served nothing: no histogram lines
  idle.name = "idle";
  s.pools = {p, idle};
  s.groups = {SpGroupStatus{p.name, "g", 1, {1, 2}, 0}};
  s.counters = {{"calls", 40}, {"error_malformed", 2}, {"odd-name", 1}};
  return s;
}

TEST(Metrics, EveryLineIsWellFormedAndLabelsAreEscaped) {
  const std::string text = prometheus_text(sample_status());
  // A sample: name, optional {label="value",...} with escaped values, a number.
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? -?[0-9.]+(e[-+]?[0-9]+)?$)");
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
  // A histogram: cumulative buckets up to +Inf, then its sum and count.
  EXPECT_NE(text.find("# TYPE spotlight_pool_call_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_pool_call_seconds_bucket{" + pool + ",le=\"0.0001\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spotlight_pool_call_seconds_bucket{" + pool + ",le=\"0.025\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("spotlight_pool_call_seconds_bucket{" + pool + ",le=\"0.05\"} 4\n"),
            std::string::npos);
  EXPECT_NE(text.find("spotlight_pool_call_seconds_bucket{" + pool + ",le=\"+Inf\"} 4\n"),
            std::string::npos);
  EXPECT_NE(text.find("spotlight_pool_call_seconds_count{" + pool + "} 4\n"), std::string::npos);
  EXPECT_NE(text.find("spotlight_pool_call_seconds_sum{" + pool + "} 0.040006\n"),
            std::string::npos);
  EXPECT_EQ(text.find("pool=\"idle\",le="), std::string::npos)
      << "no lines for a pool that served nothing";
  EXPECT_EQ(text.find("spotlight_pool_call_run_seconds_bucket"), std::string::npos)
      << "nor for a histogram with no samples";
}

// Buckets hold what is at most their bound; the quantiles read them back
// to within a bucket.
TEST(Latency, BucketsAreUpperBoundsAndQuantilesStayWithinTheirBucket) {
  LatencyHistogram h;
  EXPECT_EQ(h.status().count, 0u);
  EXPECT_TRUE(h.status().buckets.empty());
  EXPECT_EQ(h.status().quantile(0.5), 0);
  h.observe(std::chrono::nanoseconds(0));
  h.observe(std::chrono::microseconds(100));     // exactly the first bound
  h.observe(std::chrono::nanoseconds(100'001));  // just past it
  h.observe(std::chrono::hours(2));              // past every bound
  h.observe(-std::chrono::milliseconds(5));      // a clock step back counts as 0
  Latency l = h.status();
  ASSERT_EQ(l.buckets.size(), kLatencyBoundsS.size() + 1);
  EXPECT_EQ(l.buckets[0], 3u);
  EXPECT_EQ(l.buckets[1], 1u);
  EXPECT_EQ(l.buckets.back(), 1u);
  EXPECT_EQ(l.count, 5u);
  EXPECT_NEAR(l.sum_s, 7200.000200001, 1e-6);
  EXPECT_EQ(l.quantile(1.0), kLatencyBoundsS.back()) << "beyond the last bound reads as that bound";

  LatencyHistogram g;
  for (int i = 0; i < 90; ++i) g.observe(std::chrono::milliseconds(3));    // (2.5 ms, 5 ms]
  for (int i = 0; i < 10; ++i) g.observe(std::chrono::milliseconds(700));  // (0.5 s, 1 s]
  const Latency m = g.status();
  EXPECT_GE(m.quantile(0.5), 0.0025);
  EXPECT_LE(m.quantile(0.5), 0.005);
  EXPECT_GE(m.quantile(0.99), 0.5);
  EXPECT_LE(m.quantile(0.99), 1.0);
  EXPECT_LE(m.quantile(0.5), m.quantile(0.9));
  EXPECT_LE(m.quantile(0.9), m.quantile(0.99));
  EXPECT_EQ(m.quantile(0), 0.0025) << "the lowest sample's bucket, from its lower bound";
  EXPECT_EQ(p50_p99(m), "3.9 ms / 950.0 ms");
  EXPECT_EQ(p50_p99(Latency{}), "-");
  EXPECT_EQ(human_seconds(0.00005), "50 us");
  EXPECT_EQ(human_seconds(2.5), "2.50 s");
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

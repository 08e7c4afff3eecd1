// The head's status page and status JSON, from a status made up here: what
// users named is escaped, long actor lists are cut with a note, and every
// part of the status is shown.
#include "head/dashboard.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace spotlight::head {
namespace {

ClusterStatus sample_status(size_t actors) {
  ClusterStatus s;
  s.boot = 3;
  s.store = "/var/lib/spotlight/head.db";
  s.tasks_live = 42;
  NodeStatus alive{"node-a", "host-a", "spot", "alive", 8, 6};
  NodeStatus draining{"node-b", "host-b", "spot", "draining", 4, 1};
  NodeStatus dead{"node-c", "host-c", "reserved", "dead", 4, 0};
  s.nodes = {alive, draining, dead};
  PoolStatus p{"<script>alert(1)</script>", "Explorer", "spot", 4, 3, 1234, 5,
               {{1, 34}, {0, 1200}}};
  p.waiting_for = "1 member(s) wait: none of 3 node(s) fits (1 without <Explorer> loaded)";
  p.aging_ms = 2000;
  p.placement = "pack, near pool <rollouts>";
  p.answered = Latency{{0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0.07, 10};
  s.pools = {p};
  for (size_t i = 1; i <= actors; ++i)
    s.actors.push_back(ActorStatus{i, p.name, "node-a", "ready", 1, 0, i});
  s.groups = {SpGroupStatus{p.name, p.name + "/sp1", 77, {1, 2}, 0}};
  s.counters = {{"calls", 99}, {"bad_frames_not_msgpack", 2}};
  return s;
}

TEST(Dashboard, EscapesWhatUsersNamed) {
  EXPECT_EQ(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  const std::string page = dashboard_html(sample_status(3));
  EXPECT_EQ(page.find("<script>"), std::string::npos) << "a pool's name must not become markup";
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

TEST(Dashboard, ShowsEveryPartOfTheStatus) {
  const std::string page = dashboard_html(sample_status(3));
  for (const char* want :
       {"<td>node-a</td>", "<td>node-b</td>", "<td>node-c</td>", "<b>1</b>nodes alive",
        "<b>1</b>draining", "<b>1</b>dead", "<b>1,234</b>calls waiting", "<b>42</b>calls held",
        "7 / 12", "3 / 4", "1: 34  0: 1,200", "sp1</td>", "bad_frames_not_msgpack",
        "<td class=\"n\">99</td>", "http-equiv=\"refresh\"", "<td>7.5 ms / ",
        "1 member(s) wait: none of 3 node(s) fits (1 without &lt;Explorer&gt; loaded)",
        "is placed: pack, near pool &lt;rollouts&gt;"}) {
    EXPECT_NE(page.find(want), std::string::npos) << want;
  }
  EXPECT_EQ(page.find("The first"), std::string::npos) << "three actors are all listed";
}

TEST(Dashboard, ListsAtMostSoManyActors) {
  const size_t n = kDashboardActors + 50;
  const std::string page = dashboard_html(sample_status(n));
  EXPECT_NE(page.find("The first 200 of 250 actors"), std::string::npos);
  size_t rows = 0;
  for (size_t at = page.find("<td>ready</td>"); at != std::string::npos;
       at = page.find("<td>ready</td>", at + 1))
    ++rows;
  EXPECT_EQ(rows, kDashboardActors);
}

TEST(StatusJson, CarriesTheStatusAndSurvivesBadBytesInNames) {
  ClusterStatus s = sample_status(2);
  s.pools[0].name = std::string("bad\xff\xfe name");
  auto j = nlohmann::json::parse(status_json(s));
  EXPECT_EQ(j["boot"], 3);
  EXPECT_EQ(j["nodes"].size(), 3u);
  EXPECT_EQ(j["nodes"][1]["state"], "draining");
  EXPECT_EQ(j["pools"][0]["queued"], 1234);
  EXPECT_EQ(j["pools"][0]["queued_by_priority"][0][1], 34);
  EXPECT_EQ(j["pools"][0]["aging_ms"], 2000);
  EXPECT_EQ(j["pools"][0]["placement"], "pack, near pool <rollouts>");
  EXPECT_NE(j["pools"][0]["waiting_for"].get<std::string>().find("none of 3 node(s) fits"),
            std::string::npos);
  EXPECT_EQ(j["actors"].size(), 2u);
  EXPECT_EQ(j["groups"][0]["epoch"], 77);
  EXPECT_EQ(j["counters"]["calls"], 99);
  EXPECT_NE(j["pools"][0]["name"].get<std::string>().find(" name"), std::string::npos);
  // Empty lists are lists, not null.
  auto empty = nlohmann::json::parse(status_json(ClusterStatus{}));
  EXPECT_TRUE(empty["nodes"].is_array());
  EXPECT_TRUE(empty["actors"].is_array());
}

}  // namespace
}  // namespace spotlight::head

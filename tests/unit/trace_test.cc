// Trace parsing: the real traces of ../shared/traces, the GCP count format,
// slices, and clear errors for malformed lines.
#include <gtest/gtest.h>

#include <set>

#include "tools/replay/trace.h"

namespace spotlight::replay {
namespace {

const std::string kTraces = SPOTLIGHT_TRACES_DIR;

int count(const std::vector<TraceEvent>& ev, bool add) {
  int n = 0;
  for (const auto& e : ev) n += e.add == add;
  return n;
}

TEST(Trace, ReadsTheRealEventTraces) {
  auto p3 = read_trace(kTraces + "/p3-trace.csv");  // CRLF line endings
  EXPECT_EQ(p3.size(), 344u);
  EXPECT_EQ(count(p3, true), 177);
  EXPECT_EQ(count(p3, false), 167);
  EXPECT_EQ(max_live(p3), 32);
  EXPECT_EQ(p3.front().node, "node1");
  EXPECT_EQ(p3.back().t_ms, 40920000);
  auto g4dn = read_trace(kTraces + "/g4dn-trace.csv");
  EXPECT_EQ(g4dn.size(), 153u);
  EXPECT_EQ(max_live(g4dn), 24);
  EXPECT_EQ(g4dn.front().t_ms, 480000);
}

TEST(Trace, CountFormatBecomesEventsWithSeededVictims) {
  std::string gcp =
      "2021-12-11, 11:11:30, 3\n"
      "2021-12-11, 11:12:30, 5\n"
      "2021-12-11, 11:14:00, 2\n"
      "2021-12-12, 00:00:00, 4\n";
  auto ev = parse_trace(gcp, 7);
  EXPECT_EQ(count(ev, true), 3 + 2 + 2);
  EXPECT_EQ(count(ev, false), 3);
  EXPECT_EQ(ev[3].t_ms, 60000);
  EXPECT_EQ(ev[5].t_ms, 150000);
  EXPECT_EQ(ev.back().t_ms, (12 * 3600 + 48 * 60 + 30) * 1000);
  EXPECT_EQ(max_live(ev), 5);
  // The same seed picks the same victims; every removed node was live.
  auto again = parse_trace(gcp, 7);
  std::set<std::string> live;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].node, again[i].node);
    if (ev[i].add) {
      EXPECT_TRUE(live.insert(ev[i].node).second);
    } else {
      EXPECT_EQ(live.erase(ev[i].node), 1u);
    }
  }
}

TEST(Trace, SliceStartsWithTheLiveNodes) {
  auto p3 = read_trace(kTraces + "/p3-trace.csv");
  auto s = slice(p3, 60 * 60000, 120 * 60000);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front().t_ms, 0);
  EXPECT_LT(s.back().t_ms, 60 * 60000);
  std::set<std::string> live;
  for (const auto& e : s) {
    if (e.add) {
      EXPECT_TRUE(live.insert(e.node).second) << e.node;
    } else {
      EXPECT_EQ(live.erase(e.node), 1u) << e.node << " removed but never added in the slice";
    }
  }
}

TEST(Trace, MalformedLinesAreNamed) {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_trace(text);
    } catch (const TraceError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(error_of("0,add,n1\n60000,explode,n1\n").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("0,add,n1\n60000,remove,n2\n").find("n2 removed while not live"), std::string::npos);
  EXPECT_NE(error_of("60000,add,n1\n0,add,n2\n").find("backwards"), std::string::npos);
  EXPECT_NE(error_of("0,add,n1\n0,add,n1\n").find("added twice"), std::string::npos);
  EXPECT_NE(error_of("2021-12-11, 11:11:30, lots\n").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("").find("no events"), std::string::npos);
  EXPECT_THROW(read_trace("/no/such/trace.csv"), TraceError);
}

}  // namespace
}  // namespace spotlight::replay

// The latency mode (SPOTLIGHT_SPIN_US): what it accepts, that calls stay
// right while every runtime thread spins before it sleeps, and that a bad
// value is reported and leaves the process serving.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/process.h"
#include "hello_actors.h"
#include "support/cluster.h"
#include "transport/spin.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;

TEST(Spin, AcceptsWholeMicrosecondsInRangeOnly) {
  EXPECT_EQ(transport::parse_spin_us("0"), 0us);
  EXPECT_EQ(transport::parse_spin_us("200"), 200us);
  EXPECT_EQ(transport::parse_spin_us("100000"), 100000us);
  for (const char* bad : {"", "-1", "abc", "12x", " 5", "1.5", "100001", "99999999999999999999"}) {
    EXPECT_FALSE(transport::parse_spin_us(bad).has_value()) << "'" << bad << "'";
  }
}

// The head, the nodes and this caller all spin (the children inherit the
// variable); a caller's synchronous calls to one actor still run once each,
// in order.
TEST(Spin, SynchronousCallsStayRightWhileEveryThreadSpins) {
  ASSERT_EQ(setenv("SPOTLIGHT_SPIN_US", "200", 1), 0);
  {
    LocalCluster cluster(testing::cluster_options(1, 2));
    auto rt = cluster.connect();
    auto counter = rt.spawn<hello::Counter>("spin-counter");
    int64_t sum = 0;
    for (int i = 1; i <= 300; ++i) {
      sum += i;
      ASSERT_EQ(counter.call(&hello::Counter::add, int64_t{i}).get(), sum);
    }
    hello::Tally t = counter.call(&hello::Counter::get).get();
    EXPECT_EQ(t.calls, 300);
    EXPECT_EQ(t.value, sum);
  }
  unsetenv("SPOTLIGHT_SPIN_US");
}

TEST(Spin, ABadValueIsReportedAndTheHeadKeepsServing) {
  char tmpl[] = "/tmp/spotlight-spin-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ASSERT_EQ(setenv("SPOTLIGHT_SPIN_US", "fast", 1), 0);
  pid_t head = common::spawn({SPOTLIGHT_TEST_BIN, "head", "--port", "0", "--bind", "127.0.0.1",
                              "--store", dir + "/head.db", "--port-file", dir + "/port"},
                             dir + "/head.log", testing::key_env());
  unsetenv("SPOTLIGHT_SPIN_US");
  std::string port = common::wait_for_file(dir + "/port", std::chrono::seconds(10));
  ASSERT_FALSE(port.empty());
  std::string address = "127.0.0.1:" + port;
  // It answers status (so its loop runs, and has read the value), then stops cleanly.
  ClusterStatus s = cluster_status(address, std::chrono::seconds(5));
  EXPECT_TRUE(s.nodes.empty());
  stop_cluster(address);
  EXPECT_EQ(common::wait_exit(head, std::chrono::seconds(10)), 0);
  std::stringstream log;
  log << std::ifstream(dir + "/head.log").rdbuf();
  EXPECT_NE(log.str().find("SPOTLIGHT_SPIN_US='fast' is not a whole number"), std::string::npos) << log.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spotlight

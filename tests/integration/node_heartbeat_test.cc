// A node's heartbeat keeps its period whatever else the head sends it. The
// head declares a node dead after its liveness (850 ms by default, against a
// 250 ms beat): a node that let each frame from the head push its next beat
// back by a whole period beat every 2 periods at worst, and a little load on
// top was enough to cross the liveness.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "common/process.h"
#include "support/cluster.h"
#include "support/fake_head.h"
#include "support/temp_dir.h"
#include "wire/envelope.h"

namespace spotlight {
namespace {

using Clock = std::chrono::steady_clock;

TEST(NodeHeartbeat, KeepsItsPeriodWhenTheHeadTalksJustBeforeEachBeat) {
  constexpr auto kPeriod = std::chrono::milliseconds(1000);
  testing::FakeHead head;
  testing::TempDir logs("node-heartbeat");
  pid_t node = common::spawn({SPOTLIGHT_TEST_BIN, "join", head.address(), "--market", "spot",
                              "--slots", "1", "--heartbeat-ms", std::to_string(kPeriod.count())},
                             logs.path() + "/node.log", testing::key_env());
  ASSERT_FALSE(head.wait_for_hello().empty());
  head.send(
      wire::encode(wire::Welcome{1, 0, static_cast<int32_t>(kPeriod.count()), 60000, 1 << 20, {}}));

  // After each beat, the head speaks 950 ms later: just before the next beat
  // is due, the worst moment for a node that restarts its wait on every frame.
  // A period this long leaves a loaded machine half a second of slack.
  std::vector<Clock::time_point> beats;
  std::optional<Clock::time_point> speak_at;
  const auto end = Clock::now() + std::chrono::seconds(7);
  while (Clock::now() < end) {
    auto wait = std::chrono::milliseconds(20);
    if (speak_at) {
      wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(*speak_at - Clock::now()),
                        std::chrono::milliseconds(0), wait);
    }
    if (auto m = head.recv(wait); m && wire::decode(m->second).type == wire::MsgType::kHeartbeat) {
      beats.push_back(Clock::now());
      speak_at = beats.back() + std::chrono::milliseconds(950);
    }
    if (speak_at && Clock::now() >= *speak_at) {
      head.send(wire::encode(wire::Heartbeat{1, 0}));
      speak_at.reset();
    }
  }
  ASSERT_GE(beats.size(), 4u) << "the node hardly beat at all";
  Clock::duration widest{0};
  for (size_t i = 1; i < beats.size(); ++i) widest = std::max(widest, beats[i] - beats[i - 1]);
  // 1.5 periods: room for a loaded machine's scheduling, well under the
  // 1.95 periods a node that waits a whole period after each frame shows.
  EXPECT_LT(widest, kPeriod * 3 / 2)
      << "widest gap between beats: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(widest).count() << " ms over "
      << beats.size() << " beats";
  head.send(wire::encode_empty(wire::MsgType::kShutdown));
  EXPECT_EQ(common::wait_exit(node, std::chrono::seconds(10)), 0);
}

}  // namespace
}  // namespace spotlight

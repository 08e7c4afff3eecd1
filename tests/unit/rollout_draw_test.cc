// spotlight-train's draw of an iteration's prompts and seeds
// (tools/train/rollout_draw.h): without twins, each group its own prompt and
// seeds in the order the trainer always drew them; with --shape-twins, every
// odd group the shape twin of the group before, on the same seeds.
#include "tools/train/rollout_draw.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace spotlight::tools {
namespace {

struct Sources {
  scene::PromptGenerator gen{3};
  uint64_t next = 100;
  int prompt_calls = 0, seed_calls = 0;
  RolloutDraw draw(int prompts, int rolled, bool twins) {
    return draw_rollouts(
        prompts, rolled, twins,
        [&] {
          ++prompt_calls;
          return gen.next();
        },
        [&] {
          ++seed_calls;
          return next++;
        });
  }
};

TEST(RolloutDraw, WithoutTwinsEachGroupDrawsItsPromptThenItsSeeds) {
  Sources s;
  const auto d = s.draw(3, 4, false);
  scene::PromptGenerator again(3);
  ASSERT_EQ(d.prompts.size(), 12u);
  ASSERT_EQ(d.seeds.size(), 12u);
  for (int p = 0; p < 3; ++p) {
    const auto want = again.next();
    for (int g = 0; g < 4; ++g) {
      EXPECT_EQ(d.prompts[p * 4 + g], want);
      EXPECT_EQ(d.seeds[p * 4 + g], uint64_t(100 + p * 4 + g));
    }
  }
  EXPECT_EQ(s.prompt_calls, 3);
  EXPECT_EQ(s.seed_calls, 12);
}

TEST(RolloutDraw, TwinsFollowTheirOriginalsOnTheSameSeeds) {
  Sources s;
  const auto d = s.draw(6, 4, true);
  ASSERT_EQ(d.prompts.size(), 24u);
  scene::PromptGenerator again(3);
  uint64_t seed = 100;
  for (int pair = 0; pair < 3; ++pair) {
    const auto original = again.next();
    for (int g = 0; g < 4; ++g) {
      const size_t o = size_t(pair * 8 + g), t = o + 4;
      EXPECT_EQ(d.prompts[o], original);
      EXPECT_EQ(d.prompts[t], scene::shape_twin(original));
      EXPECT_NE(d.prompts[t].text, original.text);
      EXPECT_EQ(d.seeds[o], seed++);
      EXPECT_EQ(d.seeds[t], d.seeds[o]);
    }
  }
  // The twins draw nothing: half the prompts, half the seeds.
  EXPECT_EQ(s.prompt_calls, 3);
  EXPECT_EQ(s.seed_calls, 12);
}

TEST(RolloutDraw, TwinsNeedAnEvenNumberOfPrompts) {
  Sources s;
  EXPECT_THROW(s.draw(3, 4, true), std::invalid_argument);
  EXPECT_THROW(s.draw(0, 4, false), std::invalid_argument);
  EXPECT_THROW(s.draw(2, 0, false), std::invalid_argument);
  EXPECT_NO_THROW(s.draw(2, 1, true));
}

}  // namespace
}  // namespace spotlight::tools

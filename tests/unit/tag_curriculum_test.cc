// spotlight-train --tag-focus: the tags of the training prompts follow the
// running reward of each tag (tools/train/tag_curriculum.h).
#include "tools/train/tag_curriculum.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace spotlight::tools {
namespace {

using scene::Tag;
constexpr int kDraws = 60000;

std::array<int, scene::kNumTags> count_draws(TagCurriculum& c) {
  std::array<int, scene::kNumTags> n{};
  for (int k = 0; k < kDraws; ++k)
    for (size_t i = 0; i < scene::kTags.size(); ++i)
      if (c.next() == scene::kTags[i]) ++n[i];
  return n;
}

// Within 5 binomial standard deviations of p * kDraws.
void expect_share(int count, double p) {
  const double sd = std::sqrt(kDraws * p * (1 - p));
  EXPECT_NEAR(count, p * kDraws, 5 * sd + 1) << "p = " << p;
}

TEST(TagCurriculum, WithoutFocusTheTagsAreDrawnUniformlyWhateverTheRewards) {
  TagCurriculum c(0.0, 0.9, 7);
  c.observe({Tag::single_object, Tag::position}, {1.0, 0.0});
  for (double p : c.probabilities()) EXPECT_DOUBLE_EQ(p, 1.0 / 6);
  for (int n : count_draws(c)) expect_share(n, 1.0 / 6);
}

TEST(TagCurriculum, UnseenTagsCountAsUnlearntAndFullFocusFollowsTheDeficits) {
  TagCurriculum c(1.0, 0.9, 11);
  // Before any reward every tag has the same deficit.
  for (double p : c.probabilities()) EXPECT_DOUBLE_EQ(p, 1.0 / 6);
  // single_object learnt (deficit floored), position at 0.5, the rest unseen (deficit 1).
  c.observe({Tag::single_object, Tag::single_object, Tag::position}, {1.0, 1.0, 0.5});
  const double total = TagCurriculum::kMinDeficit + 0.5 + 4 * 1.0;
  const auto p = c.probabilities();
  EXPECT_NEAR(p[0], TagCurriculum::kMinDeficit / total, 1e-12);  // single_object
  EXPECT_NEAR(p[4], 0.5 / total, 1e-12);                         // position
  EXPECT_NEAR(p[1], 1.0 / total, 1e-12);                         // two_object, unseen
  double sum = 0;
  for (double q : p) sum += q;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  const auto n = count_draws(c);
  for (size_t i = 0; i < n.size(); ++i) expect_share(n[i], p[i]);
}

TEST(TagCurriculum, PartialFocusMixesTheUniformDrawWithTheDeficits) {
  TagCurriculum c(0.5, 0.9, 3);
  c.observe({Tag::single_object, Tag::two_object, Tag::counting, Tag::colors, Tag::position, Tag::color_attr},
            {0.8, 0.2, 0.2, 0.2, 0.2, 0.2});
  const double total = 0.2 + 5 * 0.8;
  const auto p = c.probabilities();
  EXPECT_NEAR(p[0], 0.5 / 6 + 0.5 * 0.2 / total, 1e-12);
  EXPECT_NEAR(p[5], 0.5 / 6 + 0.5 * 0.8 / total, 1e-12);
}

TEST(TagCurriculum, EachTagsMeanIsAnAverageMovingOncePerIteration) {
  TagCurriculum c(1.0, 0.75, 5);
  EXPECT_TRUE(std::isnan(c.means()[1]));
  c.observe({Tag::two_object, Tag::two_object}, {0.2, 0.6});  // first: the batch mean
  EXPECT_NEAR(c.means()[1], 0.4, 1e-12);
  c.observe({Tag::two_object, Tag::counting}, {1.0, 0.3});  // 0.75 * 0.4 + 0.25 * 1.0
  EXPECT_NEAR(c.means()[1], 0.55, 1e-12);
  EXPECT_NEAR(c.means()[2], 0.3, 1e-12);
  c.observe({Tag::counting}, {0.7});  // two_object absent: unchanged
  EXPECT_NEAR(c.means()[1], 0.55, 1e-12);
  EXPECT_NEAR(c.means()[2], 0.75 * 0.3 + 0.25 * 0.7, 1e-12);
}

TEST(TagCurriculum, TheSameSeedDrawsTheSameTags) {
  TagCurriculum a(0.7, 0.9, 42), b(0.7, 0.9, 42), c(0.7, 0.9, 43);
  bool differs = false;
  for (int k = 0; k < 200; ++k) {
    const Tag ta = a.next();
    EXPECT_EQ(ta, b.next());
    differs |= ta != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(TagCurriculum, RefusesAFocusOrDecayOutOfRangeAndMismatchedRewards) {
  EXPECT_THROW(TagCurriculum(-0.1, 0.9, 1), std::invalid_argument);
  EXPECT_THROW(TagCurriculum(1.5, 0.9, 1), std::invalid_argument);
  EXPECT_THROW(TagCurriculum(std::nan(""), 0.9, 1), std::invalid_argument);
  EXPECT_THROW(TagCurriculum(0.5, 1.0, 1), std::invalid_argument);
  EXPECT_THROW(TagCurriculum(0.5, -0.1, 1), std::invalid_argument);
  TagCurriculum c(0.5, 0.9, 1);
  EXPECT_THROW(c.observe({Tag::position}, {0.1, 0.2}), std::invalid_argument);
}

}  // namespace
}  // namespace spotlight::tools

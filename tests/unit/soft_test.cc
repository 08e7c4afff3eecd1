// The shape-soft training reward: far from the detector's cuts it is the
// reward itself; near them it moves smoothly with the blob's features; its
// Monte Carlo branch agrees with exact enumeration; and the favourable-shape
// bound is a bound.
#include "models/scene/soft.h"

#include <gtest/gtest.h>

#include <cmath>

#include "models/scene/detect.h"
#include "models/scene/prompt.h"
#include "models/scene/render.h"
#include "models/scene/reward.h"

namespace spotlight::scene {
namespace {

Detection blob(Shape s, float fill, float centroid_height, int x0, int y0 = 4) {
  Detection d;
  d.shape = s;
  d.color = Color::red;
  d.x0 = x0, d.y0 = y0, d.x1 = x0 + 6, d.y1 = y0 + 6;
  d.cx = x0 + 3.0f, d.cy = y0 + 3.0f;
  d.area = static_cast<int>(36 * fill);
  d.fill = fill;
  d.centroid_height = centroid_height;
  return d;
}

Prompt one(Shape s, int count = 1) {
  Prompt p;
  p.tag = count == 1 ? Tag::single_object : Tag::counting;
  Clause c;
  c.shape = s;
  c.count = count;
  p.include = {c};
  return p;
}

TEST(SoftShapes, ProbabilitiesFollowTheCuts) {
  for (float fill : {0.3f, 0.59f, 0.7f, 0.85f, 0.86f, 0.87f, 1.0f})
    for (float ch : {0.4f, 0.5f, 0.53f, 0.54f, 0.6f}) {
      const auto p = shape_probabilities(blob(Shape::square, fill, ch, 0));
      EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-12);
      for (double v : p) EXPECT_GE(v, 0.0);
    }
  // Far from every cut the call is certain, and it is classify()'s.
  const auto square = shape_probabilities(blob(Shape::square, 0.97f, 0.48f, 0));
  EXPECT_GT(square[int(Shape::square)], 0.98);
  const auto circle = shape_probabilities(blob(Shape::circle, 0.76f, 0.5f, 0));
  EXPECT_GT(circle[int(Shape::circle)], 0.95);
  const auto triangle = shape_probabilities(blob(Shape::triangle, 0.5f, 0.62f, 0));
  EXPECT_GT(triangle[int(Shape::triangle)], 0.999);
  // On the square/circle cut, an even split.
  const auto edge = shape_probabilities(blob(Shape::square, kSquareFill, 0.45f, 0));
  EXPECT_NEAR(edge[int(Shape::square)], edge[int(Shape::circle)], 0.01);
}

TEST(SoftShapes, RewardMovesSmoothlyAcrossACut) {
  // "a square": a blob just under the fill cut scores 0 by the detector's
  // verdict, but its soft reward is near a half and rises with the fill.
  const Prompt p = one(Shape::square);
  double last = -1;
  for (float fill = 0.78f; fill <= 0.95f; fill += 0.01f) {
    std::vector<Detection> found = {
        blob(fill >= kSquareFill ? Shape::square : Shape::circle, fill, 0.48f, 0)};
    const double soft = expected_reward(p, found);
    EXPECT_GE(soft, last);
    last = soft;
    if (std::abs(fill - kSquareFill) > 0.12f) EXPECT_NEAR(soft, score(p, found).reward, 0.02);
  }
  std::vector<Detection> just_under = {blob(Shape::circle, kSquareFill - 0.005f, 0.48f, 0)};
  EXPECT_EQ(score(p, just_under).reward, 0.0);
  EXPECT_GT(expected_reward(p, just_under), 0.35);
}

TEST(SoftShapes, EqualsTheRewardOnRenderedScenes) {
  // Rendered shapes sit far from the cuts, but for circles of 9 to 13 px,
  // which fill 0.81-0.85 against the square cut at 0.86: where every blob's
  // call is at least 99 % sure, the soft reward is the reward.
  PromptGenerator gen(7);
  int sure = 0, n = 0;
  double gap = 0;
  for (int i = 0; i < 400; ++i) {
    const Prompt p = gen.next();
    const auto img = render(p, 1000 + i);
    const auto found = detect(img.data(), 32);
    const double hard = score(p, found).reward, soft = expected_reward(p, found);
    gap += std::abs(hard - soft);
    ++n;
    bool all_sure = true;
    for (const Detection& d : found) {
      const auto pr = shape_probabilities(d);
      all_sure = all_sure && pr[int(d.shape)] >= 0.99;
    }
    if (!all_sure) continue;
    ++sure;
    EXPECT_NEAR(soft, hard, 0.01 * double(found.size())) << p.text;
  }
  std::printf(
      "rendered scenes: %d of %d with every call 99 %% sure; mean |soft - reward| %.4f over all\n",
      sure, n, gap / n);
  EXPECT_GE(sure, n / 2);
  EXPECT_LT(gap / n, 0.05);
}

TEST(SoftShapes, SamplingAgreesWithEnumeration) {
  // Nine blobs on the square/circle cut, "four squares": exact by enumeration
  // (3^9) against the Monte Carlo branch; and the same input, the same value.
  std::vector<Detection> found;
  for (int i = 0; i < 9; ++i)
    found.push_back(blob(Shape::circle, 0.83f + 0.008f * i, 0.47f, 7 * (i % 4), 7 * (i / 4)));
  const Prompt p = one(Shape::square, 4);
  SoftOptions exact;
  exact.max_enumerated = 9;
  SoftOptions sampled;
  sampled.samples = 20000;
  const double e = expected_reward(p, found, exact), s = expected_reward(p, found, sampled);
  EXPECT_NEAR(s, e, 0.01);
  EXPECT_EQ(expected_reward(p, found), expected_reward(p, found));
}

// "a red square" over a red circle and a blue triangle.
struct SquareAsked {
  Prompt p;
  std::vector<Detection> found;
};
SquareAsked red_square_over_circle_and_triangle() {
  SquareAsked out{one(Shape::square), {blob(Shape::circle, 0.75f, 0.5f, 0), blob(Shape::triangle, 0.5f, 0.6f, 10)}};
  out.p.tag = Tag::colors;
  out.p.include[0].color = Color::red;
  out.found[1].color = Color::blue;
  return out;
}

TEST(SoftShapes, FavourableShapesBoundTheReward) {
  const Prompt p = one(Shape::square);
  std::vector<Detection> found = {blob(Shape::circle, 0.75f, 0.5f, 0)};
  EXPECT_EQ(score(p, found).reward, 0.0);
  EXPECT_EQ(best_reward_over_shapes(p, found), 1.0);
  PromptGenerator gen(11);
  for (int i = 0; i < 100; ++i) {
    const Prompt q = gen.next();
    const auto found2 = detect(render(q, 50 + i).data(), 32);
    EXPECT_GE(best_reward_over_shapes(q, found2), score(q, found2).reward);
  }
}

TEST(SoftShapes, BestShapesChangesOnlyTheCallsThatScore) {
  // The circle becomes the square; the triangle's call does not change the
  // score, so it stays.
  const auto [p, found] = red_square_over_circle_and_triangle();
  const auto best = best_shapes(p, found);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].shape, Shape::square);
  EXPECT_EQ(best[1].shape, Shape::triangle);
  EXPECT_EQ(score(p, best).reward, best_reward_over_shapes(p, found));
  // Two red circles: one of them turns square, not both.
  const std::vector<Detection> two = {blob(Shape::circle, 0.75f, 0.5f, 0), blob(Shape::circle, 0.75f, 0.5f, 10)};
  const auto one_square = best_shapes(p, two);
  EXPECT_EQ((one_square[0].shape == Shape::square) + (one_square[1].shape == Shape::square), 1);
  EXPECT_EQ(score(p, one_square).reward, 1.0);
}

TEST(SoftShapes, ExtraBlobsAreThoseTheImageScoresNoWorseWithout) {
  // With the circle called a square, the triangle is a shape nobody asked for.
  const auto [p, found] = red_square_over_circle_and_triangle();
  EXPECT_EQ(extra_blobs(p, best_shapes(p, found)), std::vector<int>{1});
  // The square alone: nothing is extra, and an empty image has nothing to remove.
  EXPECT_TRUE(extra_blobs(p, best_shapes(p, {found[0]})).empty());
  EXPECT_TRUE(extra_blobs(p, {}).empty());
  // Every shape asked for once, two squares drawn: no shape is free to park
  // the second square on, so one square is extra, and without it the image
  // scores full marks.
  Prompt all;
  all.tag = Tag::counting;
  for (Shape s : {Shape::square, Shape::circle, Shape::triangle}) {
    Clause c;
    c.shape = s;
    c.count = 1;
    all.include.push_back(c);
  }
  const std::vector<Detection> four = {blob(Shape::square, 0.95f, 0.5f, 0), blob(Shape::square, 0.95f, 0.5f, 8),
                                       blob(Shape::circle, 0.75f, 0.5f, 16), blob(Shape::triangle, 0.5f, 0.6f, 24)};
  const auto assigned = best_shapes(all, four);
  EXPECT_LT(score(all, assigned).reward, 1.0);
  const auto extras = extra_blobs(all, assigned);
  ASSERT_EQ(extras.size(), 1u);
  EXPECT_LT(extras[0], 2) << "one of the squares";
  std::vector<Detection> rest;
  for (int i = 0; i < 4; ++i)
    if (i != extras[0]) rest.push_back(assigned[size_t(i)]);
  EXPECT_EQ(score(all, rest).reward, 1.0);
}

}  // namespace
}  // namespace spotlight::scene

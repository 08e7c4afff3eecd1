// spotlight-train --draft-shape-focus: each blob's shape loss weighted by the
// running share of its tag and wanted shape called right
// (tools/train/shape_focus.h).
#include "tools/train/shape_focus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace spotlight::tools {
namespace {

using scene::Shape;
using scene::Tag;

// `right` of `n` blobs of (tag, wanted) called `wanted`, the rest `wrong`.
void put(scene::ShapeConfusion& c, Tag tag, Shape wanted, int right, int n, Shape wrong) {
  c.calls[size_t(tag)][size_t(wanted)][size_t(wanted)] += right;
  c.calls[size_t(tag)][size_t(wanted)][size_t(wrong)] += n - right;
}

TEST(ShapeFocus, WithoutFocusEveryBlobWeighsOne) {
  ShapeFocus f(0.0, 0.9);
  scene::ShapeConfusion c;
  put(c, Tag::two_object, Shape::circle, 1, 4, Shape::square);
  put(c, Tag::single_object, Shape::square, 3, 3, Shape::circle);
  f.observe(c);
  for (const auto& row : f.weights())
    for (double w : row) EXPECT_DOUBLE_EQ(w, 1.0);
}

TEST(ShapeFocus, TheCellsCalledWorstWeighMostAndTheSeenCellsAverageOne) {
  ShapeFocus f(1.0, 0.9);
  scene::ShapeConfusion c;
  put(c, Tag::two_object, Shape::circle, 1, 4, Shape::square);  // deficit 0.75
  put(c, Tag::position, Shape::square, 3, 4, Shape::circle);    // deficit 0.25
  // All called right: the deficit is floored at kMinDeficit.
  put(c, Tag::single_object, Shape::triangle, 5, 5, Shape::circle);
  f.observe(c);
  const auto w = f.weights();
  const double total = 0.75 + 0.25 + ShapeFocus::kMinDeficit;
  EXPECT_NEAR(w[size_t(Tag::two_object)][size_t(Shape::circle)], 3 * 0.75 / total, 1e-12);
  EXPECT_NEAR(w[size_t(Tag::position)][size_t(Shape::square)], 3 * 0.25 / total, 1e-12);
  EXPECT_NEAR(w[size_t(Tag::single_object)][size_t(Shape::triangle)],
              3 * ShapeFocus::kMinDeficit / total, 1e-12);
  EXPECT_NEAR(w[size_t(Tag::two_object)][size_t(Shape::circle)] +
                  w[size_t(Tag::position)][size_t(Shape::square)] +
                  w[size_t(Tag::single_object)][size_t(Shape::triangle)],
              3.0, 1e-12);
  // A cell without blobs so far keeps weight 1, and its mean is unknown.
  EXPECT_DOUBLE_EQ(w[size_t(Tag::counting)][size_t(Shape::circle)], 1.0);
  EXPECT_TRUE(std::isnan(f.means()[size_t(Tag::counting)][size_t(Shape::circle)]));
}

TEST(ShapeFocus, ACellsShareIsAMovingAverageUpdatedOnlyWhenItHasBlobs) {
  ShapeFocus f(0.5, 0.75);
  scene::ShapeConfusion first;
  put(first, Tag::counting, Shape::circle, 4, 4, Shape::square);
  put(first, Tag::colors, Shape::square, 0, 2, Shape::triangle);
  f.observe(first);  // the first observation sets the mean
  EXPECT_DOUBLE_EQ(f.means()[size_t(Tag::counting)][size_t(Shape::circle)], 1.0);
  scene::ShapeConfusion second;
  put(second, Tag::counting, Shape::circle, 0, 2, Shape::square);
  f.observe(second);
  EXPECT_DOUBLE_EQ(f.means()[size_t(Tag::counting)][size_t(Shape::circle)], 0.75);
  // No blobs this time: unchanged.
  EXPECT_DOUBLE_EQ(f.means()[size_t(Tag::colors)][size_t(Shape::square)], 0.0);
  // Half the uniform weight, half the deficits' (0.25 and 1 over their mean 0.625).
  const auto w = f.weights();
  EXPECT_NEAR(w[size_t(Tag::counting)][size_t(Shape::circle)], 0.5 + 0.5 * 0.25 / 0.625, 1e-12);
  EXPECT_NEAR(w[size_t(Tag::colors)][size_t(Shape::square)], 0.5 + 0.5 * 1.0 / 0.625, 1e-12);
}

TEST(ShapeFocus, RefusesAFocusOrDecayOutOfRange) {
  EXPECT_THROW(ShapeFocus(-0.1, 0.9), std::invalid_argument);
  EXPECT_THROW(ShapeFocus(1.5, 0.9), std::invalid_argument);
  EXPECT_THROW(ShapeFocus(std::nan(""), 0.9), std::invalid_argument);
  EXPECT_THROW(ShapeFocus(0.5, 1.0), std::invalid_argument);
  EXPECT_THROW(ShapeFocus(0.5, -0.1), std::invalid_argument);
}

}  // namespace
}  // namespace spotlight::tools

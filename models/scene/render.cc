#include "models/scene/render.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "models/scene/rng.h"

namespace spotlight::scene {

namespace {

// How far past GenEval's 0.5 cut a positioned object must lie along its
// relation, checked on its true box and on the box grown by a pixel (blur
// and a model's soft edges make detected boxes a little larger).
constexpr double kRelationMargin = 0.65;
constexpr int kTriesPerShape = 64;
constexpr int kTriesPerScene = 256;
constexpr int kShrinkEvery = 32;  // failed scenes before the largest side shrinks by a pixel

Box grown(const Box& b, double by) {
  return {b.x0 - by, b.y0 - by, b.x1 + by, b.y1 + by};
}

bool apart(const PlacedShape& a, const PlacedShape& b, int min_gap) {
  // Boxes at least min_gap pixels apart along some axis.
  return a.x0 + a.side + min_gap <= b.x0 || b.x0 + b.side + min_gap <= a.x0 ||
         a.y0 + a.side + min_gap <= b.y0 || b.y0 + b.side + min_gap <= a.y0;
}

bool clearly(const PlacedShape& a, const PlacedShape& b, Relation r) {
  return along(revised_direction(a.box(), b.box()), r) >= kRelationMargin &&
         along(revised_direction(grown(a.box(), 1), grown(b.box(), 1)), r) >= kRelationMargin;
}

}  // namespace

int min_side(int size) {
  return size / 4;
}
int max_side(int size) {
  return 3 * size / 8;
}
int gap(int size) {
  return std::max(2, size / 16);
}

bool shape_covers(Shape shape, int side, int i, int j) {
  // Doubled coordinates keep the pixel-centre tests in integers: the centre of
  // pixel i sits at 2i + 1, the box's centre line at `side`.
  const int u = 2 * i + 1 - side;
  const int v = 2 * j + 1 - side;
  switch (shape) {
    case Shape::square:
      return true;
    case Shape::circle:
      return u * u + v * v <= side * side;
    case Shape::triangle:
      return std::abs(u) <= j + 1;
  }
  return false;
}

std::vector<PlacedShape> layout(const Prompt& p, uint64_t seed, int size) {
  if (size < kMinRenderSize) throw std::invalid_argument("render size below 16");
  for (size_t c = 0; c < p.include.size(); ++c) {
    const Clause& cl = p.include[c];
    if (cl.count < 1) throw std::invalid_argument("clause count below 1");
    if (cl.relation && (cl.relation_target < 0 || static_cast<size_t>(cl.relation_target) >= c))
      throw std::invalid_argument("relation target must be an earlier clause");
  }
  // The text folds in so that two prompts rendered with one seed differ.
  Rng rng(seed ^ fnv1a(p.text));
  const int lo = min_side(size);
  int hi = max_side(size);
  const int min_gap = gap(size);
  std::vector<PlacedShape> placed;
  for (int scene = 0; scene < kTriesPerScene; ++scene) {
    if (scene > 0 && scene % kShrinkEvery == 0 && hi > lo) --hi;
    placed.clear();
    bool ok = true;
    for (size_t c = 0; c < p.include.size() && ok; ++c) {
      const Clause& cl = p.include[c];
      for (int k = 0; k < cl.count && ok; ++k) {
        PlacedShape s;
        s.shape = cl.shape;
        s.color = cl.color ? *cl.color : kColors[rng.below(kNumColors)];
        s.clause = static_cast<int>(c);
        ok = false;
        for (int t = 0; t < kTriesPerShape && !ok; ++t) {
          s.side = rng.uniform_int(lo, hi);
          s.x0 = rng.uniform_int(min_gap, size - min_gap - s.side);
          s.y0 = rng.uniform_int(min_gap, size - min_gap - s.side);
          ok = std::all_of(placed.begin(), placed.end(), [&](const PlacedShape& o) {
            if (!apart(s, o, min_gap)) return false;
            return !cl.relation || o.clause != cl.relation_target || clearly(s, o, *cl.relation);
          });
        }
        if (ok) placed.push_back(s);
      }
    }
    if (ok) return placed;
  }
  throw std::runtime_error("no layout found for: " + p.text);
}

void paint(std::vector<float>& chw, int size, const PlacedShape& s) {
  const auto rgb = color_rgb(s.color);
  const size_t plane = static_cast<size_t>(size) * size;
  for (int j = 0; j < s.side; ++j) {
    const int y = s.y0 + j;
    if (y < 0 || y >= size) continue;
    for (int i = 0; i < s.side; ++i) {
      const int x = s.x0 + i;
      if (x < 0 || x >= size || !shape_covers(s.shape, s.side, i, j)) continue;
      const size_t at = static_cast<size_t>(y) * size + x;
      for (int ch = 0; ch < 3; ++ch) chw[ch * plane + at] = rgb[ch];
    }
  }
}

std::vector<float> draw(const std::vector<PlacedShape>& shapes, int size) {
  std::vector<float> chw(static_cast<size_t>(3) * size * size, -1.0f);
  for (const PlacedShape& s : shapes) paint(chw, size, s);
  return chw;
}

std::vector<float> render(const Prompt& p, uint64_t seed, int size) {
  return draw(layout(p, seed, size), size);
}

}  // namespace spotlight::scene

// GenEval's relative-position rule, on axis-aligned boxes.
//
// Boxes are (x0, y0, x1, y1) in pixel units with x1, y1 one past the last
// pixel, so x1 - x0 is the width; y grows downwards.
#pragma once

#include <cstdint>

#include "models/scene/prompt.h"

namespace spotlight::scene {

struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// A set of relations (a bitmask over Relation).
class Relations {
 public:
  void add(Relation r) { bits_ |= bit(r); }
  bool contains(Relation r) const { return (bits_ & bit(r)) != 0; }
  bool empty() const { return bits_ == 0; }
  bool operator==(const Relations&) const = default;

 private:
  static uint8_t bit(Relation r) { return static_cast<uint8_t>(1u << static_cast<int>(r)); }
  uint8_t bits_ = 0;
};

// The offset of a's centre from b's centre after GenEval's dead zone: each
// axis shrinks towards 0 by 0.1 * (dim_a + dim_b), clamped at 0, and the
// result is divided by the length of the raw offset. `dead` is GenEval's
// "all |revised| < 1e-3" (no relation at all); dx, dy are 0 then.
struct Direction {
  double dx = 0, dy = 0;
  bool dead = true;
};
Direction revised_direction(const Box& a, const Box& b);

// Where a is relative to b, exactly as GenEval's relative_position:
// dx < -0.5 left of, dx > 0.5 right of, dy < -0.5 above, dy > 0.5 below.
Relations relative_position(const Box& a, const Box& b);

// The component of `d` along `r` (positive when `r` holds, e.g. -dx for left_of).
double along(const Direction& d, Relation r);

}  // namespace spotlight::scene

#include "models/scene/geometry.h"

#include <algorithm>
#include <cmath>

namespace spotlight::scene {

namespace {
// GenEval's POSITION_THRESHOLD: a tenth of the summed sizes is a dead zone.
constexpr double kPositionThreshold = 0.1;
constexpr double kRelationCut = 0.5;

double sign(double v) {
  return (v > 0) - (v < 0);
}
}  // namespace

Direction revised_direction(const Box& a, const Box& b) {
  const double ox = (a.x0 + a.x1) / 2 - (b.x0 + b.x1) / 2;
  const double oy = (a.y0 + a.y1) / 2 - (b.y0 + b.y1) / 2;
  const double dims_x = (a.x1 - a.x0) + (b.x1 - b.x0);
  const double dims_y = (a.y1 - a.y0) + (b.y1 - b.y0);
  const double rx = std::max(std::abs(ox) - kPositionThreshold * dims_x, 0.0) * sign(ox);
  const double ry = std::max(std::abs(oy) - kPositionThreshold * dims_y, 0.0) * sign(oy);
  if (std::abs(rx) < 1e-3 && std::abs(ry) < 1e-3) return {};
  // Non-zero revised offset implies a non-zero raw offset, so norm > 0.
  const double norm = std::hypot(ox, oy);
  return {rx / norm, ry / norm, false};
}

Relations relative_position(const Box& a, const Box& b) {
  Relations out;
  const Direction d = revised_direction(a, b);
  if (d.dead) return out;
  if (d.dx < -kRelationCut) out.add(Relation::left_of);
  if (d.dx > kRelationCut) out.add(Relation::right_of);
  if (d.dy < -kRelationCut) out.add(Relation::above);
  if (d.dy > kRelationCut) out.add(Relation::below);
  return out;
}

double along(const Direction& d, Relation r) {
  switch (r) {
    case Relation::left_of:
      return -d.dx;
    case Relation::right_of:
      return d.dx;
    case Relation::above:
      return -d.dy;
    case Relation::below:
      return d.dy;
  }
  return 0;
}

}  // namespace spotlight::scene

#include "tools/train/shape_focus.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace spotlight::tools {

ShapeFocus::ShapeFocus(double focus, double decay) : focus_(focus), decay_(decay) {
  if (!(focus >= 0 && focus <= 1))
    throw std::invalid_argument("--draft-shape-focus must lie in [0, 1], got " +
                                std::to_string(focus));
  if (!(decay >= 0 && decay < 1))
    throw std::invalid_argument("the shape focus's decay must lie in [0, 1), got " +
                                std::to_string(decay));
  for (auto& row : mean_) row.fill(std::numeric_limits<double>::quiet_NaN());
}

void ShapeFocus::observe(const scene::ShapeConfusion& calls) {
  for (size_t tag = 0; tag < mean_.size(); ++tag)
    for (size_t wanted = 0; wanted < scene::kShapes.size(); ++wanted) {
      int n = 0;
      for (int c : calls.calls[tag][wanted]) n += c;
      if (n == 0) continue;
      const double batch = double(calls.calls[tag][wanted][wanted]) / n;
      double& m = mean_[tag][wanted];
      m = std::isnan(m) ? batch : decay_ * m + (1 - decay_) * batch;
    }
}

scene::PerTagShape<double> ShapeFocus::weights() const {
  double total = 0;
  int seen = 0;
  for (const auto& row : mean_)
    for (double m : row)
      if (!std::isnan(m)) total += std::max(kMinDeficit, 1 - m), ++seen;
  scene::PerTagShape<double> w;
  for (size_t tag = 0; tag < w.size(); ++tag)
    for (size_t s = 0; s < w[tag].size(); ++s) {
      const double m = mean_[tag][s];
      w[tag][s] =
          std::isnan(m) ? 1.0 : (1 - focus_) + focus_ * std::max(kMinDeficit, 1 - m) * seen / total;
    }
  return w;
}

scene::PerTagShape<double> ShapeFocus::means() const {
  return mean_;
}

}  // namespace spotlight::tools

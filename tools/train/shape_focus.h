// spotlight-train --draft-shape-focus F: DRaFT's shape loss weighs each blob
// by how badly the model has lately been drawing the shape its prompt wants of
// it, in prompts of its tag, instead of weighing every blob alike. No
// LibTorch, so that the rule is unit-tested alone.
//
// Why. The kept weights of DRaFT's runs call the squares right far more often
// than the base (0.13 to 0.49-0.56), but the circles of two-object and
// counting prompts far less (0.82-0.89 to 0.30-0.45; forty-sixth session,
// docs/benchmarks.md): the shared weights trade one cell of tag and shape
// against another, and nothing in the loss notices a cell that was drawn
// right and is being lost. The focus raises the weight of the cells whose
// running share called right falls, as --tag-focus does for the tags' draw.
//
// How. Each cell (tag, wanted shape) keeps an exponential moving average m
// of the share of its blobs the detector called right (one update per
// iteration whose blobs include it, decay `decay`; the first observation sets
// it). Its deficit is 1 - m, floored at kMinDeficit. A seen cell's weight is
//   w = (1 - F) + F * deficit / the mean deficit over the seen cells,
// so the seen cells' weights average 1, F = 0 weighs every blob 1 and F = 1
// follows the deficits alone. A cell not yet seen weighs 1.
#pragma once

#include "models/scene/shape_confusion.h"

namespace spotlight::tools {

class ShapeFocus {
 public:
  static constexpr double kMinDeficit = 0.05;

  // focus in [0, 1], decay in [0, 1); throws std::invalid_argument otherwise.
  ShapeFocus(double focus, double decay);

  // One iteration's shape calls (only the wanted shapes' right shares are read).
  void observe(const scene::ShapeConfusion& calls);

  scene::PerTagShape<double> weights() const;
  scene::PerTagShape<double> means() const;  // NaN before a cell is seen

 private:
  double focus_;
  double decay_;
  scene::PerTagShape<double> mean_;
};

}  // namespace spotlight::tools

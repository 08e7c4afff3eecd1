// Which colours a model draws, and whether it draws the colours prompts ask
// for: a diagnostic next to the reward. Why: the mini-GenEval reward can rise
// while the colours collapse (a DRaFT run of the fortieth session drew no
// blue, purple or cyan at all and still gained +0.2, docs/benchmarks.md),
// because its single-object and counting tags ask no colour; a table per
// colour makes such a collapse visible in numbers, not only in a grid.
#pragma once
#include <array>
#include <vector>
#include "models/scene/detect.h"
#include "models/scene/palette.h"
#include "models/scene/prompt.h"

namespace spotlight::scene {

struct ColourTally {
  int images = 0;
  std::array<int, kNumColors> blobs{};  // blobs found of each colour
  std::array<int, kNumColors> asked{};  // include clauses that ask for the colour
  std::array<int, kNumColors> drawn{};  // of them, those whose image has a blob of the colour (any shape)

  // One image: its prompt and the detector's blobs.
  void add(const Prompt& p, const std::vector<Detection>& found);
  // blobs[c] / images, and drawn[c] / asked[c] (0 where nothing was asked).
  double blobs_per_image(Color c) const;
  double drawn_share(Color c) const;
};

}  // namespace spotlight::scene

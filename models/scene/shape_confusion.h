// Which shape the detector calls each blob against the shape its prompt
// wants of it, per tag: a diagnostic next to the reward. Why: the reward with
// every shape call favourable says how much the shape calls cost (0.85-0.90
// against 0.45-0.53 measured for DRaFT's kept weights), not which calls go
// wrong; the table does. Measured with it (forty-sixth session): DRaFT's kept
// weights call the single object's shape right for 0.75-1.00 of the blobs,
// the circles of two-object and counting prompts for 0.30-0.45 (the base:
// 0.82-0.89), the squares and circles of position and colour-attribute
// prompts for 0.12-0.57: the shape word is bound poorly to its object when a
// prompt asks for more than one.
#pragma once
#include <array>
#include <vector>

#include "models/scene/detect.h"
#include "models/scene/prompt.h"

namespace spotlight::scene {

// A value per tag and wanted shape: [tag][shape], in kTags's and kShapes's order.
template <class T>
using PerTagShape = std::array<std::array<T, kNumShapes>, kNumTags>;

struct ShapeConfusion {
  // calls[tag][wanted][called]: blobs of images with that tag whose wanted
  // shape (best_shapes's assignment) is `wanted` and detector's call `called`.
  // Extra blobs (extra_blobs: they stand for no clause) and blobs past
  // best_shapes's first kMaxAssignedBlobs (their wanted shape is unknown) are
  // not counted.
  std::array<std::array<std::array<int, kNumShapes>, kNumShapes>, kNumTags> calls{};

  // One image: its prompt and the detector's blobs.
  void add(const Prompt& p, const std::vector<Detection>& found);
  // The same, given best_shapes's assignment and extra_blobs's indices of
  // it, where the caller has them already (best_shapes scores up to 3^8
  // assignments).
  void add(const Prompt& p, const std::vector<Detection>& found,
           const std::vector<Detection>& wanted, const std::vector<int>& extra);
  // Summed over the tags.
  int total(Shape wanted, Shape called) const;
  // Of the blobs wanted as `wanted` (with `tag`, or over all tags), the share
  // called it; 0 where there are none.
  double right_share(Shape wanted) const;
  double right_share(Tag tag, Shape wanted) const;
};

}  // namespace spotlight::scene

// Shape-soft scoring: a shaped training reward over the detector's verdicts.
//
// The detector's shape call is a hard cut on two features (detect.h step 4),
// so a blob a hair on the wrong side of a cut scores as a wrong shape, and a
// group of rollouts that all miss scores all zero: no signal to learn from.
// Here each blob's shape is uncertain in proportion to how near its features
// sit to the cuts (a logistic of the distance, `*_width` wide), and the reward
// is the expectation of score() over those shapes. Far from every cut it is
// score() exactly. It is a training signal only; evaluation keeps score().
#pragma once

#include <array>
#include <vector>

#include "models/scene/detect.h"
#include "models/scene/prompt.h"
#include "models/scene/reward.h"

namespace spotlight::scene {

struct SoftOptions {
  float centroid_width = 0.006f;  // the triangle cut on centroid height (kTriangleCentroid)
  float fill_width = 0.012f;      // the cuts on fill (kTriangleFill, kSquareFill)
  int max_enumerated = 7;         // uncertain blobs enumerated exactly (3^7 = 2,187 scorings)
  int samples = 512;              // Monte Carlo draws beyond that, from a seed fixed by the blobs
};

// P(square), P(circle), P(triangle) of one detection, indexed by Shape.
std::array<double, kNumShapes> shape_probabilities(const Detection& d, const SoftOptions& o = {});

// E[score(p, found with shapes drawn from shape_probabilities)].reward.
// Blobs whose likeliest shape has probability >= 0.999 keep it.
double expected_reward(const Prompt& p, const std::vector<Detection>& found,
                       const SoftOptions& o = {});

// Blobs whose shape calls best_shapes varies: the first 8 (3^8 scorings).
inline constexpr size_t kMaxAssignedBlobs = 8;

// The best score(p, ·).reward over every shape assignment of the blobs, or of
// the first kMaxAssignedBlobs of them: how much reward shape calls alone cost.
double best_reward_over_shapes(const Prompt& p, const std::vector<Detection>& found);

// The assignment that gives best_reward_over_shapes: `found` with each of its
// first kMaxAssignedBlobs blobs' shape set to the call that scores best. Of assignments that
// score alike, the one that changes the fewest calls wins, so a blob whose
// shape does not matter keeps the detector's call.
std::vector<Detection> best_shapes(const Prompt& p, const std::vector<Detection>& found);

// The blobs the image would score no worse without, shapes as given (call it
// on best_shapes's assignment): indices into `assigned`, ascending. Removed
// greedily, each round the blob whose removal scores best, while that scores
// at least what keeping it does. A blob that best_shapes parked on a shape the
// prompt does not ask for scores nothing and goes; so does one past a
// clause's count when every shape is asked for. Why: under best_shapes alone
// an extra blob is trained into a shape nobody asked for, never away, and the
// DRaFT runs lose their counts as the blobs multiply (models/draft.h).
std::vector<int> extra_blobs(const Prompt& p, const std::vector<Detection>& assigned);

}  // namespace spotlight::scene

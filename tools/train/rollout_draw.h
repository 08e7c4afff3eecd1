// Which prompts and seeds an iteration of spotlight-train rolls out, with
// --shape-twins or without. No LibTorch, so that the pairing is unit-tested
// alone.
//
// Why twins. The kept weights of DRaFT's runs draw a single object's shape
// right nearly always but lose the shapes of prompts of several objects: the
// shapes' marginal moved (the base's circles became squares and triangles
// everywhere) more than their binding to the words (forty-sixth session,
// docs/benchmarks.md). With twins every second prompt is the one before with
// its shape words exchanged (scene::shape_twin), rolled out on the same seeds:
// the blobs at the same places are wanted in other shapes by the two prompts,
// so the part of the pair's gradient that would move a blob's shape whatever
// the words say pulls both ways, and what is left is what the words change.
// Measured (forty-eighth entry): it held the circles of two-object and
// counting prompts, but not the shapes bound to a colour or a place; off by
// default.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/scene/prompt.h"

namespace spotlight::tools {

// The refusal of an odd --prompts, said alike by the trainer's early check
// (before it loads a model or forks) and by draw_rollouts.
inline constexpr const char* kTwinsNeedEvenPrompts =
    "--shape-twins pairs the prompts: --prompts must be even";

struct RolloutDraw {
  std::vector<scene::Prompt> prompts;  // `prompts` groups of `rolled` alike
  std::vector<uint64_t> seeds;         // one a rollout
};

// `prompts` groups of `rolled` rollouts: each group's prompt from next_prompt
// and its seeds from next_seed, in that order (so without twins the draw is
// what the trainer drew before twins existed). With shape_twins, the odd
// groups are instead the twins of the groups before them on the same seeds,
// and neither source is called for them; `prompts` must then be even.
RolloutDraw draw_rollouts(int prompts, int rolled, bool shape_twins,
                          const std::function<scene::Prompt()>& next_prompt,
                          const std::function<uint64_t()>& next_seed);

}  // namespace spotlight::tools

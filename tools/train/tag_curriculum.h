// spotlight-train --tag-focus F: the training prompts' tags drawn towards
// the tags the model scores worst on, instead of uniformly. No LibTorch, so
// that the rule is unit-tested alone.
//
// Why. mini-GenEval's reward is the mean over a set balanced across its six
// tags, but they are learnt at very different speeds: in DRaFT's runs
// single_object rises from 0.14 to about 0.8 within a few hundred
// iterations while position and color_attr stay near 0.2-0.3 and
// two_object ends anywhere from 0.1 to 0.6 with the seed (fortieth session,
// docs/benchmarks.md). Drawing the tags uniformly keeps spending a sixth of
// every batch on a tag that is already learnt. A curriculum that follows the
// running reward of each tag moves those prompts to the tags with room left.
//
// How. Each tag keeps an exponential moving average m_t of the training
// reward of its prompts (one update per iteration that drew it, decay
// `decay`; the first observation sets it). A tag's deficit is 1 - m_t, or 1
// before it has been seen, floored at kMinDeficit so that no tag is starved.
// The next prompt's tag is drawn with
//   p_t = (1 - F) / 6 + F * deficit_t / sum of deficits,
// so F = 0 is the uniform draw and F = 1 follows the deficits alone.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "models/scene/prompt.h"
#include "models/scene/rng.h"

namespace spotlight::tools {

class TagCurriculum {
 public:
  static constexpr double kMinDeficit = 0.05;

  // focus in [0, 1], decay in [0, 1); throws std::invalid_argument otherwise.
  TagCurriculum(double focus, double decay, uint64_t seed);

  // The tag of the next training prompt.
  scene::Tag next();

  // One iteration's rewards: tags[i] is the tag of the prompt whose image
  // scored rewards[i]. Each tag present is updated once, with the mean of
  // its rewards. Throws std::invalid_argument if the sizes differ.
  void observe(const std::vector<scene::Tag>& tags, const std::vector<double>& rewards);

  // In scene::kTags's order.
  std::array<double, scene::kNumTags> probabilities() const;
  std::array<double, scene::kNumTags> means() const;  // NaN before a tag is seen

 private:
  double focus_;
  double decay_;
  scene::Rng rng_;
  std::array<double, scene::kNumTags> mean_;
};

}  // namespace spotlight::tools

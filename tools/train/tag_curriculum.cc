#include "tools/train/tag_curriculum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace spotlight::tools {

namespace {
size_t index_of(scene::Tag t) {
  for (size_t i = 0; i < scene::kTags.size(); ++i)
    if (scene::kTags[i] == t) return i;
  throw std::invalid_argument("TagCurriculum: unknown tag");
}
}  // namespace

TagCurriculum::TagCurriculum(double focus, double decay, uint64_t seed) : focus_(focus), decay_(decay), rng_(seed) {
  if (!(focus >= 0 && focus <= 1))
    throw std::invalid_argument("--tag-focus must lie in [0, 1], got " + std::to_string(focus));
  if (!(decay >= 0 && decay < 1))
    throw std::invalid_argument("the tag curriculum's decay must lie in [0, 1), got " + std::to_string(decay));
  mean_.fill(std::numeric_limits<double>::quiet_NaN());
}

std::array<double, scene::kNumTags> TagCurriculum::probabilities() const {
  std::array<double, scene::kNumTags> deficit{};
  double total = 0;
  for (size_t i = 0; i < deficit.size(); ++i) {
    deficit[i] = std::isnan(mean_[i]) ? 1.0 : std::max(kMinDeficit, 1.0 - mean_[i]);
    total += deficit[i];
  }
  std::array<double, scene::kNumTags> p{};
  for (size_t i = 0; i < p.size(); ++i) p[i] = (1 - focus_) / double(p.size()) + focus_ * deficit[i] / total;
  return p;
}

std::array<double, scene::kNumTags> TagCurriculum::means() const { return mean_; }

scene::Tag TagCurriculum::next() {
  const auto p = probabilities();
  const double u = rng_.uniform();
  double cum = 0;
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    cum += p[i];
    if (u < cum) return scene::kTags[i];
  }
  return scene::kTags.back();  // what rounding leaves of the sum
}

void TagCurriculum::observe(const std::vector<scene::Tag>& tags, const std::vector<double>& rewards) {
  if (tags.size() != rewards.size())
    throw std::invalid_argument("TagCurriculum::observe: " + std::to_string(tags.size()) + " tags for " +
                                std::to_string(rewards.size()) + " rewards");
  std::array<double, scene::kNumTags> sum{};
  std::array<int, scene::kNumTags> n{};
  for (size_t k = 0; k < tags.size(); ++k) {
    const size_t i = index_of(tags[k]);
    sum[i] += rewards[k];
    ++n[i];
  }
  for (size_t i = 0; i < mean_.size(); ++i) {
    if (n[i] == 0) continue;
    const double batch = sum[i] / n[i];
    mean_[i] = std::isnan(mean_[i]) ? batch : decay_ * mean_[i] + (1 - decay_) * batch;
  }
}

}  // namespace spotlight::tools

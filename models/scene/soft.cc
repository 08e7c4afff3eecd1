#include "models/scene/soft.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "models/scene/rng.h"

namespace spotlight::scene {

namespace {

double logistic(double x) {
  return 1 / (1 + std::exp(-x));
}

// Calls f(assignment) for every assignment of shapes to the blobs at `which`,
// in odometer order; `found` holds the assignment while f runs.
template <class F>
void for_each_assignment(std::vector<Detection>& found, const std::vector<int>& which, F&& f) {
  std::vector<int> digit(which.size(), 0);
  for (;;) {
    for (size_t k = 0; k < which.size(); ++k) found[which[k]].shape = kShapes[digit[k]];
    f();
    size_t k = 0;
    while (k < which.size() && ++digit[k] == kNumShapes) digit[k++] = 0;
    if (k == which.size()) return;
  }
}

}  // namespace

std::array<double, kNumShapes> shape_probabilities(const Detection& d, const SoftOptions& o) {
  // classify(): triangle if the centroid sits low enough OR the fill is low;
  // otherwise square above the fill cut, circle below it.
  const double not_low_centroid =
      1 - logistic((d.centroid_height - kTriangleCentroid) / o.centroid_width);
  const double not_thin = 1 - logistic((kTriangleFill - d.fill) / o.fill_width);
  const double triangle = 1 - not_low_centroid * not_thin;
  const double square = (1 - triangle) * logistic((d.fill - kSquareFill) / o.fill_width);
  std::array<double, kNumShapes> out{};
  out[static_cast<int>(Shape::triangle)] = triangle;
  out[static_cast<int>(Shape::square)] = square;
  out[static_cast<int>(Shape::circle)] = 1 - triangle - square;
  return out;
}

double expected_reward(const Prompt& p, const std::vector<Detection>& found, const SoftOptions& o) {
  std::vector<Detection> work = found;
  std::vector<std::array<double, kNumShapes>> probs;
  std::vector<int> uncertain;
  for (size_t i = 0; i < work.size(); ++i) {
    const auto pr = shape_probabilities(work[i], o);
    const auto top = std::max_element(pr.begin(), pr.end());
    if (*top >= 0.999) {
      work[i].shape = kShapes[top - pr.begin()];
    } else {
      uncertain.push_back(static_cast<int>(i));
      probs.push_back(pr);
    }
  }
  if (uncertain.empty()) return score(p, work).reward;

  double sum = 0;
  if (static_cast<int>(uncertain.size()) <= o.max_enumerated) {
    for_each_assignment(work, uncertain, [&] {
      double w = 1;
      for (size_t k = 0; k < uncertain.size(); ++k)
        w *= probs[k][static_cast<int>(work[uncertain[k]].shape)];
      if (w > 0) sum += w * score(p, work).reward;
    });
    return sum;
  }
  // Too many to enumerate: sample, from a seed the blobs fix, so the same
  // image always gets the same reward.
  uint64_t seed = 0x50f7;
  for (const Detection& d : found)
    seed =
        seed * 0x100000001b3ull ^ (uint64_t(d.x0) << 24 | uint64_t(d.y0) << 16 | uint64_t(d.area));
  Rng rng(seed);
  for (int s = 0; s < o.samples; ++s) {
    for (size_t k = 0; k < uncertain.size(); ++k) {
      const double u = rng.uniform();
      const auto& pr = probs[k];
      work[uncertain[k]].shape = kShapes[u < pr[0] ? 0 : u < pr[0] + pr[1] ? 1 : 2];
    }
    sum += score(p, work).reward;
  }
  return sum / o.samples;
}

std::vector<Detection> best_shapes(const Prompt& p, const std::vector<Detection>& found) {
  std::vector<Detection> work = found, best = found;
  std::vector<int> all;
  for (int i = 0; i < static_cast<int>(std::min(work.size(), kMaxAssignedBlobs)); ++i) all.push_back(i);
  double best_reward = score(p, work).reward;
  size_t best_changes = 0;
  for_each_assignment(work, all, [&] {
    const double r = score(p, work).reward;
    size_t changes = 0;
    for (int i : all) changes += work[i].shape != found[i].shape;
    if (r > best_reward || (r == best_reward && changes < best_changes)) {
      best_reward = r;
      best_changes = changes;
      best = work;
    }
  });
  return best;
}

std::vector<int> extra_blobs(const Prompt& p, const std::vector<Detection>& assigned) {
  std::vector<int> kept(assigned.size()), extras;
  std::iota(kept.begin(), kept.end(), 0);
  auto score_of = [&](const std::vector<int>& which) {
    std::vector<Detection> d;
    d.reserve(which.size());
    for (int i : which) d.push_back(assigned[size_t(i)]);
    return score(p, d).reward;
  };
  double current = score_of(kept);
  while (!kept.empty()) {
    size_t best = 0;
    double best_reward = -1e300;
    for (size_t k = 0; k < kept.size(); ++k) {
      auto without = kept;
      without.erase(without.begin() + long(k));
      const double r = score_of(without);
      if (r > best_reward) best_reward = r, best = k;
    }
    if (best_reward < current) break;
    current = best_reward;
    extras.push_back(kept[best]);
    kept.erase(kept.begin() + long(best));
  }
  std::sort(extras.begin(), extras.end());
  return extras;
}

double best_reward_over_shapes(const Prompt& p, const std::vector<Detection>& found) {
  return score(p, best_shapes(p, found)).reward;
}

}  // namespace spotlight::scene

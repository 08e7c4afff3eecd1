#include "models/scene/reward.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

namespace spotlight::scene {

Relations relative_position(const Detection& a, const Detection& b) {
  return relative_position(a.box(), b.box());
}

Score score(const Prompt& p, const std::vector<Detection>& found) {
  std::array<std::vector<const Detection*>, kNumShapes> objects;
  for (const Detection& d : found) objects[static_cast<int>(d.shape)].push_back(&d);

  Score out{0, true};
  std::vector<double> terms;
  // matched_groups[i]: clause i's objects if it was matched, else nothing.
  std::vector<std::optional<std::vector<const Detection*>>> matched_groups;
  for (const Clause& req : p.include) {
    const auto& group = objects[static_cast<int>(req.shape)];
    const int n = static_cast<int>(group.size());
    const double count = req.count;
    bool matched = true;
    terms.push_back(1 - std::abs(req.count - n) / count);
    if (n != req.count) {
      out.strict = matched = false;
      if (req.color || req.relation) terms.push_back(0.0);
    } else {
      if (req.color) {
        const int m =
            static_cast<int>(std::count_if(group.begin(), group.end(), [&](const Detection* d) {
              return d->color == *req.color;
            }));
        terms.push_back(1 - std::abs(req.count - m) / count);
        if (m != req.count) out.strict = matched = false;
      }
      if (req.relation && matched) {
        const int t = req.relation_target;
        if (t < 0 || t >= static_cast<int>(matched_groups.size()) || !matched_groups[t]) {
          out.strict = matched = false;
          terms.push_back(0.0);
        } else {
          for (const Detection* obj : group)
            for (const Detection* target : *matched_groups[t])
              if (!relative_position(*obj, *target).contains(*req.relation)) matched = false;
          if (!matched) out.strict = false;
          terms.push_back(matched ? 1.0 : 0.0);
        }
      }
    }
    matched_groups.push_back(matched ? std::optional(group) : std::nullopt);
  }
  for (const Clause& ex : p.exclude)
    if (static_cast<int>(objects[static_cast<int>(ex.shape)].size()) >= ex.count)
      out.strict = false;

  if (!terms.empty()) {
    double sum = 0;
    for (double t : terms) sum += t;
    out.reward = sum / static_cast<double>(terms.size());
  }
  return out;
}

Score score_image(const Prompt& p, const float* chw, int size) {
  return score(p, detect(chw, size));
}

}  // namespace spotlight::scene

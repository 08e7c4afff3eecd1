// Seed selection, the planner's rule: of K explored seeds of one prompt, keep
// the G whose rewards spread the most, so a group-relative update gets strong
// advantages instead of the near-zero ones of a group that all scored alike.
// Plain C++.
#pragma once

#include <cstddef>
#include <vector>

namespace spotlight::stats {

// Indices of the `g` of `rewards` with the largest variance. A subset of
// maximal variance always consists of the top m and the bottom g - m values
// for some m, so every split is tried and the best kept (ties: the more
// even split, then the lower indices). Throws std::invalid_argument when g is
// 0 or larger than rewards.size(). The indices come back in ascending order.
std::vector<size_t> max_variance_subset(const std::vector<double>& rewards, size_t g);

// The population variance of `values` (0 for an empty one).
double variance(const std::vector<double>& values);

}  // namespace spotlight::stats

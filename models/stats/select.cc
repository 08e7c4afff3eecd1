#include "models/stats/select.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spotlight::stats {

double variance(const std::vector<double>& values) {
  if (values.empty()) return 0;
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return sum / double(values.size());
}

std::vector<size_t> max_variance_subset(const std::vector<double>& rewards, size_t g) {
  const size_t k = rewards.size();
  if (g == 0 || g > k)
    throw std::invalid_argument("max_variance_subset: cannot keep " + std::to_string(g) + " of " +
                                std::to_string(k) + " values");
  // Ascending by reward; a stable sort keeps equal rewards in index order.
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rewards[a] < rewards[b]; });
  std::vector<size_t> best;
  double best_var = -1;
  size_t best_skew = k;
  for (size_t top = 0; top <= g; ++top) {
    std::vector<size_t> pick(order.begin(), order.begin() + long(g - top));  // the bottom g - top
    pick.insert(pick.end(), order.end() - long(top), order.end());           // the top `top`
    std::vector<double> values;
    for (size_t i : pick) values.push_back(rewards[i]);
    const double var = variance(values);
    const size_t skew = size_t(std::abs(long(2 * top) - long(g)));
    // Strictly larger variance wins; within rounding, the more even split.
    if (var > best_var + 1e-12 || (var > best_var - 1e-12 && skew < best_skew)) {
      best_var = var;
      best_skew = skew;
      best = std::move(pick);
    }
  }
  std::sort(best.begin(), best.end());
  return best;
}

}  // namespace spotlight::stats

#include "models/stats/rank.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace spotlight::stats {

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double avg = (double(i) + double(j)) / 2.0 + 1.0;  // ranks are 1-based
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = avg;
    i = j + 1;
  }
  return ranks;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("pearson: the two series differ in length");
  const size_t n = a.size();
  if (n < 2) return 0;
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  if (saa == 0 || sbb == 0) return 0;
  return sab / std::sqrt(saa * sbb);
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("spearman: the two series differ in length");
  return pearson(average_ranks(a), average_ranks(b));
}

std::pair<double, int> mean_group_spearman(const std::vector<double>& a, const std::vector<double>& b, int group) {
  if (a.size() != b.size() || group < 2 || a.size() % group != 0)
    throw std::invalid_argument("mean_group_spearman: series must be equal multiples of the group size");
  double sum = 0;
  int counted = 0;
  for (size_t at = 0; at < a.size(); at += group) {
    std::vector<double> ga(a.begin() + at, a.begin() + at + group), gb(b.begin() + at, b.begin() + at + group);
    auto constant = [](const std::vector<double>& v) {
      return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
    };
    if (constant(ga) || constant(gb)) continue;
    sum += spearman(ga, gb);
    ++counted;
  }
  return {counted ? sum / counted : 0.0, counted};
}

}  // namespace spotlight::stats

// The planner's seed selection: the G of K rewards with the largest spread.
#include "models/stats/select.h"

#include <gtest/gtest.h>

#include <random>

using namespace spotlight::stats;

namespace {

// The largest variance of any g of `r`, by trying every subset.
double brute_force_max_variance(const std::vector<double>& r, size_t g) {
  double best = -1;
  for (unsigned mask = 0; mask < (1u << r.size()); ++mask) {
    if (size_t(__builtin_popcount(mask)) != g) continue;
    std::vector<double> v;
    for (size_t i = 0; i < r.size(); ++i)
      if (mask & (1u << i)) v.push_back(r[i]);
    best = std::max(best, variance(v));
  }
  return best;
}

}  // namespace

TEST(Select, KeepsTheExtremesOfAGroup) {
  // Two good and two bad samples among middling ones: keep exactly those.
  EXPECT_EQ(max_variance_subset({0.5, 1.0, 0.0, 0.5, 1.0, 0.0}, 4),
            (std::vector<size_t>{1, 2, 4, 5}));
  // One outlier: the best subset is lopsided, the outlier and the far side.
  EXPECT_EQ(max_variance_subset({0.0, 0.0, 0.0, 0.0, 1.0, 0.1}, 2), (std::vector<size_t>{0, 4}));
  // All alike: every subset is as good; the even split of the (stable) order is kept.
  EXPECT_EQ(max_variance_subset({0.3, 0.3, 0.3, 0.3}, 2), (std::vector<size_t>{0, 3}));
  EXPECT_EQ(max_variance_subset({0.2, 0.9}, 2), (std::vector<size_t>{0, 1}));
}

TEST(Select, MatchesEverySubsetTriedByBruteForce) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> level(0,
                                           4);  // GenEval-like partial credit: few distinct values
  for (int trial = 0; trial < 200; ++trial) {
    const size_t k = 4 + size_t(trial % 9), g = 2 + size_t(trial % (k - 1));
    std::vector<double> r(k);
    for (auto& x : r)
      x = trial % 2 ? level(gen) / 4.0 : std::uniform_real_distribution<double>(0, 1)(gen);
    const auto pick = max_variance_subset(r, g);
    ASSERT_EQ(pick.size(), g);
    std::vector<double> v;
    for (size_t i : pick) v.push_back(r[i]);
    EXPECT_NEAR(variance(v), brute_force_max_variance(r, g), 1e-12) << "trial " << trial;
    for (size_t i = 1; i < pick.size(); ++i)
      EXPECT_LT(pick[i - 1], pick[i]);  // distinct, ascending
  }
}

TEST(Select, RefusesImpossibleSizes) {
  EXPECT_THROW(max_variance_subset({1, 2, 3}, 0), std::invalid_argument);
  EXPECT_THROW(max_variance_subset({1, 2, 3}, 4), std::invalid_argument);
}

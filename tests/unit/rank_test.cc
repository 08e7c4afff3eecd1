#include <gtest/gtest.h>

#include "models/stats/rank.h"

using namespace spotlight::stats;

TEST(Rank, TiesGetTheirAverageRank) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
}

TEST(Rank, SpearmanOfMonotoneReversedAndTiedSeries) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 40, 90, 160}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0.0);  // no variance: no correlation
  // A textbook case with ties: rho = Pearson on average ranks.
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 0.9486832980505138, 1e-12);
  EXPECT_THROW(spearman({1, 2}, {1}), std::invalid_argument);
}

TEST(Rank, GroupSpearmanSkipsConstantGroups) {
  auto [rho, n] = mean_group_spearman({1, 2, 3, 5, 5, 5, 1, 2, 3}, {1, 2, 3, 1, 2, 3, 3, 2, 1}, 3);
  EXPECT_EQ(n, 2);
  EXPECT_DOUBLE_EQ(rho, 0.0);  // (+1 + -1) / 2
}

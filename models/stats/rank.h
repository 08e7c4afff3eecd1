// Rank statistics for seed exploration: do rewards under one set of weights
// rank (prompt, seed) pairs the way the next weights do? Plain C++.
#pragma once

#include <vector>

namespace spotlight::stats {

// Ranks 1..n with ties given their average rank (as Spearman's rho needs).
std::vector<double> average_ranks(const std::vector<double>& values);

// Pearson correlation; 0 when either side has no variance.
double pearson(const std::vector<double>& a, const std::vector<double>& b);

// Spearman's rho: Pearson on average ranks. Throws std::invalid_argument on
// different lengths.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// Mean Spearman rho over consecutive groups of `group` pairs (one prompt's
// seeds each), skipping groups where either side is constant; returns
// {mean rho, groups counted}.
std::pair<double, int> mean_group_spearman(const std::vector<double>& a, const std::vector<double>& b, int group);

}  // namespace spotlight::stats

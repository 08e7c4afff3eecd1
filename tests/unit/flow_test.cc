// Flow matching and the Flow-GRPO SDE step against closed forms
// (reference/dit_rl.md §1.2-1.4, §6 tests 1, 3 and 4).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "models/flow.h"
#include "models/grpo.h"

using namespace spotlight::models;

namespace {

// Data x0 ~ N(m, sd^2): the exact velocity E[eps - x0 | x_s = x] in closed form.
torch::Tensor exact_velocity(const torch::Tensor& x, double s, double m, double sd) {
  const double var = (1 - s) * (1 - s) * sd * sd + s * s;
  auto centred = x - (1 - s) * m;
  auto e_x0 = m + (1 - s) * sd * sd / var * centred;
  auto e_eps = s / var * centred;
  return e_eps - e_x0;
}

// Runs the sampler with the exact velocity on n 1-D samples; returns {mean, std}.
std::pair<double, double> sample_gaussian(int steps, double noise_level, int64_t n) {
  const double m = 2.0, sd = 0.5;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  auto sig = shifted_sigmas(steps, 3.0);
  auto x = torch::randn({n, 1, 1, 1}, gen, torch::kFloat64);
  for (int i = 0; i < steps; ++i) {
    const bool sde = noise_level > 0 && i < steps - 1;  // no noise on the terminal step
    auto st = sde_mean(x, exact_velocity(x, sig[i], m, sd), sig[i], sig[i + 1], sig[1], sde ? noise_level : 0.0);
    x = sde ? sde_sample(st, torch::randn({n, 1, 1, 1}, gen, torch::kFloat64)) : st.mean;
  }
  return {x.mean().item<double>(), x.std().item<double>()};
}

}  // namespace

TEST(Schedule, ShiftedSigmasRunFromOneToZeroAndDecrease) {
  auto s = shifted_sigmas(10, 3.0);
  ASSERT_EQ(s.size(), 11u);
  EXPECT_EQ(s.front(), 1.0);
  EXPECT_EQ(s.back(), 0.0);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_LT(s[i], s[i - 1]);
  // shift 3 keeps more steps at high noise: s at t = 0.5 is 0.75.
  EXPECT_NEAR(shifted_sigmas(2, 3.0)[1], 0.75, 1e-12);
  EXPECT_THROW(shifted_sigmas(0, 3.0), std::invalid_argument);
}

TEST(Schedule, StratifiedTrainingSigmasGiveEachDrawItsOwnStratum) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const int64_t batch = 1000, draws = 4;
  auto s = stratified_training_sigmas(batch, draws, gen).view({draws, batch});
  for (int64_t k = 0; k < draws; ++k) {
    auto row = s[k];
    EXPECT_GE(row.min().item<double>(), double(k) / draws);
    EXPECT_LT(row.max().item<double>(), double(k + 1) / draws);
    EXPECT_NEAR(row.mean().item<double>(), (k + 0.5) / draws, 0.01);  // uniform within: sd 0.072/sqrt(1000)
  }
  EXPECT_EQ(stratified_training_sigmas(5, 1, gen).size(0), 5);
  EXPECT_THROW(stratified_training_sigmas(5, 0, gen), std::invalid_argument);
}

TEST(Sampler, SdeReproducesAGaussianMarginalAt100Steps) {
  auto [mean, std] = sample_gaussian(100, 0.7, 200000);
  std::cout << "SDE, 100 steps: mean " << mean << " (2.0), std " << std << " (0.5)\n";
  EXPECT_NEAR(mean, 2.0, 0.02 * 2.0) << "mean " << mean;
  EXPECT_NEAR(std, 0.5, 0.02 * 0.5) << "std " << std;
}

TEST(Sampler, OdeReproducesAGaussianMarginalAt100Steps) {
  // A first-order solver under-disperses a little at 100 steps (the
  // reference's table: std 0.485), so the bound on std is 4 %.
  auto [mean, std] = sample_gaussian(100, 0.0, 200000);
  std::cout << "ODE, 100 steps: mean " << mean << " (2.0), std " << std << " (0.5)\n";
  EXPECT_NEAR(mean, 2.0, 0.02 * 2.0);
  EXPECT_NEAR(std, 0.5, 0.04 * 0.5);
}

TEST(SdeStep, ZeroNoiseLevelIsTheEulerStep) {
  auto x = torch::randn({3, 2, 4, 4}), v = torch::randn({3, 2, 4, 4});
  auto st = sde_mean(x, v, 0.6, 0.4, 0.9, 0.0);
  EXPECT_TRUE(torch::equal(st.mean, x + v * (0.4 - 0.6)));
  EXPECT_EQ(st.std_dt, 0.0);
}

TEST(SdeStep, MeanAndStdFollowFlowGrpo) {
  auto x = torch::randn({2, 1, 2, 2}, torch::kFloat64), v = torch::randn({2, 1, 2, 2}, torch::kFloat64);
  const double s = 0.8, sn = 0.6, a = 0.7, dt = sn - s;
  auto st = sde_mean(x, v, s, sn, 0.9, a);
  const double std = a * std::sqrt(s / (1 - s));
  EXPECT_NEAR(st.std, std, 1e-12);
  // std_dt is rounded to fp32 once, as the fused kernel uses it.
  EXPECT_NEAR(st.std_dt, std * std::sqrt(-dt), 1e-7 * std);
  EXPECT_EQ(st.std_dt, double(float(std * std::sqrt(-dt))));
  auto expect = x * (1 + std * std * dt / (2 * s)) + v * (1 + std * std * (1 - s) / (2 * s)) * dt;
  EXPECT_TRUE(torch::allclose(st.mean.to(torch::kFloat64), expect, 1e-5, 1e-6));
  // At s = 1 the divisor uses sigma_max, the next grid value, instead of 1 - 1 = 0.
  auto first = sde_mean(x, v, 1.0, 0.9, 0.9, a);
  EXPECT_NEAR(first.std, a * std::sqrt(1.0 / (1 - 0.9)), 1e-12);
  EXPECT_TRUE(std::isfinite(first.mean.abs().max().item<double>()));
}

TEST(LogProb, EqualsTheClosedFormGaussianDensity) {
  auto mean = torch::randn({4, 3, 2, 2});
  auto x = mean + 0.3 * torch::randn({4, 3, 2, 2});
  const double sd = 0.3;
  auto lp = step_log_prob(x, mean, sd);
  ASSERT_EQ(lp.sizes(), torch::IntArrayRef({4}));
  auto x64 = x.to(torch::kFloat64), m64 = mean.to(torch::kFloat64);
  for (int64_t b = 0; b < 4; ++b) {
    // Sum of per-element log N(x; mean, sd^2), divided by D: the mean over dims.
    double sum = 0;
    auto xb = x64[b].flatten(), mb = m64[b].flatten();
    for (int64_t i = 0; i < xb.numel(); ++i) {
      const double d = xb[i].item<double>() - mb[i].item<double>();
      sum += -d * d / (2 * sd * sd) - std::log(sd) - 0.5 * std::log(2 * M_PI);
    }
    EXPECT_NEAR(lp[b].item<double>(), sum / xb.numel(), 1e-5);
  }
  EXPECT_THROW(step_log_prob(x, mean, 0.0), std::invalid_argument);
}

TEST(Kl, ZeroForIdenticalMeansAndDeltaSquaredOverTwoStdSquared) {
  auto m = torch::randn({3, 2, 4, 4});
  EXPECT_EQ(step_kl(m, m, 0.5).abs().max().item<double>(), 0.0);
  const double delta = 0.2, std = 0.5;
  auto kl = step_kl(m + delta, m, std);
  for (int64_t b = 0; b < 3; ++b) EXPECT_NEAR(kl[b].item<double>(), delta * delta / (2 * std * std), 1e-6);
}

TEST(Advantages, GroupNormalisedClippedAndZeroForTiedGroups) {
  auto r = torch::tensor({1.0, 0.0, 1.0, 0.0, /*tied:*/ 0.5, 0.5, 0.5, 0.5});
  auto a = group_advantages(r, 4, /*global_std=*/false);
  EXPECT_NEAR(a[0].item<double>(), 0.5 / (0.5 + 1e-4), 1e-5);
  EXPECT_NEAR(a[1].item<double>(), -0.5 / (0.5 + 1e-4), 1e-5);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(a[i].item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(zero_std_fraction(r, 4), 0.5);
  EXPECT_DOUBLE_EQ(best_of_group_mean(r, 4), 0.75);  // groups' best: 1.0 and 0.5
  EXPECT_DOUBLE_EQ(best_of_group_mean(r, 2), 0.75);  // 1, 1, 0.5, 0.5
  // Global std: the whole batch's std (here 0.4330...) divides every group.
  auto g = group_advantages(r, 4, /*global_std=*/true);
  const double gstd = r.to(torch::kFloat64).std(false).item<double>();
  EXPECT_NEAR(g[0].item<double>(), 0.5 / (gstd + 1e-4), 1e-5);
  // One outlier in a large group is clipped at 5.
  std::vector<float> big(100, 0.0f);
  big[0] = 1.0f;
  auto c = group_advantages(torch::tensor(big), 100, false);
  EXPECT_FLOAT_EQ(c[0].item<float>(), 5.0f);
  EXPECT_THROW(group_advantages(torch::ones({6}), 4), std::invalid_argument);
}

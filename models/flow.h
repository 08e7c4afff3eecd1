// Rectified flow: x_s = (1 - s) x0 + s eps, v = eps - x0, s = 1 is pure noise.
// The Euler ODE step (evaluation) and Flow-GRPO's marginal-preserving SDE step
// with its Gaussian log-prob and KL (reference/dit_rl.md §1.1-1.4).
// All step arithmetic is fp32, whatever the model's dtype.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace spotlight::models {

// s_0 = 1 > s_1 > ... > s_T = 0 on a uniform t grid, shifted as SD3 does:
// s = shift t / (1 + (shift - 1) t). shift = 1 is the plain linear grid.
std::vector<double> shifted_sigmas(int steps, double shift);

// Noise level s per sample for flow-matching training: t uniform in (0, 1),
// then shifted. A pixel-space model must also learn the low-noise end, which
// SD3's logit-normal t with shift 3 almost never visits (a tiny DiT trained
// that way left visible noise in every sample: loss 1.03 at s = 0.1).
torch::Tensor sample_training_sigmas(int64_t batch, double shift, torch::Generator gen);

// draws noise levels for each of `batch` samples, [draws * batch] draw-major:
// draw k of every sample is uniform in [k / draws, (k + 1) / draws), so that a
// sample's draws cover the whole range (stratified: less variance than
// independent draws). draws = 1 is plain uniform sampling.
torch::Tensor stratified_training_sigmas(int64_t batch, int64_t draws, torch::Generator gen);

// x_s = (1 - s) x0 + s eps with s: [B].
torch::Tensor interpolate(const torch::Tensor& x0, const torch::Tensor& eps, const torch::Tensor& s);

// Mean squared error between the predicted velocity and eps - x0.
torch::Tensor flow_matching_loss(const torch::Tensor& v_pred, const torch::Tensor& x0,
                                 const torch::Tensor& eps);

struct SdeStep {
  torch::Tensor mean;    // the step mean, [B, ...]
  double std_dt = 0.0;   // std * sqrt(-dt): the transition's standard deviation
  double std = 0.0;      // std without sqrt(-dt), as Flow-GRPO's KL uses it
};

// Flow-GRPO's SDE step from noise level s to s_next < s with noise_level a:
//   std  = a sqrt(s / (1 - s')), s' = s except s' = sigma_max when s == 1
//   mean = x (1 + std^2 dt / (2 s)) + v (1 + std^2 (1 - s) / (2 s)) dt
// a = 0 gives exactly the Euler ODE step x + v dt.
SdeStep sde_mean(const torch::Tensor& x, const torch::Tensor& v, double s, double s_next,
                 double sigma_max, double noise_level);

// x_next = mean + std_dt * noise.
torch::Tensor sde_sample(const SdeStep& step, const torch::Tensor& noise);

// Per-sample Gaussian log-density of x_next under the step, averaged over every
// non-batch dimension (Flow-GRPO's convention, so ratios stay near 1). [B].
torch::Tensor step_log_prob(const torch::Tensor& x_next, const torch::Tensor& mean, double std_dt);

// Closed-form KL between two steps sharing std: mean over dims of
// (mean_a - mean_b)^2 / (2 std^2). [B].
torch::Tensor step_kl(const torch::Tensor& mean_a, const torch::Tensor& mean_b, double std);

}  // namespace spotlight::models

#include "models/flow.h"

#include <cmath>
#include <stdexcept>

#include "kernels/sde_step.h"

namespace spotlight::models {

std::vector<double> shifted_sigmas(int steps, double shift) {
  if (steps < 1) throw std::invalid_argument("shifted_sigmas: steps must be >= 1");
  if (!(shift > 0)) throw std::invalid_argument("shifted_sigmas: shift must be > 0");
  std::vector<double> s(steps + 1);
  for (int i = 0; i <= steps; ++i) {
    double t = 1.0 - double(i) / steps;
    s[i] = shift * t / (1.0 + (shift - 1.0) * t);
  }
  s[0] = 1.0;  // exact ends: the first step starts from pure noise
  s[steps] = 0.0;
  return s;
}

torch::Tensor sample_training_sigmas(int64_t batch, double shift, torch::Generator gen) {
  auto t = torch::rand({batch}, gen);
  return shift * t / (1.0 + (shift - 1.0) * t);
}

torch::Tensor stratified_training_sigmas(int64_t batch, int64_t draws, torch::Generator gen) {
  if (batch < 0 || draws < 1) throw std::invalid_argument("stratified_training_sigmas: bad batch or draws");
  auto u = torch::rand({draws, batch}, gen);
  auto k = torch::arange(draws, u.options()).view({draws, 1});
  return ((k + u) / double(draws)).flatten();
}

torch::Tensor interpolate(const torch::Tensor& x0, const torch::Tensor& eps, const torch::Tensor& s) {
  auto sv = s.view({-1, 1, 1, 1}).to(x0.dtype());
  return (1 - sv) * x0 + sv * eps;
}

torch::Tensor flow_matching_loss(const torch::Tensor& v_pred, const torch::Tensor& x0,
                                 const torch::Tensor& eps) {
  return torch::mse_loss(v_pred.to(torch::kFloat32), (eps - x0).to(torch::kFloat32));
}

SdeStep sde_mean(const torch::Tensor& x, const torch::Tensor& v, double s, double s_next,
                 double sigma_max, double noise_level) {
  // The fused kernel's coefficients (fp32, rounded once), so that this
  // differentiable composition and the rollouts' fused step agree bit for bit
  // on the mean: the GRPO ratio of an on-policy sample is then 1.
  const auto c = kernels::sde_coefficients(s, s_next, sigma_max, noise_level);
  const auto xf = x.to(torch::kFloat32), vf = v.to(torch::kFloat32);
  SdeStep out;
  out.mean = xf * c.x_coef + vf * c.v_coef;  // x * 1 is exact: the ODE step is x + v dt
  out.std = c.std;
  out.std_dt = c.std_dt;
  return out;
}

torch::Tensor sde_sample(const SdeStep& step, const torch::Tensor& noise) {
  if (step.std_dt == 0) return step.mean;
  return step.mean + noise.to(torch::kFloat32) * step.std_dt;
}

torch::Tensor step_log_prob(const torch::Tensor& x_next, const torch::Tensor& mean, double std_dt) {
  if (!(std_dt > 0)) throw std::invalid_argument("step_log_prob: the step has no noise (ODE step)");
  auto d = x_next.to(torch::kFloat32) - mean;
  auto lp = -(d * d) / (2.0 * std_dt * std_dt) - std::log(std_dt) - 0.5 * std::log(2.0 * M_PI);
  return lp.flatten(1).mean(1);
}

torch::Tensor step_kl(const torch::Tensor& mean_a, const torch::Tensor& mean_b, double std) {
  if (!(std > 0)) throw std::invalid_argument("step_kl: the step has no noise (ODE step)");
  auto d = mean_a - mean_b;
  return (d * d).flatten(1).mean(1) / (2.0 * std * std);
}

}  // namespace spotlight::models

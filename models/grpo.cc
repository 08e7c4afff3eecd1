#include "models/grpo.h"

#include <stdexcept>

namespace spotlight::models {

torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, bool global_std,
                               double clip) {
  if (group_size < 1 || rewards.dim() != 1 || rewards.size(0) % group_size != 0)
    throw std::invalid_argument("group_advantages: rewards must be [groups * group_size]");
  auto r = rewards.to(torch::kFloat64).view({-1, group_size});
  auto mean = r.mean(1, true);
  auto std = global_std ? r.std(/*unbiased=*/false).expand_as(mean) : r.std(1, /*unbiased=*/false, true);
  auto adv = (r - mean) / (std + 1e-4);
  // Tied groups carry no signal; exact zeros also guard against rounding.
  auto tied = (r.amax(1, true) - r.amin(1, true)).eq(0);
  adv = torch::where(tied.expand_as(adv), torch::zeros_like(adv), adv);
  return adv.clamp(-clip, clip).view({-1}).to(torch::kFloat32);
}

double zero_std_fraction(const torch::Tensor& rewards, int64_t group_size) {
  auto r = rewards.to(torch::kFloat64).view({-1, group_size});
  auto tied = (r.amax(1) - r.amin(1)).eq(0);
  return tied.to(torch::kFloat64).mean().item<double>();
}

double best_of_group_mean(const torch::Tensor& rewards, int64_t group_size) {
  return rewards.to(torch::kFloat64).view({-1, group_size}).amax(1).mean().item<double>();
}

torch::Tensor grpo_step_loss(DiT& model, DiT* ref, const torch::Tensor& tokens, const Rollout& rollout,
                             size_t k, const torch::Tensor& advantages, const SamplerOptions& sampler,
                             const GrpoOptions& opts, GrpoStepStats* stats) {
  if (rollout.latents.empty() || !rollout.log_probs.defined())
    throw std::invalid_argument("grpo_step_loss: the rollout was not recorded");
  if (k >= rollout.sde_steps.size()) throw std::out_of_range("grpo_step_loss: no such SDE step");
  const int i = rollout.sde_steps[k];
  const auto& sig = rollout.sigmas;
  const auto& x = rollout.latents[i];
  const auto& x_next = rollout.latents[i + 1];
  // The rollout's velocity recipe (CFG included); the null branch is detached.
  auto step = sde_mean(x, guided_velocity(model, x, sig[i], tokens, sampler.guidance, nullptr, /*null_grad=*/false),
                       sig[i], sig[i + 1], sig[1], sampler.noise_level);
  auto logp = step_log_prob(x_next, step.mean, step.std_dt);
  auto ratio = torch::exp(logp - rollout.log_probs.select(1, int64_t(k)));
  auto adv = advantages.to(ratio.device());
  auto unclipped = -adv * ratio;
  auto clipped = -adv * torch::clamp(ratio, 1.0 - opts.clip_range, 1.0 + opts.clip_range);
  auto policy = torch::max(unclipped, clipped).mean();
  auto loss = policy;
  torch::Tensor kl;
  if (opts.beta > 0) {
    if (!ref) throw std::invalid_argument("grpo_step_loss: beta > 0 needs a reference model");
    torch::Tensor ref_mean;
    {
      torch::NoGradGuard no_grad;
      ref_mean = sde_mean(x, guided_velocity(*ref, x, sig[i], tokens, sampler.guidance), sig[i], sig[i + 1], sig[1],
                          sampler.noise_level)
                     .mean;
    }
    kl = step_kl(step.mean, ref_mean, step.std).mean();
    loss = loss + opts.beta * kl;
  }
  if (stats) {
    torch::NoGradGuard no_grad;
    stats->policy_loss = policy.item<double>();
    stats->kl = kl.defined() ? kl.item<double>() : 0.0;
    auto dev = (ratio - 1).abs();
    stats->clip_fraction = dev.gt(opts.clip_range).to(torch::kFloat64).mean().item<double>();
    stats->max_ratio_deviation = dev.max().item<double>();
  }
  return loss;
}

}  // namespace spotlight::models

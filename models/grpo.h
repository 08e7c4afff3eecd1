// GRPO for flow models (Flow-GRPO, reference/dit_rl.md §1.5-1.6): group-normalised
// advantages and the clipped-ratio loss of one trained denoising step.
#pragma once

#include <torch/torch.h>

#include "models/dit.h"
#include "models/sampler.h"

namespace spotlight::models {

// rewards: [N], consecutive groups of group_size samples of one prompt.
// A = (r - mean_group) / (std + 1e-4), std over the group or, with global_std,
// over the whole batch (Flow-GRPO's SD3 configs); clipped to [-clip, clip].
// A group whose rewards all tie gets A = 0 (no signal).
torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, bool global_std = true,
                               double clip = 5.0);

// Fraction of groups whose rewards all tie (Flow-GRPO's zero_std_ratio).
double zero_std_fraction(const torch::Tensor& rewards, int64_t group_size);

// Mean over groups of the group's best reward: what picking the best of G
// seeds per prompt would score, the ceiling that any reweighting of the
// policy's own samples moves towards (the batch mean is the floor).
double best_of_group_mean(const torch::Tensor& rewards, int64_t group_size);

struct GrpoOptions {
  double clip_range = 1e-4;  // PPO clip on the per-step ratio (log-probs are means over dims)
  double beta = 0.0;         // weight of the KL to the reference policy
};

struct GrpoStepStats {
  double policy_loss = 0, kl = 0, clip_fraction = 0, max_ratio_deviation = 0;
};

// Re-runs the model on the recorded x_i of SDE step k (an index into
// rollout.sde_steps), rebuilds the step mean, and returns
//   mean_b max(-A ρ, -A clip(ρ, 1 - ε, 1 + ε)) + β KL(mean_θ, mean_ref)
// with ρ = exp(logp_θ(x_{i+1}) - logp_old). `ref` may be empty when β = 0.
torch::Tensor grpo_step_loss(DiT& model, DiT* ref, const torch::Tensor& tokens, const Rollout& rollout,
                             size_t k, const torch::Tensor& advantages, const SamplerOptions& sampler,
                             const GrpoOptions& opts, GrpoStepStats* stats = nullptr);

}  // namespace spotlight::models

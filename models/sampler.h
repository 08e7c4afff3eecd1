// Seeded rollouts of the DiT: the initial noise and every SDE step's noise come
// from counter-based Philox keyed by (seed, stream, element), so one
// (prompt, seed, weights) gives the same image in any batch, on any machine.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "models/dit.h"
#include "models/flow.h"
#include "kernels/ops.h"

namespace spotlight::models {

// Stream 0 is a sample's initial noise; stream i + 1 the noise of step i.
constexpr uint32_t kInitialNoiseStream = 0;
inline uint32_t step_noise_stream(int step) { return uint32_t(step) + 1; }

// Standard-normal noise [B, sample_shape...], sample b keyed by seeds[b], the
// same bits on every device (kernels/ops.h).
using kernels::seed_noise;

struct SamplerOptions {
  int steps = 10;
  double shift = 3.0;
  double noise_level = 0.7;  // Flow-GRPO's a; 0 gives the Euler ODE sampler
  int sde_begin = 0;         // stochastic steps are [sde_begin, sde_end); others are ODE
  int sde_end = -1;          // -1: steps - 1, so that no noise lands on the terminal step
  bool record = false;       // keep latents and log-probs for GRPO
  // Classifier-free guidance scale w: v = v_null + w (v_prompt - v_null), with
  // the null prompt all padding. 1 runs the prompt branch alone (no guidance);
  // a model needs pre-training with prompt dropout for w > 1 to help.
  double guidance = 1.0;

  int resolved_sde_end() const { return sde_end < 0 ? steps - 1 : sde_end; }
  bool is_sde(int step) const {
    return noise_level > 0 && step >= sde_begin && step < resolved_sde_end();
  }
  void validate() const;  // throws std::invalid_argument
};

struct Rollout {
  torch::Tensor images;                // [B, C, H, W] at s = 0, fp32
  std::vector<double> sigmas;          // s_0 = 1 ... s_T = 0
  std::vector<torch::Tensor> latents;  // record: x_0 ... x_T
  std::vector<int> sde_steps;          // the stochastic steps, in order
  torch::Tensor log_probs;             // record: [B, sde_steps.size()]
};

// The velocity the sampler follows at noise level s: the prompt-conditioned
// prediction, or with guidance != 1 the CFG mix of it and the null prompt's,
// computed in one forward pass over [x; x]. With `null_grad` false (two
// passes then) the null branch's weights take no gradient (Flow-GRPO's
// training recipe): for an x without a graph the branch runs under no_grad;
// for one with a graph (the DRaFT tail) the gradient still flows back
// through it to x.
torch::Tensor guided_velocity(DiT& model, const torch::Tensor& x, double s, const torch::Tensor& tokens,
                              double guidance, const SequenceParallel* sp = nullptr, bool null_grad = true);
// The same with one noise level per sample, s: [B] (DiffusionNFT trains on
// the guided velocity at random noise levels).
torch::Tensor guided_velocity(DiT& model, const torch::Tensor& x, const torch::Tensor& s, const torch::Tensor& tokens,
                              double guidance, const SequenceParallel* sp = nullptr, bool null_grad = true);

// |v - v_ref|^2, the mean over every element (in fp32), where v_ref is
// `reference`'s guided velocity at the same (x, s, tokens), computed without a
// gradient: the flow-matching form of a pull towards a fixed reference model
// (--reference-weight of nft and of draft).
torch::Tensor reference_mse(const torch::Tensor& v, DiT& reference, const torch::Tensor& x, const torch::Tensor& s,
                            const torch::Tensor& tokens, double guidance);

// One denoising step i: x_i -> x_{i+1} (a resumable explorer calls this step by
// step and commits x between calls). `log_prob`, when given, receives the
// step's per-sample log-prob (SDE steps only).
torch::Tensor denoise_step(DiT& model, const torch::Tensor& x, const torch::Tensor& tokens,
                           const std::vector<uint64_t>& seeds, const std::vector<double>& sigmas,
                           int step, const SamplerOptions& opts, torch::Tensor* log_prob = nullptr,
                           const SequenceParallel* sp = nullptr);

// The initial latent x_0 = noise of stream 0.
torch::Tensor initial_latent(const DiTConfig& cfg, const std::vector<uint64_t>& seeds,
                             torch::Device device = torch::kCPU);

// A whole rollout without gradients. tokens: [B, L]; seeds: B values.
Rollout sample(DiT& model, const torch::Tensor& tokens, const std::vector<uint64_t>& seeds,
               const SamplerOptions& opts);

}  // namespace spotlight::models

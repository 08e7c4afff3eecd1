#include "models/sampler.h"

#include <stdexcept>
#include <vector>

namespace spotlight::models {

namespace {

// Clears requires_grad on the model's trainable weights while it lives, so a
// forward pass records the graph through its inputs alone; restores them on
// the way out, exceptions included.
class FrozenWeights {
 public:
  explicit FrozenWeights(DiT& model) {
    for (auto& p : model->parameters())
      if (p.requires_grad()) {
        p.set_requires_grad(false);
        frozen_.push_back(p);
      }
  }
  ~FrozenWeights() {
    for (auto& p : frozen_) p.set_requires_grad(true);
  }
  FrozenWeights(const FrozenWeights&) = delete;
  FrozenWeights& operator=(const FrozenWeights&) = delete;

 private:
  std::vector<torch::Tensor> frozen_;
};

}  // namespace

void SamplerOptions::validate() const {
  if (steps < 1) throw std::invalid_argument("sampler: steps must be >= 1");
  if (!(shift > 0)) throw std::invalid_argument("sampler: shift must be > 0");
  if (noise_level < 0) throw std::invalid_argument("sampler: noise_level must be >= 0");
  if (!(guidance >= 0)) throw std::invalid_argument("sampler: guidance must be >= 0");
  if (sde_begin < 0 || resolved_sde_end() > steps || sde_begin > resolved_sde_end())
    throw std::invalid_argument("sampler: the SDE window must lie inside [0, steps]");
}

torch::Tensor initial_latent(const DiTConfig& cfg, const std::vector<uint64_t>& seeds, torch::Device device) {
  return seed_noise(seeds, kInitialNoiseStream, {cfg.channels, cfg.image_size, cfg.image_size}, device);
}

torch::Tensor guided_velocity(DiT& model, const torch::Tensor& x, const torch::Tensor& s, const torch::Tensor& tokens,
                              double guidance, const SequenceParallel* sp, bool null_grad) {
  const auto B = x.size(0);
  if (s.dim() != 1 || s.size(0) != B) throw std::invalid_argument("guided_velocity: one noise level per sample");
  if (guidance == 1.0) return model->forward(x, s, tokens, sp);
  const auto null_tokens = torch::zeros_like(tokens);
  torch::Tensor v_prompt, v_null;
  if (!null_grad && torch::GradMode::is_enabled()) {
    v_prompt = model->forward(x, s, tokens, sp);
    if (x.requires_grad()) {
      // x came out of earlier steps with their graph (DRaFT's tail): the
      // null branch keeps its path to x, only its weights take no gradient.
      FrozenWeights frozen(model);
      v_null = model->forward(x, s, null_tokens, sp);
    } else {
      torch::NoGradGuard no_grad;
      v_null = model->forward(x, s, null_tokens, sp);
    }
  } else {
    // One pass over both branches; every layer is batch-invariant (dit.cc),
    // so each half has the bits a separate pass would give.
    auto v = model->forward(torch::cat({x, x}), torch::cat({s, s}), torch::cat({tokens, null_tokens}), sp);
    v_prompt = v.narrow(0, 0, B);
    v_null = v.narrow(0, B, B);
  }
  return v_null + guidance * (v_prompt - v_null);
}

torch::Tensor guided_velocity(DiT& model, const torch::Tensor& x, double s, const torch::Tensor& tokens,
                              double guidance, const SequenceParallel* sp, bool null_grad) {
  return guided_velocity(model, x, torch::full({x.size(0)}, s, x.options()), tokens, guidance, sp, null_grad);
}

torch::Tensor reference_mse(const torch::Tensor& v, DiT& reference, const torch::Tensor& x, const torch::Tensor& s,
                            const torch::Tensor& tokens, double guidance) {
  torch::Tensor v_ref;
  {
    torch::NoGradGuard no_grad;
    v_ref = guided_velocity(reference, x, s, tokens, guidance).to(torch::kFloat32);
  }
  return (v.to(torch::kFloat32) - v_ref).pow(2).mean();
}

torch::Tensor denoise_step(DiT& model, const torch::Tensor& x, const torch::Tensor& tokens,
                           const std::vector<uint64_t>& seeds, const std::vector<double>& sigmas,
                           int step, const SamplerOptions& opts, torch::Tensor* log_prob,
                           const SequenceParallel* sp) {
  const double s = sigmas.at(step), s_next = sigmas.at(step + 1);
  auto v = guided_velocity(model, x, s, tokens, opts.guidance, sp);
  const bool sde = opts.is_sde(step);
  // One fused pass (kernels/sde_step.h): the same mean and x_next bits as
  // sde_mean + sde_sample, and the log-prob accumulated in double.
  const auto c = kernels::sde_coefficients(s, s_next, sigmas.at(1), sde ? opts.noise_level : 0.0);
  torch::Tensor noise;
  if (sde) noise = seed_noise(seeds, step_noise_stream(step), x.sizes().slice(1), x.device());
  auto r = kernels::sde_step(x, v, noise, c, /*want_mean=*/false, /*want_log_prob=*/sde && log_prob);
  if (sde && log_prob) *log_prob = r.log_prob;
  return r.x_next;
}

Rollout sample(DiT& model, const torch::Tensor& tokens, const std::vector<uint64_t>& seeds,
               const SamplerOptions& opts) {
  opts.validate();
  if (int64_t(seeds.size()) != tokens.size(0))
    throw std::invalid_argument("sample: one seed per prompt row is needed");
  torch::NoGradGuard no_grad;
  Rollout r;
  r.sigmas = shifted_sigmas(opts.steps, opts.shift);
  auto x = initial_latent(model->config(), seeds, tokens.device());
  if (opts.record) r.latents.push_back(x);
  std::vector<torch::Tensor> lps;
  for (int i = 0; i < opts.steps; ++i) {
    torch::Tensor lp;
    x = denoise_step(model, x, tokens, seeds, r.sigmas, i, opts, opts.record ? &lp : nullptr);
    if (opts.is_sde(i)) {
      r.sde_steps.push_back(i);
      if (opts.record) lps.push_back(lp);
    }
    if (opts.record) r.latents.push_back(x);
  }
  r.images = x;
  if (opts.record && !lps.empty()) r.log_probs = torch::stack(lps, 1);
  return r;
}

}  // namespace spotlight::models

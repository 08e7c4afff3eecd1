#include "models/nft.h"

#include <stdexcept>

#include "models/flow.h"
#include "models/sampler.h"

namespace spotlight::models {

torch::Tensor nft_optimality(const torch::Tensor& advantages, bool positive_only, double clip) {
  if (!(clip > 0)) throw std::invalid_argument("nft_optimality: the advantage clip must be positive");
  return 0.5 + 0.5 * advantages.to(torch::kFloat32).clamp(positive_only ? 0.0 : -clip, clip) / clip;
}

torch::Tensor nft_selected_optimality(const std::vector<bool>& selected) {
  auto r = torch::full({int64_t(selected.size())}, 0.5, torch::kFloat32);
  for (size_t i = 0; i < selected.size(); ++i)
    if (selected[i]) r[int64_t(i)] = 1.0;
  return r;
}

torch::Tensor nft_loss(DiT& model, DiT& old, const torch::Tensor& x0, const torch::Tensor& tokens,
                       const torch::Tensor& r, const torch::Tensor& s, const torch::Tensor& eps,
                       double beta, NftLossStats* stats, double guidance, DiT* reference,
                       double reference_weight, bool null_grad) {
  if (!(beta > 0)) throw std::invalid_argument("nft_loss: beta must be positive");
  if (reference_weight < 0 || (reference_weight > 0 && !reference))
    throw std::invalid_argument("nft_loss: a positive reference weight needs a reference model");
  const int64_t b = x0.size(0);
  if (r.dim() != 1 || r.size(0) != b || s.size(0) != b || tokens.size(0) != b)
    throw std::invalid_argument("nft_loss: x0, tokens, r and s must share the batch dimension");
  auto x = interpolate(x0, eps, s);
  torch::Tensor v_old;
  {
    torch::NoGradGuard no_grad;
    v_old = guided_velocity(old, x, s, tokens, guidance).to(torch::kFloat32);
  }
  auto v = guided_velocity(model, x, s, tokens, guidance, nullptr, null_grad).to(torch::kFloat32);
  auto target = (eps - x0).to(torch::kFloat32);
  auto v_pos = (1 - beta) * v_old + beta * v;
  auto v_neg = (1 + beta) * v_old - beta * v;
  auto pos = (v_pos - target).pow(2).flatten(1).mean(1);  // [B]
  auto neg = (v_neg - target).pow(2).flatten(1).mean(1);
  auto rr = r.to(pos.device(), torch::kFloat32);
  auto loss = (rr * pos + (1 - rr) * neg).mean();
  torch::Tensor ref_mse;
  if (reference_weight > 0) {
    ref_mse = reference_mse(v, *reference, x, s, tokens, guidance);
    loss = loss + reference_weight * ref_mse;
  }
  if (stats) {
    torch::NoGradGuard no_grad;
    stats->loss = loss.item<double>();
    stats->positive_mse = (rr * pos).sum().item<double>() / std::max(1e-9, rr.sum().item<double>());
    stats->negative_mse =
        ((1 - rr) * neg).sum().item<double>() / std::max(1e-9, (1 - rr).sum().item<double>());
    stats->reference_mse = ref_mse.defined() ? ref_mse.item<double>() : 0.0;
  }
  return loss;
}

}  // namespace spotlight::models

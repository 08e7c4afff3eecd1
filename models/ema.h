// An exponential moving average of a model's weights, kept in a second model
// of the same configuration so that it can be sampled and saved as is.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "models/dit.h"

namespace spotlight::models {

// Copies `from`'s parameters into `to`, a model of the same configuration.
inline void copy_parameters(DiT& from, DiT& to) {
  torch::NoGradGuard no_grad;
  auto src = from->parameters();
  auto dst = to->parameters();
  if (src.size() != dst.size())
    throw std::invalid_argument("copy_parameters: the models' configurations differ");
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

class Ema {
 public:
  Ema(DiT& model, double decay) : decay_(decay), shadow_(model->config()) {
    shadow_->to(model->parameters().front().device());
    copy_from(model);
  }

  // The decay ramps up as min(decay, (1 + n) / (10 + n)) over the n updates
  // so far, so that a short run's average is not dominated by the random init.
  void update(DiT& model) {
    torch::NoGradGuard no_grad;
    ++updates_;
    const double d = std::min(decay_, (1.0 + updates_) / (10.0 + updates_));
    auto src = model->parameters();
    auto dst = shadow_->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].mul_(d).add_(src[i].detach(), 1.0 - d);
  }

  void copy_from(DiT& model) { copy_parameters(model, shadow_); }

  DiT& model() { return shadow_; }

 private:
  double decay_;
  int64_t updates_ = 0;
  DiT shadow_;
};

}  // namespace spotlight::models

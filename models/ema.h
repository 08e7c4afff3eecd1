// An exponential moving average of a model's weights, kept in a second model
// of the same configuration so that it can be sampled and saved as is.
#pragma once

#include <torch/torch.h>

#include "models/dit.h"

namespace spotlight::models {

class Ema {
 public:
  Ema(DiT& model, double decay) : decay_(decay), shadow_(model->config()) { copy_from(model); }

  void update(DiT& model) {
    torch::NoGradGuard no_grad;
    auto src = model->parameters();
    auto dst = shadow_->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].mul_(decay_).add_(src[i].detach(), 1.0 - decay_);
  }

  void copy_from(DiT& model) {
    torch::NoGradGuard no_grad;
    auto src = model->parameters();
    auto dst = shadow_->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }

  DiT& model() { return shadow_; }

 private:
  double decay_;
  DiT shadow_;
};

}  // namespace spotlight::models

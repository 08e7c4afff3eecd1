// The diffusion transformer: an MMDiT (SD3 / Qwen-Image style) with
// adaLN-Zero blocks and joint attention over text and image tokens, predicting
// the rectified-flow velocity v = eps - x0.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "models/ulysses.h"

namespace spotlight::models {

struct DiTConfig {
  std::string name = "tiny";
  int64_t image_size = 32;  // square images, pixels
  int64_t channels = 3;     // RGB in [-1, 1]
  int64_t patch = 4;        // patch side: (image_size / patch)^2 image tokens
  int64_t dim = 96;         // hidden width of both streams
  int64_t depth = 3;        // joint (dual-stream) blocks
  int64_t heads = 4;
  int64_t mlp_ratio = 4;
  int64_t vocab = 64;       // token ids the text encoder accepts
  int64_t text_len = 12;    // prompt tokens, padded with id 0
  int64_t text_depth = 2;   // self-attention layers of the text encoder
  // Pixel head: hidden channels of two 3x3 convolutions that refine the
  // unpatchified velocity across patch borders (0: none, the DiT as in SD3).
  // A patch's pixels otherwise come from its token alone, so edges follow the
  // patch grid; the head sees each pixel's neighbours in the next patches.
  int64_t pixel_head = 0;
  int64_t pixel_features = 8;  // per-pixel features the last layer adds for the head
  // Two experts, split by noise level as Wan 2.2's denoisers are: below this
  // noise level a second full set of weights, the low-noise expert, predicts
  // the velocity (0: one set). The late steps of a rollout draw the fine
  // detail (here, a blob's outline: the detector's shape call), the early ones
  // the layout (counts, colours, places); post-training the low-noise expert
  // alone changes the one and leaves the other as pre-trained.
  double expert_boundary = 0;

  int64_t image_tokens() const { return (image_size / patch) * (image_size / patch); }
  // Throws std::invalid_argument on an inconsistent configuration.
  void validate() const;
};

// Named configurations: "tiny" (about 1 M parameters, 32x32 RGB, for a CPU)
// and "base" (about 100 M parameters, 64x64 RGB, for the GPU host).
// Throws std::invalid_argument for an unknown name.
DiTConfig dit_config(const std::string& name);

// softmax(q k^T / sqrt(d)) v over [B, heads, N, d] with an additive key mask
// [B, 1, 1, N] (0 or -inf); written out because LibTorch 1.13 has no public SDPA.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& key_mask);

// Two-layer MLP with tanh-GELU (the fused kernel, kernels/gelu.h), ratio `ratio`.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t dim, int64_t ratio);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Mlp);

// The prompt encoder, trained with the DiT: token + position embeddings and
// pre-LN self-attention layers. Returns per-token features and a pooled vector.
class TextEncoderImpl : public torch::nn::Module {
 public:
  explicit TextEncoderImpl(const DiTConfig& cfg);
  // tokens: [B, L] int64, 0 = padding. Returns {features [B, L, D], pooled [B, D]}.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& tokens,
                                                  const torch::Tensor& key_mask);

 private:
  int64_t heads_;
  torch::nn::Embedding embed_{nullptr};
  torch::Tensor pos_;
  torch::nn::ModuleList norms1_, qkv_, proj_, norms2_, mlps_;
  torch::nn::LayerNorm final_norm_{nullptr};
};
TORCH_MODULE(TextEncoder);

// One dual-stream block: each stream has its own adaLN-Zero modulation, norms,
// QKV, output projection and MLP; one attention runs over [text, image].
class JointBlockImpl : public torch::nn::Module {
 public:
  JointBlockImpl(int64_t dim, int64_t heads, int64_t mlp_ratio);
  // x: image tokens [B, N, D]; ctx: text tokens [B, L, D]; c: conditioning [B, D].
  // With sp, x holds this rank's N/d image tokens (models/ulysses.h).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& ctx,
                                                  const torch::Tensor& c, const torch::Tensor& key_mask,
                                                  const SequenceParallel* sp = nullptr);

 private:
  int64_t heads_;
  torch::nn::Linear mod_x_{nullptr}, mod_c_{nullptr};  // c -> 6D, zero-initialised
  torch::nn::Linear qkv_x_{nullptr}, qkv_c_{nullptr}, proj_x_{nullptr}, proj_c_{nullptr};
  Mlp mlp_x_{nullptr}, mlp_c_{nullptr};
};
TORCH_MODULE(JointBlock);

class DiTImpl : public torch::nn::Module {
 public:
  explicit DiTImpl(DiTConfig cfg);

  // x: [B, C, H, W] at noise level s: [B] in [0, 1]; tokens: [B, L].
  // Returns the predicted velocity, [B, C, H, W]. With sp, the ranks of a
  // sequence-parallel group each run the blocks on N/d of the image tokens
  // (inference only) and all return the whole velocity.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& s, const torch::Tensor& tokens,
                        const SequenceParallel* sp = nullptr);

  const DiTConfig& config() const { return cfg_; }
  int64_t parameter_count() const;
  // The low-noise expert (expert_boundary > 0), or null.
  std::shared_ptr<DiTImpl> low_noise_expert() const { return low_noise_; }

 private:
  torch::Tensor patchify(const torch::Tensor& x) const;
  torch::Tensor unpatchify(const torch::Tensor& t) const;
  torch::Tensor timestep_embedding(const torch::Tensor& s) const;
  // forward's velocity from this module's own weights (no expert dispatch).
  torch::Tensor own_velocity(const torch::Tensor& x, const torch::Tensor& s,
                             const torch::Tensor& tokens, const SequenceParallel* sp);
  // v + conv(silu(conv([v, features, x]))): the pixel head (pixel_head > 0).
  torch::Tensor refine(const torch::Tensor& v, const torch::Tensor& features,
                       const torch::Tensor& x);

  DiTConfig cfg_;
  torch::nn::Linear patch_embed_{nullptr};
  torch::Tensor pos_;  // fixed 2-D sin-cos position embedding [1, N, D]
  torch::nn::Sequential t_mlp_{nullptr};
  TextEncoder text_{nullptr};
  torch::nn::Linear text_pool_{nullptr}, text_proj_{nullptr};
  torch::nn::ModuleList blocks_;
  torch::nn::Linear final_mod_{nullptr}, final_out_{nullptr};
  torch::nn::Linear pixel_feat_{nullptr};  // the pixel head's layers
  torch::nn::Conv2d pixel_in_{nullptr}, pixel_out_{nullptr};
  std::shared_ptr<DiTImpl> low_noise_;  // expert_boundary > 0: the low-noise expert
};
TORCH_MODULE(DiT);

}  // namespace spotlight::models

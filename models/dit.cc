#include "models/dit.h"

#include <cmath>
#include <stdexcept>

#include "kernels/ops.h"

namespace spotlight::models {
namespace F = torch::nn::functional;
using torch::indexing::Slice;

void DiTConfig::validate() const {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("DiT config '" + name + "': " + why);
  };
  if (image_size <= 0 || patch <= 0 || image_size % patch != 0)
    fail("image_size must be a positive multiple of patch");
  if (channels <= 0 || depth <= 0 || text_depth < 0 || mlp_ratio <= 0) fail("sizes must be positive");
  if (heads <= 0 || dim % heads != 0) fail("dim must be a multiple of heads");
  if (dim % 4 != 0) fail("dim must be a multiple of 4 (2-D sin-cos positions)");
  if (vocab < 2 || text_len < 1) fail("vocab must be >= 2 and text_len >= 1");
  if (pixel_head < 0 || pixel_features < 0 || (pixel_head > 0 && pixel_features == 0))
    fail("pixel_head and pixel_features must be >= 0, and pixel_features > 0 with a pixel head");
  if (!(expert_boundary >= 0 && expert_boundary < 1))
    fail("expert_boundary must lie in [0, 1) (0: no low-noise expert)");
}

DiTConfig dit_config(const std::string& name) {
  DiTConfig c;
  c.name = name;
  if (name == "tiny") return c;  // the defaults: about 1 M parameters
  if (name == "base") {
    c.image_size = 64;
    c.patch = 2;
    c.dim = 512;
    c.depth = 10;
    c.heads = 8;
    c.text_depth = 2;
    return c;
  }
  throw std::invalid_argument("unknown DiT configuration '" + name + "' (known: tiny, base)");
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& key_mask) {
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  if (key_mask.defined()) scores = scores + key_mask;
  return torch::matmul(torch::softmax(scores, -1), v);
}

namespace {

// Additive key mask: padding gets a large finite negative so that a row of
// only padding stays finite (uniform) instead of NaN.
torch::Tensor padding_mask(const torch::Tensor& tokens) {
  auto pad = tokens.eq(0).to(torch::kFloat32) * -1e9;
  return pad.unsqueeze(1).unsqueeze(1);  // [B, 1, 1, L]
}

// Every linear layer of the DiT goes through the row-invariant product, so a
// seeded rollout gives the same bits in any batch (kernels/ops.h).
torch::Tensor invariant_linear(const torch::nn::Linear& l, const torch::Tensor& x) {
  return kernels::invariant_linear(x, l->weight, l->bias);
}

// Batch-invariant 3x3 convolution (padding 1). LibTorch's conv2d goes to
// oneDNN on a CPU, whose kernels differ with the batch (measured: a sample's
// output changed between batch 1 and 32); the im2col + GEMM convolution runs
// the same product per sample whatever the batch and thread count. An
// unfold + invariant_linear twin (its per-sample GEMM version) gave the same
// bits at a tenth of the speed.
torch::Tensor invariant_conv3x3(const torch::nn::Conv2d& l, const torch::Tensor& x) {
  return at::thnn_conv2d(x, l->weight, {3, 3}, l->bias, {1, 1}, {1, 1});
}

// The DiT's LayerNorms (no affine parameters: adaLN supplies shift and scale).
constexpr double kNormEps = 1e-6;

// [B, N, 3D] -> q, k, v each [B, heads, N, D/heads].
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> split_heads(const torch::Tensor& qkv,
                                                                    int64_t heads) {
  auto B = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / 3;
  auto t = qkv.view({B, N, 3, heads, D / heads}).permute({2, 0, 3, 1, 4});
  return {t[0], t[1], t[2]};
}

torch::Tensor merge_heads(const torch::Tensor& t) {  // [B, H, N, d] -> [B, N, H*d]
  return t.transpose(1, 2).reshape({t.size(0), t.size(2), t.size(1) * t.size(3)});
}

// Half the channels encode the row, half the column (DiT's fixed embedding).
torch::Tensor sincos_2d(int64_t grid, int64_t dim) {
  auto quarter = dim / 4;
  auto omega = torch::arange(quarter, torch::kFloat64) / double(quarter);
  omega = 1.0 / torch::pow(10000.0, omega);
  auto pos = torch::arange(grid, torch::kFloat64);
  auto out = torch::outer(pos, omega);                               // [grid, quarter]
  auto emb1d = torch::cat({torch::sin(out), torch::cos(out)}, 1);    // [grid, dim/2]
  auto rows = emb1d.unsqueeze(1).expand({grid, grid, dim / 2});
  auto cols = emb1d.unsqueeze(0).expand({grid, grid, dim / 2});
  return torch::cat({rows, cols}, 2).reshape({1, grid * grid, dim}).to(torch::kFloat32);
}

void init_linear(torch::nn::Linear& l) {
  torch::nn::init::xavier_uniform_(l->weight);
  if (l->bias.defined()) torch::nn::init::zeros_(l->bias);
}

void zero_linear(torch::nn::Linear& l) {
  torch::nn::init::zeros_(l->weight);
  torch::nn::init::zeros_(l->bias);
}

}  // namespace

MlpImpl::MlpImpl(int64_t dim, int64_t ratio)
    : fc1_(register_module("fc1", torch::nn::Linear(dim, dim * ratio))),
      fc2_(register_module("fc2", torch::nn::Linear(dim * ratio, dim))) {
  init_linear(fc1_);
  init_linear(fc2_);
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return invariant_linear(fc2_, kernels::gelu_tanh(invariant_linear(fc1_, x)));
}

TextEncoderImpl::TextEncoderImpl(const DiTConfig& cfg) : heads_(cfg.heads) {
  embed_ = register_module("embed", torch::nn::Embedding(cfg.vocab, cfg.dim));
  torch::nn::init::normal_(embed_->weight, 0.0, 0.02);
  pos_ = register_parameter("pos", torch::randn({1, cfg.text_len, cfg.dim}) * 0.02);
  norms1_ = register_module("norms1", torch::nn::ModuleList());
  qkv_ = register_module("qkv", torch::nn::ModuleList());
  proj_ = register_module("proj", torch::nn::ModuleList());
  norms2_ = register_module("norms2", torch::nn::ModuleList());
  mlps_ = register_module("mlps", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.text_depth; ++i) {
    norms1_->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.dim})));
    torch::nn::Linear qkv(cfg.dim, 3 * cfg.dim), proj(cfg.dim, cfg.dim);
    init_linear(qkv);
    init_linear(proj);
    qkv_->push_back(qkv);
    proj_->push_back(proj);
    norms2_->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.dim})));
    mlps_->push_back(Mlp(cfg.dim, cfg.mlp_ratio));
  }
  final_norm_ = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.dim})));
}

std::pair<torch::Tensor, torch::Tensor> TextEncoderImpl::forward(const torch::Tensor& tokens,
                                                                 const torch::Tensor& key_mask) {
  auto h = embed_(tokens) + pos_.index({Slice(), Slice(0, tokens.size(1))});
  for (size_t i = 0; i < qkv_->size(); ++i) {
    auto [q, k, v] = split_heads(invariant_linear(torch::nn::Linear(qkv_->ptr<torch::nn::LinearImpl>(i)),
                                       norms1_[i]->as<torch::nn::LayerNorm>()->forward(h)),
                                 heads_);
    h = h + invariant_linear(torch::nn::Linear(proj_->ptr<torch::nn::LinearImpl>(i)),
                  merge_heads(attention(q, k, v, key_mask)));
    h = h + mlps_[i]->as<Mlp>()->forward(norms2_[i]->as<torch::nn::LayerNorm>()->forward(h));
  }
  h = final_norm_(h);
  // Mean over real (non-padding) tokens.
  auto keep = tokens.ne(0).to(h.dtype()).unsqueeze(-1);
  auto pooled = (h * keep).sum(1) / keep.sum(1).clamp_min(1.0);
  return {h, pooled};
}

JointBlockImpl::JointBlockImpl(int64_t dim, int64_t heads, int64_t mlp_ratio) : heads_(heads) {
  mod_x_ = register_module("mod_x", torch::nn::Linear(dim, 6 * dim));
  mod_c_ = register_module("mod_c", torch::nn::Linear(dim, 6 * dim));
  zero_linear(mod_x_);  // adaLN-Zero: every block starts as the identity
  zero_linear(mod_c_);
  qkv_x_ = register_module("qkv_x", torch::nn::Linear(dim, 3 * dim));
  qkv_c_ = register_module("qkv_c", torch::nn::Linear(dim, 3 * dim));
  proj_x_ = register_module("proj_x", torch::nn::Linear(dim, dim));
  proj_c_ = register_module("proj_c", torch::nn::Linear(dim, dim));
  for (auto* l : {&qkv_x_, &qkv_c_, &proj_x_, &proj_c_}) init_linear(*l);
  mlp_x_ = register_module("mlp_x", Mlp(dim, mlp_ratio));
  mlp_c_ = register_module("mlp_c", Mlp(dim, mlp_ratio));
}

std::pair<torch::Tensor, torch::Tensor> JointBlockImpl::forward(const torch::Tensor& x,
                                                                const torch::Tensor& ctx,
                                                                const torch::Tensor& c,
                                                                const torch::Tensor& key_mask,
                                                                const SequenceParallel* sp) {
  auto act = F::silu(c);
  auto mx = invariant_linear(mod_x_, act).chunk(6, -1);
  auto mc = invariant_linear(mod_c_, act).chunk(6, -1);
  // LayerNorm + adaLN modulation and the gated residual adds are the fused
  // kernels (kernels/ops.h): the CPU reference here, CUDA on a GPU.
  auto [qx, kx, vx] = split_heads(invariant_linear(qkv_x_, kernels::adaln_modulate(x, mx[0], mx[1], kNormEps)), heads_);
  auto [qc, kc, vc] = split_heads(invariant_linear(qkv_c_, kernels::adaln_modulate(ctx, mc[0], mc[1], kNormEps)), heads_);
  // Joint attention: text first, then image, as SD3 and Qwen-Image order them.
  torch::Tensor out_c, out_x;
  if (sp) {
    auto [oc, ox] = ulysses_joint_attention(qc, kc, vc, qx, kx, vx, key_mask, *sp->comm);
    out_c = merge_heads(oc);
    out_x = merge_heads(ox);
  } else {
    auto out = merge_heads(attention(torch::cat({qc, qx}, 2), torch::cat({kc, kx}, 2),
                                     torch::cat({vc, vx}, 2), key_mask));
    auto L = ctx.size(1);
    out_c = out.index({Slice(), Slice(0, L)});
    out_x = out.index({Slice(), Slice(L, torch::indexing::None)});
  }
  auto x1 = kernels::gated_residual(x, mx[2], invariant_linear(proj_x_, out_x));
  auto c1 = kernels::gated_residual(ctx, mc[2], invariant_linear(proj_c_, out_c));
  x1 = kernels::gated_residual(x1, mx[5], mlp_x_(kernels::adaln_modulate(x1, mx[3], mx[4], kNormEps)));
  c1 = kernels::gated_residual(c1, mc[5], mlp_c_(kernels::adaln_modulate(c1, mc[3], mc[4], kNormEps)));
  return {x1, c1};
}

DiTImpl::DiTImpl(DiTConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  const auto D = cfg_.dim;
  patch_embed_ = register_module("patch_embed", torch::nn::Linear(cfg_.channels * cfg_.patch * cfg_.patch, D));
  init_linear(patch_embed_);
  pos_ = register_buffer("pos", sincos_2d(cfg_.image_size / cfg_.patch, D));
  t_mlp_ = register_module("t_mlp", torch::nn::Sequential(torch::nn::Linear(256, D), torch::nn::SiLU(),
                                                            torch::nn::Linear(D, D)));
  for (auto& p : t_mlp_->named_parameters())
    if (p.key().find("weight") != std::string::npos) torch::nn::init::normal_(p.value(), 0.0, 0.02);
    else torch::nn::init::zeros_(p.value());
  text_ = register_module("text", TextEncoder(cfg_));
  text_pool_ = register_module("text_pool", torch::nn::Linear(D, D));
  text_proj_ = register_module("text_proj", torch::nn::Linear(D, D));
  init_linear(text_pool_);
  init_linear(text_proj_);
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg_.depth; ++i) blocks_->push_back(JointBlock(D, cfg_.heads, cfg_.mlp_ratio));
  final_mod_ = register_module("final_mod", torch::nn::Linear(D, 2 * D));
  final_out_ = register_module("final_out", torch::nn::Linear(D, cfg_.patch * cfg_.patch * cfg_.channels));
  zero_linear(final_mod_);
  zero_linear(final_out_);  // the untrained model predicts zero velocity
  if (cfg_.pixel_head > 0) {
    const auto C = cfg_.channels, Fp = cfg_.pixel_features, K = cfg_.pixel_head;
    pixel_feat_ = register_module("pixel_feat", torch::nn::Linear(D, cfg_.patch * cfg_.patch * Fp));
    pixel_in_ = register_module(
        "pixel_in", torch::nn::Conv2d(torch::nn::Conv2dOptions(2 * C + Fp, K, 3).padding(1)));
    pixel_out_ = register_module("pixel_out",
                                 torch::nn::Conv2d(torch::nn::Conv2dOptions(K, C, 3).padding(1)));
    init_linear(pixel_feat_);
    torch::nn::init::zeros_(
        pixel_out_->weight);                    // the head starts as the identity: a model gains it
    torch::nn::init::zeros_(pixel_out_->bias);  // without changing what it draws
  }
  if (cfg_.expert_boundary > 0) {
    auto one = cfg_;
    one.expert_boundary = 0;
    low_noise_ = register_module("low_noise", std::make_shared<DiTImpl>(one));
  }
}

torch::Tensor DiTImpl::patchify(const torch::Tensor& x) const {
  const auto p = cfg_.patch, B = x.size(0), C = x.size(1);
  auto t = x.unfold(2, p, p).unfold(3, p, p);  // [B, C, h, w, p, p]
  auto h = t.size(2), w = t.size(3);
  return t.permute({0, 2, 3, 1, 4, 5}).reshape({B, h * w, C * p * p});
}

torch::Tensor DiTImpl::unpatchify(const torch::Tensor& t) const {
  const auto p = cfg_.patch, C = t.size(2) / (p * p), g = cfg_.image_size / p, B = t.size(0);
  return t.view({B, g, g, C, p, p}).permute({0, 3, 1, 4, 2, 5}).reshape({B, C, g * p, g * p});
}

torch::Tensor DiTImpl::timestep_embedding(const torch::Tensor& s) const {
  // Flow time s in [0, 1] is fed as s * 1000, DiT's timestep range.
  const int64_t half = 128;
  auto freqs = torch::exp(-std::log(10000.0) * torch::arange(half, s.options().dtype(torch::kFloat32)) / double(half));
  auto args = (s.to(torch::kFloat32) * 1000.0).unsqueeze(1) * freqs.unsqueeze(0);
  return torch::cat({torch::cos(args), torch::sin(args)}, 1);
}

torch::Tensor DiTImpl::forward(const torch::Tensor& x, const torch::Tensor& s, const torch::Tensor& tokens,
                               const SequenceParallel* sp) {
  // Each path below checks the shapes in own_velocity.
  if (!low_noise_) return own_velocity(x, s, tokens, sp);
  const auto low = s.lt(cfg_.expert_boundary);
  const auto n_low = low.sum().item<int64_t>();
  if (n_low == s.size(0)) return low_noise_->forward(x, s, tokens, sp);
  if (n_low == 0) return own_velocity(x, s, tokens, sp);
  // A batch across the boundary (DiffusionNFT trains on a noise level per
  // sample): each sample takes its own expert's velocity, computed whole, so
  // a sample's output does not depend on the batch it sits in.
  return torch::where(low.view({-1, 1, 1, 1}), low_noise_->forward(x, s, tokens, sp),
                      own_velocity(x, s, tokens, sp));
}

torch::Tensor DiTImpl::own_velocity(const torch::Tensor& x, const torch::Tensor& s,
                                    const torch::Tensor& tokens, const SequenceParallel* sp) {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == cfg_.channels && x.size(2) == cfg_.image_size &&
                  x.size(3) == cfg_.image_size,
              "DiT expects [B, ", cfg_.channels, ", ", cfg_.image_size, ", ", cfg_.image_size, "] images, got ",
              x.sizes());
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(0) == x.size(0) && tokens.size(1) <= cfg_.text_len,
              "DiT expects [B, <=", cfg_.text_len, "] tokens, got ", tokens.sizes());
  TORCH_CHECK(s.dim() == 1 && s.size(0) == x.size(0), "DiT expects one noise level per sample");
  auto text_mask = padding_mask(tokens);
  auto [text, pooled] = text_->forward(tokens, text_mask);
  auto t = invariant_linear(torch::nn::Linear(t_mlp_->ptr<torch::nn::LinearImpl>(0)), timestep_embedding(s));
  t = invariant_linear(torch::nn::Linear(t_mlp_->ptr<torch::nn::LinearImpl>(2)), F::silu(t));
  auto c = t + invariant_linear(text_pool_, pooled);
  auto ctx = invariant_linear(text_proj_, text);
  auto h = invariant_linear(patch_embed_, patchify(x)) + pos_;
  // Image tokens are never masked: the joint mask is [text padding, zeros].
  auto joint_mask = torch::cat({text_mask, torch::zeros({x.size(0), 1, 1, h.size(1)}, text_mask.options())}, 3);
  if (sp) {  // this rank's contiguous block of image tokens
    TORCH_CHECK(h.size(1) % sp->degree() == 0 && cfg_.heads % sp->degree() == 0, "sequence parallel degree ",
                sp->degree(), " must divide the ", h.size(1), " image tokens and the ", cfg_.heads, " heads");
    const auto n = h.size(1) / sp->degree();
    h = h.narrow(1, sp->rank() * n, n);
  }
  for (auto& m : *blocks_) {
    auto [hx, hc] = m->as<JointBlock>()->forward(h, ctx, c, joint_mask, sp);
    h = hx;
    ctx = hc;
  }
  auto mod = invariant_linear(final_mod_, F::silu(c)).chunk(2, -1);
  auto hn = kernels::adaln_modulate(h, mod[0], mod[1], kNormEps);
  auto patches = invariant_linear(final_out_, hn);
  const auto n = patches.size(2);
  // The pixel head's features travel with the patches through the gather.
  if (cfg_.pixel_head > 0) patches = torch::cat({patches, invariant_linear(pixel_feat_, hn)}, 2);
  if (sp) patches = gather_tokens(patches, *sp->comm);
  if (cfg_.pixel_head == 0) return unpatchify(patches);
  return refine(unpatchify(patches.narrow(2, 0, n)),
                unpatchify(patches.narrow(2, n, patches.size(2) - n)), x);
}

torch::Tensor DiTImpl::refine(const torch::Tensor& v, const torch::Tensor& features,
                              const torch::Tensor& x) {
  auto hidden = F::silu(invariant_conv3x3(pixel_in_, torch::cat({v, features, x}, 1)));
  return v + invariant_conv3x3(pixel_out_, hidden);
}

int64_t DiTImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace spotlight::models

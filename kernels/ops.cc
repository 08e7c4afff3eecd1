#include "kernels/ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/adaln.h"
#include "kernels/config.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/philox.h"

#ifdef SPOTLIGHT_WITH_CUDA
#include "kernels/cuda/launch.h"
#endif
#ifdef SPOTLIGHT_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace spotlight::kernels {
namespace {

ElementType element_type(const torch::Tensor& t, const char* what) {
  if (t.scalar_type() == torch::kFloat32) return ElementType::kF32;
  if (t.scalar_type() == torch::kBFloat16) return ElementType::kBF16;
  throw std::invalid_argument(std::string(what) + ": needs float32 or bfloat16 tensors");
}

// The stream LibTorch is using on t's device; throws where the CUDA kernels
// cannot run.
void* cuda_stream_for(const torch::Tensor& t, const char* what) {
#if defined(SPOTLIGHT_WITH_CUDA) && defined(SPOTLIGHT_TORCH_CUDA)
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  throw std::runtime_error(std::string(what) +
                           ": a CUDA tensor, but this build has no CUDA kernels (SPOTLIGHT_CUDA=OFF, no nvcc, "
                           "or a LibTorch without CUDA)");
#endif
}

void check_same_device(const char* what, std::initializer_list<const torch::Tensor*> ts) {
  const auto dev = (*ts.begin())->device();
  for (auto* t : ts)
    if (t->defined() && t->device() != dev) throw std::invalid_argument(std::string(what) + ": tensors on different devices");
}

// Grain of at::parallel_for: about 64 K elements per task.
int64_t grain(int64_t per_item) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(per_item, 1)); }

void check_modulation_shapes(const char* what, const torch::Tensor& x3, const torch::Tensor& mod) {
  if (x3.dim() != 3 || mod.dim() != 2 || mod.size(0) != x3.size(0) || mod.size(1) != x3.size(2))
    throw std::invalid_argument(std::string(what) + ": needs [B, N, C] rows and [B, C] modulation, got " +
                                c10::str(x3.sizes()) + " and " + c10::str(mod.sizes()));
}

// Runs the fused adaLN forward; mean and rstd (fp32 [B*N]) are filled when defined.
torch::Tensor adaln_forward(const torch::Tensor& x_in, const torch::Tensor& shift_in, const torch::Tensor& scale_in,
                            double eps, torch::Tensor* mean, torch::Tensor* rstd) {
  check_modulation_shapes("adaln_modulate", x_in, shift_in);
  check_modulation_shapes("adaln_modulate", x_in, scale_in);
  check_same_device("adaln_modulate", {&x_in, &shift_in, &scale_in});
  const auto type = element_type(x_in, "adaln_modulate");
  if (shift_in.scalar_type() != x_in.scalar_type() || scale_in.scalar_type() != x_in.scalar_type())
    throw std::invalid_argument("adaln_modulate: x, shift and scale must share a dtype");
  auto x = x_in.contiguous(), shift = shift_in.contiguous(), scale = scale_in.contiguous();
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0) * x.size(1);
  auto stat_opts = x.options().dtype(torch::kFloat32);
  if (mean) *mean = torch::empty({rows}, stat_opts);
  if (rstd) *rstd = torch::empty({rows}, stat_opts);
  AdaLnArgs a;
  a.x = x.data_ptr();
  a.shift = shift.data_ptr();
  a.scale = scale.data_ptr();
  a.out = out.data_ptr();
  a.row_mean = mean ? mean->data_ptr<float>() : nullptr;
  a.row_rstd = rstd ? rstd->data_ptr<float>() : nullptr;
  a.type = type;
  a.batch = x.size(0);
  a.tokens = x.size(1);
  a.channels = x.size(2);
  a.eps = float(eps);
  if (x.is_cuda()) {
    [[maybe_unused]] void* stream = cuda_stream_for(x, "adaln_modulate");
#ifdef SPOTLIGHT_WITH_CUDA
    cuda::adaln(a, stream);
#endif
  } else {
    at::parallel_for(0, rows, grain(a.channels), [&](int64_t b, int64_t e) { adaln_rows(a, b, e); });
  }
  return out;
}

torch::Tensor gated_forward(const torch::Tensor& res_in, const torch::Tensor& gate_in, const torch::Tensor& y_in) {
  check_modulation_shapes("gated_residual", res_in, gate_in);
  if (y_in.sizes() != res_in.sizes()) throw std::invalid_argument("gated_residual: residual and y differ in shape");
  check_same_device("gated_residual", {&res_in, &gate_in, &y_in});
  const auto type = element_type(res_in, "gated_residual");
  if (gate_in.scalar_type() != res_in.scalar_type() || y_in.scalar_type() != res_in.scalar_type())
    throw std::invalid_argument("gated_residual: residual, gate and y must share a dtype");
  auto res = res_in.contiguous(), gate = gate_in.contiguous(), y = y_in.contiguous();
  auto out = torch::empty_like(res);
  GatedResidualArgs a;
  a.residual = res.data_ptr();
  a.gate = gate.data_ptr();
  a.y = y.data_ptr();
  a.out = out.data_ptr();
  a.type = type;
  a.batch = res.size(0);
  a.tokens = res.size(1);
  a.channels = res.size(2);
  const int64_t rows = a.batch * a.tokens;
  if (res.is_cuda()) {
    [[maybe_unused]] void* stream = cuda_stream_for(res, "gated_residual");
#ifdef SPOTLIGHT_WITH_CUDA
    cuda::gated_residual(a, stream);
#endif
  } else {
    at::parallel_for(0, rows, grain(a.channels), [&](int64_t b, int64_t e) { gated_residual_rows(a, b, e); });
  }
  return out;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Forward fused; backward composed from the saved row statistics:
//   xhat = (x - mean) rstd, g' = g (1 + scale)
//   d shift = sum_n g,  d scale = sum_n g xhat,
//   d x = rstd (g' - mean_c g' - xhat mean_c(g' xhat))
struct AdaLnFunction : torch::autograd::Function<AdaLnFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& shift,
                               const torch::Tensor& scale, double eps) {
    torch::Tensor mean, rstd;
    auto out = adaln_forward(x, shift, scale, eps, &mean, &rstd);
    ctx->save_for_backward({x, scale, mean, rstd});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& scale = saved[1];
    const auto B = x.size(0), N = x.size(1);
    auto g = grads[0].to(torch::kFloat32);
    auto xhat = (x.to(torch::kFloat32) - saved[2].view({B, N, 1})) * saved[3].view({B, N, 1});
    auto d_shift = g.sum(1);
    auto d_scale = (g * xhat).sum(1);
    auto gh = g * (1 + scale.to(torch::kFloat32)).unsqueeze(1);
    auto dx = saved[3].view({B, N, 1}) *
              (gh - gh.mean(-1, true) - xhat * (gh * xhat).mean(-1, true));
    return {dx.to(x.scalar_type()), d_shift.to(x.scalar_type()), d_scale.to(x.scalar_type()), torch::Tensor()};
  }
};

struct GatedResidualFunction : torch::autograd::Function<GatedResidualFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& res, const torch::Tensor& gate,
                               const torch::Tensor& y) {
    ctx->save_for_backward({gate, y});
    return gated_forward(res, gate, y);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto& g = grads[0];
    return {g, (g * saved[1]).sum(1), g * saved[0].unsqueeze(1)};
  }
};

// y = gelu(x) or dx = grad * gelu'(x) over all elements of the CPU tensor x.
torch::Tensor gelu_cpu(const torch::Tensor& x_in, const torch::Tensor* grad_in) {
  const auto type = element_type(x_in, "gelu_tanh");
  auto x = x_in.contiguous();
  auto out = torch::empty_like(x);
  torch::Tensor grad;
  if (grad_in) {
    check_same_device("gelu_tanh_backward", {&x_in, grad_in});
    if (grad_in->sizes() != x.sizes())
      throw std::invalid_argument("gelu_tanh_backward: grad must have x's shape");
    grad = grad_in->to(x.scalar_type()).contiguous();
  }
  at::parallel_for(0, x.numel(), grain(1), [&](int64_t b, int64_t e) {
    if (grad_in)
      gelu_tanh_backward(x.data_ptr(), grad.data_ptr(), out.data_ptr(), type, b, e);
    else
      gelu_tanh_forward(x.data_ptr(), out.data_ptr(), type, b, e);
  });
  return out;
}

// Saves only x: the backward pass recomputes the gate, one exp an element,
// instead of keeping a second activation-sized tensor alive.
struct GeluFunction : torch::autograd::Function<GeluFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});
    return gelu_cpu(x, nullptr);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto x = ctx->get_saved_variables()[0];  // by value: the list is a temporary
    // Under create_graph the slope must itself be differentiable: LibTorch's
    // gelu_backward has a derivative, the fused kernel does not.
    if (torch::GradMode::is_enabled()) return {at::gelu_backward(grads[0], x, "tanh")};
    return {gelu_cpu(x, &grads[0])};
  }
};

bool needs_autograd(std::initializer_list<const torch::Tensor*> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (auto* t : ts)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

// Rows a register block holds times a few: an item of at::parallel_for is a row.
constexpr int64_t kLinearGrain = 32;

// x [..., in] W^T + b. fp32 on the CPU: the row-invariant kernel. Elsewhere
// (bf16, a GPU) one LibTorch GEMM a sample, [N, in] x [in, out] whatever B is
// (kernels_test checks a sample's bits alone and in a batch on a GPU).
torch::Tensor linear_forward(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias = {}) {
  if (weight.dim() != 2 || x.dim() < 2 || x.size(-1) != weight.size(1))
    throw std::invalid_argument("invariant_linear: x must be [B, ..., in] and weight [out, in]");
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))
    throw std::invalid_argument("invariant_linear: bias must be [out]");
  check_same_device("invariant_linear", {&x, &weight, &bias});
  const int64_t in = weight.size(1), out = weight.size(0);
  auto shape = x.sizes().vec();
  shape.back() = out;
  const bool f32 = x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                   (!bias.defined() || bias.scalar_type() == torch::kFloat32);
  if (x.is_cpu() && f32) {
    auto xc = x.contiguous(), w = weight.contiguous();
    auto b = bias.defined() ? bias.contiguous() : bias;
    auto y = torch::empty(shape, xc.options());
    const auto packed = pack_weight(w.data_ptr<float>(), out, in);
    const float* xp = xc.data_ptr<float>();
    const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, c10::multiply_integers(shape.begin(), shape.end() - 1), kLinearGrain,
                     [&](int64_t r0, int64_t r1) { linear_rows(xp, packed, bp, yp, r0, r1); });
    return y;
  }
  const auto B = x.size(0);
  auto x3 = x.reshape({B, -1, in});
  auto wt = weight.t().unsqueeze(0).expand({B, in, out});
  auto y = bias.defined()
               ? torch::baddbmm(bias.view({1, 1, out}).expand({B, x3.size(1), out}), x3, wt)
               : torch::bmm(x3, wt);
  return y.view(shape);
}

// Only the forward product must be row-invariant: it is what a seeded
// rollout's bits depend on. Each gradient is one GEMM over all rows (autograd
// of a per-sample product would repack W once a sample and write a
// [B, in, out] weight gradient only to sum it); gradients are deterministic
// for a given batch and thread count. Differentiable ops throughout, so a
// second derivative (create_graph) works. The bias is a pack of zero or one
// tensors: autograd refuses an undefined input.
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  template <class... Bias>
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const Bias&... bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = sizeof...(bias) > 0;
    return linear_forward(x, weight, bias...);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();  // by value: the list is a temporary
    const auto& x = saved[0];
    const auto& weight = saved[1];
    auto g = grads[0].reshape({-1, weight.size(0)});
    auto dx = g.mm(weight).view(x.sizes());
    auto dw = g.t().mm(x.reshape({-1, weight.size(1)}));
    if (!ctx->saved_data["bias"].toBool()) return {dx, dw};
    return {dx, dw, g.sum(0)};
  }
};

}  // namespace

bool cuda_kernels_available() {
#if defined(SPOTLIGHT_WITH_CUDA) && defined(SPOTLIGHT_TORCH_CUDA)
  return torch::cuda::is_available();
#else
  return false;
#endif
}

torch::Tensor seed_noise(const std::vector<uint64_t>& seeds, uint32_t stream, torch::IntArrayRef sample_shape,
                         torch::Device device) {
  std::vector<int64_t> shape{int64_t(seeds.size())};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  auto out = torch::empty(shape, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  const int64_t batch = int64_t(seeds.size());
  const int64_t per = batch == 0 ? 0 : out.numel() / batch;
  if (out.numel() == 0) return out;
  if (device.is_cuda()) {
    [[maybe_unused]] void* cs = cuda_stream_for(out, "seed_noise");
#ifdef SPOTLIGHT_WITH_CUDA
    auto dev_seeds = torch::from_blob(const_cast<uint64_t*>(seeds.data()), {batch}, torch::kInt64).to(device);
    cuda::seed_noise(reinterpret_cast<const uint64_t*>(dev_seeds.data_ptr<int64_t>()), stream, batch, per,
                     out.data_ptr<float>(), cs);
#endif
    return out;
  }
  float* p = out.data_ptr<float>();
  at::parallel_for(0, batch, grain(per), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) kernels::seed_noise(seeds[i], stream, 0, size_t(per), p + i * per);
  });
  return out;
}

SdeStepResult sde_step(const torch::Tensor& x_in, const torch::Tensor& v_in, const torch::Tensor& noise_in,
                       const SdeCoefficients& c, bool want_mean, bool want_log_prob) {
  if (x_in.dim() < 1 || v_in.sizes() != x_in.sizes())
    throw std::invalid_argument("sde_step: x and v must have the same shape [batch, ...]");
  const bool sde = c.std_dt != 0.0f;
  if (sde && (!noise_in.defined() || noise_in.sizes() != x_in.sizes() || noise_in.scalar_type() != torch::kFloat32))
    throw std::invalid_argument("sde_step: a stochastic step needs float32 noise of x's shape");
  check_same_device("sde_step", {&x_in, &v_in, &noise_in});
  const auto type = element_type(x_in, "sde_step");
  if (v_in.scalar_type() != x_in.scalar_type()) throw std::invalid_argument("sde_step: x and v must share a dtype");
  torch::NoGradGuard no_grad;
  auto x = x_in.contiguous(), v = v_in.contiguous();
  auto noise = sde ? noise_in.contiguous() : torch::Tensor();
  const auto f32 = x.options().dtype(torch::kFloat32);
  SdeStepResult r;
  r.x_next = torch::empty(x.sizes(), f32);
  if (want_mean) r.mean = torch::empty(x.sizes(), f32);
  const int64_t batch = x.size(0), dim = batch == 0 ? 0 : x.numel() / batch;
  if (sde && want_log_prob) r.log_prob = torch::empty({batch}, f32);
  SdeStepArgs a;
  a.x = x.data_ptr();
  a.v = v.data_ptr();
  a.noise = sde ? noise.data_ptr<float>() : nullptr;
  a.x_next = r.x_next.data_ptr<float>();
  a.mean = want_mean ? r.mean.data_ptr<float>() : nullptr;
  a.log_prob = r.log_prob.defined() ? r.log_prob.data_ptr<float>() : nullptr;
  a.type = type;
  a.batch = batch;
  a.dim = dim;
  if (batch == 0) return r;
  if (x.is_cuda()) {
    [[maybe_unused]] void* cs = cuda_stream_for(x, "sde_step");
#ifdef SPOTLIGHT_WITH_CUDA
    auto ws = torch::empty({cuda::sde_step_workspace(batch, dim)}, x.options().dtype(torch::kFloat64));
    cuda::sde_step(a, c, ws.data_ptr<double>(), cs);
#endif
    return r;
  }
  const int64_t chunks = sde_chunks(dim);
  std::vector<double> sums(size_t(batch * chunks));
  at::parallel_for(0, batch * chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) sums[t] = sde_step_chunk(a, c, t / chunks, t % chunks);
  });
  if (a.log_prob)
    for (int64_t b = 0; b < batch; ++b) a.log_prob[b] = sde_log_prob(sums.data() + b * chunks, chunks, dim, c);
  return r;
}

torch::Tensor adaln_modulate(const torch::Tensor& x, const torch::Tensor& shift, const torch::Tensor& scale,
                             double eps) {
  if (needs_autograd({&x, &shift, &scale})) return AdaLnFunction::apply(x, shift, scale, eps);
  return adaln_forward(x, shift, scale, eps, nullptr, nullptr);
}

torch::Tensor gated_residual(const torch::Tensor& residual, const torch::Tensor& gate, const torch::Tensor& y) {
  if (needs_autograd({&residual, &gate, &y})) return GatedResidualFunction::apply(residual, gate, y);
  return gated_forward(residual, gate, y);
}

torch::Tensor gelu_tanh(const torch::Tensor& x) {
  if (!x.is_cpu())
    return torch::nn::functional::gelu(
        x, torch::nn::functional::GELUFuncOptions().approximate("tanh"));
  if (needs_autograd({&x})) return GeluFunction::apply(x);
  return gelu_cpu(x, nullptr);
}

torch::Tensor gelu_tanh_backward(const torch::Tensor& x, const torch::Tensor& grad) {
  if (!x.is_cpu()) return at::gelu_backward(grad, x, "tanh");
  return gelu_cpu(x, &grad);
}

torch::Tensor invariant_linear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
  if (!needs_autograd({&x, &weight, &bias})) return linear_forward(x, weight, bias);
  if (!bias.defined()) return LinearFunction::apply(x, weight);
  return LinearFunction::apply(x, weight, bias);
}

}  // namespace spotlight::kernels

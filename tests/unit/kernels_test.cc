// The fused kernels' CPU references and their LibTorch wrappers against the
// composed LibTorch operations they replace: the SDE step (bit-identical mean
// and x_next, log-prob within float rounding), LayerNorm + adaLN and the gated
// residual (values and gradients), the tanh-GELU (value and slope against a
// double reference and LibTorch's gelu), the row-invariant linear layer
// (every instruction set's bits, batch invariance, gradients against
// torch::nn::Linear), bf16 storage, and bad input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>

#include "kernels/element.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kernels/philox.h"
#include "models/flow.h"

using namespace spotlight;

namespace {

torch::Tensor randn(torch::IntArrayRef shape, uint64_t seed, torch::Dtype dtype = torch::kFloat32) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, gen, torch::kFloat32).to(dtype);
}

bool bit_equal(const torch::Tensor& a, const torch::Tensor& b) {
  auto ac = a.contiguous(), bc = b.contiguous();
  return ac.sizes() == bc.sizes() && ac.scalar_type() == bc.scalar_type() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0;
}

// f() run on one LibTorch thread and on two; the thread count is restored.
template <class F>
auto on_one_and_two_threads(F&& f) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = f();
  at::set_num_threads(2);
  auto two = f();
  at::set_num_threads(threads);
  return std::pair{one, two};
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// The composition the fused step replaces (models/flow.h).
struct Composed {
  torch::Tensor mean, x_next, log_prob;
};
Composed composed_step(const torch::Tensor& x, const torch::Tensor& v, const torch::Tensor& noise, double s,
                       double s_next, double sigma_max, double a) {
  auto st = models::sde_mean(x, v, s, s_next, sigma_max, a);
  Composed c{st.mean, models::sde_sample(st, noise), {}};
  if (a > 0) c.log_prob = models::step_log_prob(c.x_next, st.mean, st.std_dt);
  return c;
}

torch::Tensor composed_adaln(const torch::Tensor& x, const torch::Tensor& shift, const torch::Tensor& scale) {
  return torch::layer_norm(x, {x.size(-1)}, {}, {}, 1e-6) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1);
}

}  // namespace

TEST(SdeCoefficients, RejectBadArgumentsAndGiveTheOdeStepAtNoiseZero) {
  EXPECT_THROW(kernels::sde_coefficients(0.5, 0.6, 0.9, 0.7), std::invalid_argument);  // s_next > s
  EXPECT_THROW(kernels::sde_coefficients(1.5, 0.6, 0.9, 0.7), std::invalid_argument);  // s > 1
  EXPECT_THROW(kernels::sde_coefficients(0.5, -0.1, 0.9, 0.7), std::invalid_argument);
  EXPECT_THROW(kernels::sde_coefficients(1.0, 0.5, 1.0, 0.7), std::invalid_argument);  // sigma_max = 1
  EXPECT_THROW(kernels::sde_coefficients(0.5, 0.4, 0.9, -1), std::invalid_argument);
  const auto ode = kernels::sde_coefficients(0.5, 0.4, 0.9, 0.0);
  EXPECT_EQ(ode.x_coef, 1.0f);
  EXPECT_EQ(ode.v_coef, float(0.4 - 0.5));
  EXPECT_EQ(ode.std_dt, 0.0f);
  const auto sde = kernels::sde_coefficients(0.5, 0.4, 0.9, 0.7);
  EXPECT_NEAR(sde.std, 0.7, 1e-12);  // a sqrt(s / (1 - s)) at s = 1/2
  EXPECT_NEAR(sde.std_dt, 0.7 * std::sqrt(0.1), 1e-7);
}

TEST(FusedSdeStep, MatchesTheComposedOperationsBitForBitOnMeanAndNextSample) {
  for (auto [s, s_next] : {std::pair{1.0, 0.92}, std::pair{0.6, 0.45}, std::pair{0.2, 0.0}}) {
    for (double a : {0.0, 0.7}) {
      auto x = randn({5, 3, 17, 13}, 1), v = randn({5, 3, 17, 13}, 2), noise = randn({5, 3, 17, 13}, 3);
      const auto c = kernels::sde_coefficients(s, s_next, 0.92, a);
      auto fused = kernels::sde_step(x, v, a > 0 ? noise : torch::Tensor(), c, /*want_mean=*/true);
      auto ref = composed_step(x, v, noise, s, s_next, 0.92, a);
      EXPECT_TRUE(bit_equal(fused.mean, ref.mean)) << "s=" << s << " a=" << a;
      EXPECT_TRUE(bit_equal(fused.x_next, a > 0 ? ref.x_next : ref.mean)) << "s=" << s << " a=" << a;
      if (a > 0) {
        ASSERT_TRUE(fused.log_prob.defined());
        EXPECT_LT(max_abs_diff(fused.log_prob, ref.log_prob), 2e-6) << "s=" << s;
      } else {
        EXPECT_FALSE(fused.log_prob.defined()) << "an ODE step has no log-prob";
      }
    }
  }
}

TEST(FusedSdeStep, LogProbIsTheClosedFormGaussianDensity) {
  // x_next - mean = noise * std_dt exactly enough that the log-prob is
  // -mean(z^2)/2 - log(std_dt) - log(2 pi)/2 for the standard normal z.
  auto x = randn({3, 4000}, 4), v = randn({3, 4000}, 5), z = randn({3, 4000}, 6);
  const auto c = kernels::sde_coefficients(0.7, 0.6, 0.9, 0.7);
  auto r = kernels::sde_step(x, v, z, c);
  auto expect = -(z.to(torch::kFloat64).pow(2).mean(1)) / 2 - std::log(double(c.std_dt)) - 0.5 * std::log(2 * M_PI);
  EXPECT_LT(max_abs_diff(r.log_prob, expect), 1e-5);
}

TEST(FusedSdeStep, ResultsDependOnlyOnTheSampleNotOnBatchOrThreads) {
  // Big enough for several chunks of kSdeChunk per sample.
  const int64_t dim = 3 * kernels::kSdeChunk + 123;
  auto x = randn({4, dim}, 7), v = randn({4, dim}, 8), noise = randn({4, dim}, 9);
  const auto c = kernels::sde_coefficients(0.5, 0.4, 0.9, 0.7);
  auto [one, two] = on_one_and_two_threads([&] { return kernels::sde_step(x, v, noise, c); });
  EXPECT_TRUE(bit_equal(one.x_next, two.x_next));
  EXPECT_TRUE(bit_equal(one.log_prob, two.log_prob));
  auto alone = kernels::sde_step(x.slice(0, 2, 3), v.slice(0, 2, 3), noise.slice(0, 2, 3), c);
  EXPECT_TRUE(bit_equal(alone.log_prob[0], one.log_prob[2]));
  EXPECT_TRUE(bit_equal(alone.x_next[0], one.x_next[2]));
}

TEST(FusedSdeStep, ReadsBf16InputsWithFp32Arithmetic) {
  auto x = randn({4, 3, 8, 8}, 10, torch::kBFloat16), v = randn({4, 3, 8, 8}, 11, torch::kBFloat16);
  auto noise = randn({4, 3, 8, 8}, 12);
  const auto c = kernels::sde_coefficients(0.8, 0.7, 0.9, 0.7);
  auto fused = kernels::sde_step(x, v, noise, c, true);
  EXPECT_EQ(fused.x_next.scalar_type(), torch::kFloat32);
  // Widening bf16 to fp32 is exact, so the fp32 composition of the widened
  // inputs is the exact expectation.
  auto ref = composed_step(x.to(torch::kFloat32), v.to(torch::kFloat32), noise, 0.8, 0.7, 0.9, 0.7);
  EXPECT_TRUE(bit_equal(fused.mean, ref.mean));
  EXPECT_TRUE(bit_equal(fused.x_next, ref.x_next));
  EXPECT_LT(max_abs_diff(fused.log_prob, ref.log_prob), 2e-6);
}

TEST(FusedSdeStep, BadInputGetsAClearError) {
  auto x = randn({2, 8}, 1), v = randn({2, 8}, 2);
  const auto c = kernels::sde_coefficients(0.5, 0.4, 0.9, 0.7);
  EXPECT_THROW(kernels::sde_step(x, v, torch::Tensor(), c), std::invalid_argument);  // no noise
  EXPECT_THROW(kernels::sde_step(x, randn({2, 9}, 2), randn({2, 8}, 3), c), std::invalid_argument);
  EXPECT_THROW(kernels::sde_step(x.to(torch::kFloat64), v.to(torch::kFloat64), randn({2, 8}, 3), c),
               std::invalid_argument);
  EXPECT_THROW(kernels::sde_step(x, v, randn({2, 8}, 3).to(torch::kFloat64), c), std::invalid_argument);
  EXPECT_THROW(kernels::sde_step(x, v.to(torch::kBFloat16), randn({2, 8}, 3), c), std::invalid_argument);
}

TEST(FusedAdaLn, MatchesLayerNormAndModulation) {
  for (int64_t C : {2, 7, 96, 384, 1029}) {
    auto x = randn({3, 11, C}, 20) * 3 + 5, shift = randn({3, C}, 21), scale = randn({3, C}, 22);
    auto fused = kernels::adaln_modulate(x, shift, scale);
    EXPECT_LT(max_abs_diff(fused, composed_adaln(x, shift, scale)), 2e-5) << "C=" << C;
  }
  // One channel: the normalised value is exactly 0, so the output is the shift
  // (LibTorch's own LayerNorm is 1 ulp of x times rstd = 1000 off here).
  auto x = randn({2, 3, 1}, 26) + 5, shift = randn({2, 1}, 27), scale = randn({2, 1}, 28);
  EXPECT_TRUE(bit_equal(kernels::adaln_modulate(x, shift, scale), shift.unsqueeze(1).expand({2, 3, 1})));
}

TEST(FusedAdaLn, RowsAreIndependentOfTheBatchAndTheThreadCount) {
  auto x = randn({6, 33, 96}, 23), shift = randn({6, 96}, 24), scale = randn({6, 96}, 25);
  auto [one, two] =
      on_one_and_two_threads([&] { return kernels::adaln_modulate(x, shift, scale); });
  EXPECT_TRUE(bit_equal(one, two));
  auto alone = kernels::adaln_modulate(x.slice(0, 4, 5), shift.slice(0, 4, 5), scale.slice(0, 4, 5));
  EXPECT_TRUE(bit_equal(alone[0], one[4]));
}

TEST(FusedAdaLn, GradientsMatchTheComposedOperations) {
  auto make = [](uint64_t seed, torch::IntArrayRef shape) { return randn(shape, seed).requires_grad_(true); };
  auto x = make(30, {2, 9, 48}), shift = make(31, {2, 48}), scale = make(32, {2, 48});
  auto x2 = x.detach().clone().requires_grad_(true), shift2 = shift.detach().clone().requires_grad_(true),
       scale2 = scale.detach().clone().requires_grad_(true);
  auto w = randn({2, 9, 48}, 33);
  (kernels::adaln_modulate(x, shift, scale) * w).sum().backward();
  (composed_adaln(x2, shift2, scale2) * w).sum().backward();
  EXPECT_LT(max_abs_diff(x.grad(), x2.grad()), 2e-5);
  EXPECT_LT(max_abs_diff(shift.grad(), shift2.grad()), 2e-5);
  EXPECT_LT(max_abs_diff(scale.grad(), scale2.grad()), 2e-5);
}

TEST(FusedAdaLn, ReadsAndWritesBf16) {
  auto x = randn({2, 5, 64}, 40, torch::kBFloat16), shift = randn({2, 64}, 41, torch::kBFloat16),
       scale = randn({2, 64}, 42, torch::kBFloat16);
  auto fused = kernels::adaln_modulate(x, shift, scale);
  EXPECT_EQ(fused.scalar_type(), torch::kBFloat16);
  auto ref = composed_adaln(x.to(torch::kFloat32), shift.to(torch::kFloat32), scale.to(torch::kFloat32));
  // One bf16 rounding of the output: relative 2^-8, plus the fp32 noise.
  auto err = (fused.to(torch::kFloat32) - ref).abs() - ref.abs() * (1.0 / 256) - 1e-5;
  EXPECT_LE(err.max().item<double>(), 0.0);
}

TEST(FusedGatedResidual, IsBitIdenticalToTheComposedAddAndDifferentiable) {
  auto res = randn({3, 7, 40}, 50).requires_grad_(true), gate = randn({3, 40}, 51).requires_grad_(true),
       y = randn({3, 7, 40}, 52).requires_grad_(true);
  auto fused = kernels::gated_residual(res, gate, y);
  auto ref = res + gate.unsqueeze(1) * y;
  EXPECT_TRUE(bit_equal(fused.detach(), ref.detach()));
  auto w = randn({3, 7, 40}, 53);
  auto grads = torch::autograd::grad({(fused * w).sum()}, {res, gate, y});
  auto ref_grads = torch::autograd::grad({(ref * w).sum()}, {res, gate, y});
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(max_abs_diff(grads[i], ref_grads[i]), 1e-5) << i;
}

TEST(FusedModulation, BadInputGetsAClearError) {
  auto x = randn({2, 3, 8}, 1), m = randn({2, 8}, 2);
  EXPECT_THROW(kernels::adaln_modulate(x, randn({2, 9}, 3), m), std::invalid_argument);
  EXPECT_THROW(kernels::adaln_modulate(x.view({6, 8}), m, m), std::invalid_argument);
  EXPECT_THROW(kernels::adaln_modulate(x.to(torch::kFloat64), m.to(torch::kFloat64), m.to(torch::kFloat64)),
               std::invalid_argument);
  EXPECT_THROW(kernels::gated_residual(x, m, randn({2, 4, 8}, 4)), std::invalid_argument);
  EXPECT_THROW(kernels::gated_residual(x, m.to(torch::kBFloat16), x), std::invalid_argument);
}

TEST(Bf16, ConversionsMatchLibTorch) {
  auto f = torch::cat({randn({100000}, 60) * 1000, torch::tensor({0.0f, -0.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256,
                                                                   INFINITY, -INFINITY, 3.0e38f, 1e-40f})});
  auto ours = torch::empty({f.numel()}, torch::kInt16);
  const float* src = f.data_ptr<float>();
  auto* dst = reinterpret_cast<kernels::Bf16*>(ours.data_ptr<int16_t>());
  for (int64_t i = 0; i < f.numel(); ++i) dst[i] = kernels::float_to_bf16(src[i]);
  auto theirs = f.to(torch::kBFloat16);
  EXPECT_EQ(std::memcmp(ours.data_ptr(), theirs.data_ptr(), f.numel() * 2), 0);
  const auto* tb = reinterpret_cast<const kernels::Bf16*>(theirs.data_ptr());
  auto back = theirs.to(torch::kFloat32);
  const float* bp = back.data_ptr<float>();
  for (int64_t i = 0; i < f.numel(); ++i) ASSERT_EQ(kernels::bf16_to_float(tb[i]), bp[i]) << i;
  EXPECT_TRUE(std::isnan(kernels::bf16_to_float(kernels::float_to_bf16(NAN))));
}

TEST(SeedNoiseOnTensors, EqualsTheReferenceStreamPerSample) {
  auto t = kernels::seed_noise({11, 12}, 5, {3, 7});
  std::vector<float> ref(21);
  kernels::seed_noise(12, 5, 0, 21, ref.data());
  EXPECT_EQ(std::memcmp(t[1].contiguous().data_ptr<float>(), ref.data(), 21 * sizeof(float)), 0);
}

// Through the LibTorch wrappers on a GPU: the same function the models call,
// dispatched to the CUDA kernels. Skips, and says so, without CUDA.
TEST(KernelsOnCudaTensors, AgreeWithTheCpuPath) {
  if (!kernels::cuda_kernels_available())
    GTEST_SKIP() << "no CUDA kernels or no GPU in this build: the CUDA dispatch did not run";
  const torch::Device gpu("cuda");
  auto noise_cpu = kernels::seed_noise({1, 2, 3}, 4, {3, 33, 33});
  auto noise_gpu = kernels::seed_noise({1, 2, 3}, 4, {3, 33, 33}, gpu);
  EXPECT_TRUE(bit_equal(noise_cpu, noise_gpu.cpu()));

  auto x = randn({3, 3, 33, 33}, 70), v = randn({3, 3, 33, 33}, 71);
  const auto c = kernels::sde_coefficients(0.6, 0.5, 0.9, 0.7);
  auto on_cpu = kernels::sde_step(x, v, noise_cpu, c, true);
  auto on_gpu = kernels::sde_step(x.to(gpu), v.to(gpu), noise_gpu, c, true);
  EXPECT_TRUE(bit_equal(on_cpu.x_next, on_gpu.x_next.cpu()));
  EXPECT_TRUE(bit_equal(on_cpu.mean, on_gpu.mean.cpu()));
  EXPECT_LT(max_abs_diff(on_cpu.log_prob, on_gpu.log_prob.cpu()), 1e-6);

  auto h = randn({2, 50, 384}, 72).requires_grad_(true), sh = randn({2, 384}, 73).requires_grad_(true),
       sc = randn({2, 384}, 74).requires_grad_(true);
  auto hg = h.detach().to(gpu).requires_grad_(true), shg = sh.detach().to(gpu).requires_grad_(true),
       scg = sc.detach().to(gpu).requires_grad_(true);
  auto w = randn({2, 50, 384}, 75);
  auto out_cpu = kernels::adaln_modulate(h, sh, sc), out_gpu = kernels::adaln_modulate(hg, shg, scg);
  EXPECT_LT(max_abs_diff(out_cpu.detach(), out_gpu.detach().cpu()), 2e-5);
  (out_cpu * w).sum().backward();
  (out_gpu * w.to(gpu)).sum().backward();
  EXPECT_LT(max_abs_diff(h.grad(), hg.grad().cpu()), 1e-4);
  EXPECT_LT(max_abs_diff(sc.grad(), scg.grad().cpu()), 1e-4);
  auto y = randn({2, 50, 384}, 76);
  EXPECT_TRUE(bit_equal(kernels::gated_residual(h.detach(), sh.detach(), y),
                        kernels::gated_residual(hg.detach(), shg.detach(), y.to(gpu)).cpu()));
  // The GELU on a GPU is LibTorch's: the same function to float rounding.
  auto gx = randn({2, 50, 384}, 77) * 3;
  EXPECT_LT(max_abs_diff(kernels::gelu_tanh(gx), kernels::gelu_tanh(gx.to(gpu)).cpu()), 1e-5);
  EXPECT_LT(max_abs_diff(kernels::gelu_tanh_backward(gx, y),
                         kernels::gelu_tanh_backward(gx.to(gpu), y.to(gpu)).cpu()),
            1e-4);
  // The linear layer on a GPU is one LibTorch GEMM a sample: the same product
  // to float rounding, and a sample's bits still independent of its batch.
  auto lw = randn({96, 384}, 78), lb = randn({96}, 79);
  auto ly = kernels::invariant_linear(h.detach().to(gpu), lw.to(gpu), lb.to(gpu));
  EXPECT_LT(max_abs_diff(kernels::invariant_linear(h.detach(), lw, lb), ly.cpu()), 1e-3);
  EXPECT_TRUE(bit_equal(ly[1].cpu(), kernels::invariant_linear(h.detach().slice(0, 1, 2).to(gpu),
                                                               lw.to(gpu), lb.to(gpu))[0]
                                         .cpu()));
}

namespace {

// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its derivative,
// in double: the reference both LibTorch's fp32 gelu and the fused kernel are
// measured against.
double gelu_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
double gelu_grad_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * std::sqrt(2.0 / M_PI) * (1.0 + 3 * 0.044715 * x * x);
}

// The worst error of `got` against `ref` over x, in units of max(|x|, 1) *
// 2^-24 (half an ulp of 1, or of x where it is larger).
double worst_scaled_error(const torch::Tensor& x, const torch::Tensor& got, double (*ref)(double)) {
  auto xs = x.contiguous().to(torch::kFloat64), gs = got.contiguous().to(torch::kFloat64);
  const double* xp = xs.data_ptr<double>();
  const double* gp = gs.data_ptr<double>();
  double worst = 0;
  for (int64_t i = 0; i < xs.numel(); ++i)
    worst = std::max(worst, std::abs(gp[i] - ref(xp[i])) /
                                (std::max(std::abs(xp[i]), 1.0) * std::ldexp(1.0, -24)));
  return worst;
}

torch::Tensor libtorch_gelu(const torch::Tensor& x) {
  return torch::nn::functional::gelu(x,
                                     torch::nn::functional::GELUFuncOptions().approximate("tanh"));
}

torch::Tensor gelu_inputs() {
  return torch::cat(
      {torch::linspace(-12, 12, 24001), randn({4096}, 60) * 3, randn({4096}, 61) * 0.01});
}

}  // namespace

TEST(FusedGelu, ExpIsWithinTwoUlpOfLibm) {
  for (float t = -87.0f; t <= 88.0f; t += 0.000731f) {
    const double want = std::exp(double(t));
    EXPECT_LE(std::abs(kernels::exp_clamped(t) - want), 2 * std::ldexp(want, -23)) << t;
  }
  EXPECT_EQ(kernels::exp_clamped(0.0f), 1.0f);
  // Clamped: never 0, a denormal or inf.
  EXPECT_EQ(kernels::exp_clamped(-1000.0f), kernels::exp_clamped(-87.0f));
  EXPECT_EQ(kernels::exp_clamped(1000.0f), kernels::exp_clamped(88.0f));
  EXPECT_TRUE(std::isfinite(kernels::exp_clamped(NAN)));
}

TEST(FusedGelu, AgreesWithLibTorchsTanhGeluToFloatRounding) {
  auto x = gelu_inputs();
  auto fused = kernels::gelu_tanh(x);
  auto libtorch = libtorch_gelu(x);
  const double fused_err = worst_scaled_error(x, fused, gelu_ref);
  const double libtorch_err = worst_scaled_error(x, libtorch, gelu_ref);
  // A few half-ulps, and no worse than LibTorch's own (which cancels in
  // 1 + tanh for x < 0).
  EXPECT_LT(fused_err, 8.0);
  EXPECT_LE(fused_err, libtorch_err + 1.0) << "LibTorch's: " << libtorch_err;
  EXPECT_LT(max_abs_diff(fused, libtorch), 3e-6);
}

TEST(FusedGelu, GradientMatchesTheDerivativeAndLibTorchsBackward) {
  auto x = gelu_inputs().requires_grad_(true);
  auto w = randn({x.numel()}, 62);
  auto grad = torch::autograd::grad({(kernels::gelu_tanh(x) * w).sum()}, {x})[0];
  auto x2 = x.detach().clone().requires_grad_(true);
  auto grad2 = torch::autograd::grad({(libtorch_gelu(x2) * w).sum()}, {x2})[0];
  EXPECT_LT(max_abs_diff(grad, grad2), 2e-5 * w.abs().max().item<double>());
  auto unit = kernels::gelu_tanh_backward(x.detach(), torch::ones_like(w));
  EXPECT_TRUE(bit_equal(grad, unit * w));
  // Relative to max(|x|, 1): the derivative grows as x^2 times a vanishing
  // gate, so its error is measured the same way as the value's.
  EXPECT_LT(worst_scaled_error(x.detach(), unit, gelu_grad_ref), 16.0);
  // A second derivative (create_graph) is LibTorch's.
  auto xs = randn({64}, 66).requires_grad_(true), xs2 = xs.detach().clone().requires_grad_(true);
  auto g1 = torch::autograd::grad({kernels::gelu_tanh(xs).sum()}, {xs}, {}, true, true)[0];
  auto g2 = torch::autograd::grad({libtorch_gelu(xs2).sum()}, {xs2}, {}, true, true)[0];
  auto h1 = torch::autograd::grad({g1.sum()}, {xs})[0],
       h2 = torch::autograd::grad({g2.sum()}, {xs2})[0];
  EXPECT_LT(max_abs_diff(h1, h2), 1e-6);
  EXPECT_GT(h1.abs().max().item<double>(), 0.1);
}

TEST(FusedGelu, TailsAndInfinitiesGiveTheLimitsAndNaNPropagates) {
  auto x = torch::tensor({-1e30f, -1e20f, -50.0f, -11.0f, 0.0f, -0.0f, 11.0f, 50.0f, 1e20f, 1e30f,
                          INFINITY, -INFINITY, NAN});
  auto y = kernels::gelu_tanh(x);
  auto g = kernels::gelu_tanh_backward(x, torch::ones_like(x));
  auto ya = y.accessor<float, 1>();
  auto ga = g.accessor<float, 1>();
  for (int i = 0; i < 4; ++i) {  // far left: gelu is -0 or a vanishing negative, the slope 0
    EXPECT_LE(ya[i], 0.0f) << i;
    EXPECT_GT(ya[i], -1e-20f) << i;
    EXPECT_EQ(ga[i], 0.0f) << i;
  }
  EXPECT_EQ(ya[4], 0.0f);
  EXPECT_EQ(ga[4], 0.5f);
  EXPECT_EQ(ya[5], 0.0f);
  for (int i = 6; i < 10; ++i) {  // far right: gelu is the identity, the slope 1
    EXPECT_EQ(ya[i], x[i].item<float>()) << i;
    EXPECT_EQ(ga[i], 1.0f) << i;
  }
  EXPECT_EQ(ya[10], INFINITY);
  EXPECT_EQ(ga[10], 1.0f);
  EXPECT_TRUE(std::isnan(ya[12]));
  EXPECT_TRUE(std::isnan(ga[12]));
}

TEST(FusedGelu, IsElementwiseWhateverTheThreadsAndReadsBf16) {
  auto x = randn({7, 65, 384}, 63) * 2;
  auto [one, two] = on_one_and_two_threads([&] { return kernels::gelu_tanh(x); });
  EXPECT_TRUE(bit_equal(one, two));
  EXPECT_TRUE(bit_equal(kernels::gelu_tanh(x.slice(0, 3, 4)), one.slice(0, 3, 4)));
  // A strided view reads the same elements.
  EXPECT_TRUE(bit_equal(kernels::gelu_tanh(x.transpose(1, 2)), one.transpose(1, 2).contiguous()));
  auto xb = x.to(torch::kBFloat16);
  auto yb = kernels::gelu_tanh(xb);
  ASSERT_EQ(yb.scalar_type(), torch::kBFloat16);
  auto ref = kernels::gelu_tanh(xb.to(torch::kFloat32));
  // One bf16 rounding of the output: relative 2^-8.
  EXPECT_LE(((yb.to(torch::kFloat32) - ref).abs() - ref.abs() * (1.0 / 256)).max().item<double>(),
            1e-6);
  auto xg = xb.detach().requires_grad_(true);
  kernels::gelu_tanh(xg).sum().backward();
  EXPECT_EQ(xg.grad().scalar_type(), torch::kBFloat16);
}

TEST(FusedGelu, BadInputGetsAClearError) {
  auto x = randn({4, 8}, 64);
  EXPECT_THROW(kernels::gelu_tanh(x.to(torch::kFloat64)), std::invalid_argument);
  EXPECT_THROW(kernels::gelu_tanh(x.to(torch::kInt32)), std::invalid_argument);
  EXPECT_THROW(kernels::gelu_tanh_backward(x, randn({4, 9}, 65)), std::invalid_argument);
  EXPECT_EQ(kernels::gelu_tanh(torch::empty({0, 8})).numel(), 0);
}

namespace {

// x W^T + b in double: the reference the fp32 kernel is measured against.
torch::Tensor linear_ref(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto y = torch::matmul(x.to(torch::kFloat64), w.to(torch::kFloat64).t());
  return b.defined() ? y + b.to(torch::kFloat64) : y;
}

}  // namespace

// Sizes that are no multiple of a register block (8 or 6 rows) or a panel (16
// columns): the edges take the same fused operations in the same order.
TEST(InvariantLinear, EveryInstructionSetGivesTheScalarReferencesBits) {
  auto x = randn({13, 37}, 80), w = randn({53, 37}, 81), b = randn({53}, 82);
  const auto packed = kernels::pack_weight(w.data_ptr<float>(), 53, 37);
  for (bool bias : {true, false}) {
    auto run = [&](kernels::LinearIsa isa) {
      auto y = torch::empty({13, 53});
      kernels::linear_rows(x.data_ptr<float>(), packed, bias ? b.data_ptr<float>() : nullptr,
                           y.data_ptr<float>(), 0, 13, isa);
      return y;
    };
    auto scalar = run(kernels::LinearIsa::kScalar);
    // fp32 accumulation of 37 products of unit normals: a few ulp of the sum's scale.
    EXPECT_LT(max_abs_diff(scalar, linear_ref(x, w, bias ? b : torch::Tensor())), 1e-4);
    for (auto isa :
         {kernels::LinearIsa::kBest, kernels::LinearIsa::kAvx512, kernels::LinearIsa::kAvx2Fma}) {
      if (!kernels::linear_isa_supported(isa)) continue;
      EXPECT_TRUE(bit_equal(run(isa), scalar)) << "instruction set " << int(isa);
    }
  }
  // in = 0: an empty sum, the bias alone.
  auto y =
      kernels::invariant_linear(torch::empty({2, 3, 0}), torch::empty({5, 0}), b.slice(0, 0, 5));
  EXPECT_TRUE(bit_equal(y, b.slice(0, 0, 5).expand({2, 3, 5}).contiguous()));
}

TEST(InvariantLinear, ARowsBitsDoNotDependOnItsBatchPlaceOrThreads) {
  auto x = randn({9, 41, 96}, 83), w = randn({288, 96}, 84), b = randn({288}, 85);
  auto [one, two] = on_one_and_two_threads([&] { return kernels::invariant_linear(x, w, b); });
  EXPECT_TRUE(bit_equal(one, two)) << "the thread count changed a row";
  for (int64_t s : {0, 4, 8})
    EXPECT_TRUE(bit_equal(kernels::invariant_linear(x.slice(0, s, s + 1), w, b)[0], one[s]))
        << "sample " << s << " alone differs from itself in the batch";
  // A row at another place: rows shifted by 3 against the register blocks.
  auto shifted = kernels::invariant_linear(x.view({-1, 96}).slice(0, 3), w, b);
  EXPECT_TRUE(bit_equal(shifted, one.view({-1, 288}).slice(0, 3)));
  // A strided x reads the same rows.
  auto xt = x.transpose(0, 1);
  EXPECT_TRUE(bit_equal(kernels::invariant_linear(xt, w, b), one.transpose(0, 1).contiguous()));
  EXPECT_LT(max_abs_diff(one, linear_ref(x, w, b)), 1e-3);
}

// The backward is one GEMM over all rows: the gradients of torch::nn::Linear,
// to the first and the second order.
TEST(InvariantLinear, GradientsMatchLibTorchsLinear) {
  torch::manual_seed(3);
  for (bool bias : {true, false}) {
    torch::nn::Linear l(torch::nn::LinearOptions(24, 40).bias(bias));
    auto x = torch::randn({5, 7, 24}, torch::requires_grad());
    auto y = kernels::invariant_linear(x, l->weight, l->bias);
    auto ref = l->forward(x);
    EXPECT_LT(max_abs_diff(y.detach(), ref.detach()), 1e-5);
    auto g = torch::randn_like(y);
    std::vector<torch::Tensor> inputs{x, l->weight};
    if (bias) inputs.push_back(l->bias);
    auto mine = torch::autograd::grad({y}, inputs, {g}, true, true);
    auto theirs = torch::autograd::grad({ref}, inputs, {g}, true, true);
    for (size_t i = 0; i < inputs.size(); ++i)
      EXPECT_LT(max_abs_diff(mine[i], theirs[i]), 1e-4) << "gradient " << i;
    // Second order (create_graph): the gradient with respect to x of a
    // function of the weight gradient.
    auto mine2 = torch::autograd::grad({(mine[1] * mine[1]).sum()}, {x});
    auto theirs2 = torch::autograd::grad({(theirs[1] * theirs[1]).sum()}, {x});
    EXPECT_LT(max_abs_diff(mine2[0], theirs2[0]), 1e-3);
  }
}

TEST(InvariantLinear, Bf16GoesThroughLibTorchAndBadInputGetsAClearError) {
  auto x = randn({3, 5, 16}, 86), w = randn({8, 16}, 87), b = randn({8}, 88);
  auto yb = kernels::invariant_linear(x.to(torch::kBFloat16), w.to(torch::kBFloat16),
                                      b.to(torch::kBFloat16));
  ASSERT_EQ(yb.scalar_type(), torch::kBFloat16);
  EXPECT_LT(max_abs_diff(yb, linear_ref(x, w, b)), 0.25);
  EXPECT_THROW(kernels::invariant_linear(x, w.view({-1})), std::invalid_argument);
  EXPECT_THROW(kernels::invariant_linear(x, randn({8, 15}, 89)), std::invalid_argument);
  EXPECT_THROW(kernels::invariant_linear(x, w, randn({7}, 90)), std::invalid_argument);
  EXPECT_THROW(kernels::invariant_linear(x.view({-1}), w), std::invalid_argument);
  EXPECT_EQ(kernels::invariant_linear(torch::empty({0, 4, 16}), w, b).sizes(),
            (std::vector<int64_t>{0, 4, 8}));
}

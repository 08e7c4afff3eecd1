#include "kernels/gelu.h"

#include <cstring>

#include "kernels/cpu_dispatch.h"

namespace spotlight::kernels {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
// ln 2 split in two (Cody and Waite): n * kLn2Hi is exact for |n| < 2^9, so
// t - n ln 2 loses no bits to the subtraction.
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.42860682030941723212e-6f;
// 1.5 * 2^23: adding and subtracting it rounds a float of magnitude < 2^22 to
// the nearest integer in the current (round-to-nearest) mode, without a libm
// call and in every instruction set the clones target.
constexpr float kRoundMagic = 12582912.0f;

// The kernels are built with -ffp-contract=off and no -ffast-math, so these
// operations run as written and in this order in every clone.
SPOTLIGHT_INLINE float exp_impl(float t) {
  // Selects, not branches, so the loop vectorizes; written so that a NaN
  // becomes -87 (the comparison is false) and the integer conversion below
  // always sees a number.
  t = t > -87.0f ? t : -87.0f;
  t = t < 88.0f ? t : 88.0f;
  const float n = (t * kLog2e + kRoundMagic) - kRoundMagic;  // round(t / ln 2), in [-126, 127]
  const float r = (t - n * kLn2Hi) - n * kLn2Lo;             // |r| <= ln 2 / 2 (plus rounding)
  // e^r by its Taylor series to r^7: the remainder, r^8 / 8!, is under 5.2e-9.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n built in the exponent field: n + 127 is in [1, 254], a normal float.
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;  // 2 sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

// s = 1 / (1 + exp(-z)), with 0 below z = -87 (see gelu.h).
SPOTLIGHT_INLINE float gate(float x) {
  const float z = kTwoSqrt2OverPi * (x + kCubic * (x * x * x));
  const float s = 1.0f / (1.0f + exp_impl(-z));
  // A NaN input keeps a NaN gate (z != z), so its slope is NaN too.
  return z < -87.0f ? 0.0f : (z != z ? z : s);
}

SPOTLIGHT_INLINE void forward_f32(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * gate(x[i]);
}

SPOTLIGHT_INLINE void backward_f32(const float* __restrict x, const float* __restrict g,
                                   float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = gate(v);
    const float w = s * (1.0f - s);
    const float du = kTwoSqrt2OverPi * (1.0f + (3.0f * kCubic) * (v * v));
    // Where s is exactly 0 or 1 the second term is 0, even where v * v
    // overflows (0 * inf would be NaN).
    const float term = w == 0.0f ? 0.0f : (v * w) * du;
    dx[i] = g[i] * (s + term);
  }
}

// bf16 goes through fp32 blocks on the stack: widening, the gate and
// narrowing in one loop do not vectorize together (10x slower), each alone
// does.
constexpr int64_t kBlock = 512;

SPOTLIGHT_INLINE void widen_block(const Bf16* __restrict in, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = widen(in[i]);
}

SPOTLIGHT_INLINE void narrow_block(const float* __restrict in, Bf16* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) narrow(out + i, in[i]);
}

}  // namespace

SPOTLIGHT_CPU_CLONES void gelu_tanh_forward(const void* x, void* y, ElementType type, int64_t begin,
                                            int64_t end) {
  if (type == ElementType::kF32) {
    forward_f32(static_cast<const float*>(x) + begin, static_cast<float*>(y) + begin, end - begin);
    return;
  }
  float xs[kBlock], ys[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = end - b < kBlock ? end - b : kBlock;
    widen_block(static_cast<const Bf16*>(x) + b, xs, n);
    forward_f32(xs, ys, n);
    narrow_block(ys, static_cast<Bf16*>(y) + b, n);
  }
}

SPOTLIGHT_CPU_CLONES void gelu_tanh_backward(const void* x, const void* grad, void* dx,
                                             ElementType type, int64_t begin, int64_t end) {
  if (type == ElementType::kF32) {
    backward_f32(static_cast<const float*>(x) + begin, static_cast<const float*>(grad) + begin,
                 static_cast<float*>(dx) + begin, end - begin);
    return;
  }
  float xs[kBlock], gs[kBlock], ds[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = end - b < kBlock ? end - b : kBlock;
    widen_block(static_cast<const Bf16*>(x) + b, xs, n);
    widen_block(static_cast<const Bf16*>(grad) + b, gs, n);
    backward_f32(xs, gs, ds, n);
    narrow_block(ds, static_cast<Bf16*>(dx) + b, n);
  }
}

float exp_clamped(float t) {
  return exp_impl(t);
}

}  // namespace spotlight::kernels

#include "kernels/adaln.h"

#include <cmath>
#include <vector>

#include "kernels/cpu_dispatch.h"

namespace spotlight::kernels {
namespace {

// Independent fp32 lane accumulators: vectorized without reassociation and
// combined in a fixed order, so the statistics are the same on every run.
constexpr int kLanes = 16;

template <typename T>
SPOTLIGHT_INLINE float lane_sum(const T* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += widen(x[i + l]);
  for (; i < n; ++i) acc[0] += widen(x[i]);
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

template <typename T>
SPOTLIGHT_INLINE float lane_sq_sum(const T* x, int64_t n, float mean) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float d = widen(x[i + l]) - mean;
      acc[l] += d * d;
    }
  for (; i < n; ++i) {
    const float d = widen(x[i]) - mean;
    acc[0] += d * d;
  }
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

template <typename T>
SPOTLIGHT_INLINE void adaln_impl(const AdaLnArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t C = a.channels;
  const T* x = static_cast<const T*>(a.x);
  const T* shift = static_cast<const T*>(a.shift);
  const T* scale = static_cast<const T*>(a.scale);
  T* out = static_cast<T*>(a.out);
  std::vector<float> one_plus(C), sh(C);
  int64_t cached_b = -1;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t b = r / a.tokens;
    if (b != cached_b) {  // the modulation of this sample, widened once
      for (int64_t c = 0; c < C; ++c) {
        one_plus[c] = 1.0f + widen(scale[b * C + c]);
        sh[c] = widen(shift[b * C + c]);
      }
      cached_b = b;
    }
    const T* xr = x + r * C;
    // Two passes (mean, then squared deviations): no cancellation for rows
    // with a large mean, unlike E[x^2] - E[x]^2.
    const float mean = lane_sum(xr, C) / float(C);
    const float var = lane_sq_sum(xr, C, mean) / float(C);
    const float rstd = 1.0f / std::sqrt(var + a.eps);
    if (a.row_mean) a.row_mean[r] = mean;
    if (a.row_rstd) a.row_rstd[r] = rstd;
    T* o = out + r * C;
    for (int64_t c = 0; c < C; ++c) narrow(o + c, ((widen(xr[c]) - mean) * rstd) * one_plus[c] + sh[c]);
  }
}

// out never aliases the inputs (restrict), so the loop vectorizes for bf16 too.
template <typename T>
SPOTLIGHT_INLINE void gated_row(const T* __restrict res, const T* __restrict g, const T* __restrict y, T* __restrict out,
               int64_t C) {
  for (int64_t c = 0; c < C; ++c) narrow(out + c, widen(res[c]) + widen(g[c]) * widen(y[c]));
}

template <typename T>
SPOTLIGHT_INLINE void gated_impl(const GatedResidualArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t C = a.channels;
  const T* res = static_cast<const T*>(a.residual);
  const T* gate = static_cast<const T*>(a.gate);
  const T* y = static_cast<const T*>(a.y);
  T* out = static_cast<T*>(a.out);
  for (int64_t r = row_begin; r < row_end; ++r) gated_row(res + r * C, gate + (r / a.tokens) * C, y + r * C, out + r * C, C);
}

}  // namespace

SPOTLIGHT_CPU_CLONES void adaln_rows(const AdaLnArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == ElementType::kF32)
    adaln_impl<float>(a, row_begin, row_end);
  else
    adaln_impl<Bf16>(a, row_begin, row_end);
}

SPOTLIGHT_CPU_CLONES void gated_residual_rows(const GatedResidualArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == ElementType::kF32)
    gated_impl<float>(a, row_begin, row_end);
  else
    gated_impl<Bf16>(a, row_begin, row_end);
}

}  // namespace spotlight::kernels

#include "kernels/sde_step.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu_dispatch.h"

namespace spotlight::kernels {

SdeCoefficients sde_coefficients(double s, double s_next, double sigma_max, double noise_level) {
  if (!(s_next >= 0 && s_next < s && s <= 1))
    throw std::invalid_argument("sde step: needs 0 <= s_next < s <= 1");
  if (!(sigma_max >= 0 && sigma_max < 1)) throw std::invalid_argument("sde step: sigma_max must lie in [0, 1)");
  if (!(noise_level >= 0)) throw std::invalid_argument("sde step: noise_level must be >= 0");
  const double dt = s_next - s;
  SdeCoefficients c;
  if (noise_level == 0) {
    c.v_coef = float(dt);
    return c;
  }
  const double s_div = (s == 1.0) ? sigma_max : s;  // 1 - s = 0 at pure noise
  const double std = noise_level * std::sqrt(s / (1.0 - s_div));
  c.std = std;
  c.x_coef = float(1.0 + std * std * dt / (2.0 * s));
  c.v_coef = float((1.0 + std * std * (1.0 - s) / (2.0 * s)) * dt);
  c.std_dt = float(std * std::sqrt(-dt));
  const double sd = c.std_dt;
  c.inv_two_var = 1.0 / (2.0 * sd * sd);
  c.log_norm = -std::log(sd) - 0.5 * std::log(2.0 * M_PI);
  return c;
}

namespace {

// Lanes of independent double accumulators: the compiler vectorizes them
// without reassociating anything, and they are added in a fixed order.
constexpr int kLanes = 8;

template <typename T>
SPOTLIGHT_INLINE double chunk_impl(const T* x, const T* v, const float* noise, float* x_next, float* mean, int64_t n,
                  const SdeCoefficients& c) {
  const float xc = c.x_coef, vc = c.v_coef, sd = c.std_dt;
  if (sd == 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      const float m = widen(x[i]) * xc + widen(v[i]) * vc;
      x_next[i] = m;
      if (mean) mean[i] = m;
    }
    return 0.0;
  }
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float m = widen(x[i + l]) * xc + widen(v[i + l]) * vc;
      const float xn = m + noise[i + l] * sd;
      x_next[i + l] = xn;
      if (mean) mean[i + l] = m;
      const double d = double(xn - m);
      acc[l] += d * d;
    }
  }
  for (; i < n; ++i) {
    const float m = widen(x[i]) * xc + widen(v[i]) * vc;
    const float xn = m + noise[i] * sd;
    x_next[i] = xn;
    if (mean) mean[i] = m;
    const double d = double(xn - m);
    acc[0] += d * d;
  }
  double sum = 0;
  for (double a : acc) sum += a;
  return sum;
}

}  // namespace

SPOTLIGHT_CPU_CLONES double sde_step_chunk(const SdeStepArgs& a, const SdeCoefficients& c, int64_t b, int64_t chunk) {
  const int64_t begin = chunk * kSdeChunk, n = std::min(kSdeChunk, a.dim - begin);
  if (n <= 0) return 0.0;
  const int64_t off = b * a.dim + begin;
  const float* noise = c.std_dt == 0.0f ? nullptr : a.noise + off;
  float* mean = a.mean ? a.mean + off : nullptr;
  if (a.type == ElementType::kF32)
    return chunk_impl(static_cast<const float*>(a.x) + off, static_cast<const float*>(a.v) + off, noise,
                      a.x_next + off, mean, n, c);
  return chunk_impl(static_cast<const Bf16*>(a.x) + off, static_cast<const Bf16*>(a.v) + off, noise,
                    a.x_next + off, mean, n, c);
}

float sde_log_prob(const double* chunk_sums, int64_t chunks, int64_t dim, const SdeCoefficients& c) {
  double sum = 0;
  for (int64_t k = 0; k < chunks; ++k) sum += chunk_sums[k];
  return float(-sum * c.inv_two_var / double(dim) + c.log_norm);
}

void sde_step_reference(const SdeStepArgs& a, const SdeCoefficients& c) {
  if (c.std_dt != 0.0f && !a.noise) throw std::invalid_argument("sde step: a stochastic step needs noise");
  const int64_t chunks = sde_chunks(a.dim);
  std::vector<double> sums(chunks);
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t k = 0; k < chunks; ++k) sums[k] = sde_step_chunk(a, c, b, k);
    if (a.log_prob && c.std_dt != 0.0f) a.log_prob[b] = sde_log_prob(sums.data(), chunks, a.dim, c);
  }
}

}  // namespace spotlight::kernels

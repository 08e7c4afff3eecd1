// The fused Flow-GRPO SDE step (../shared/reference/dit_rl.md §1.2-1.4), CPU
// reference. One pass over a sample's elements computes
//
//   mean     = x * x_coef + v * v_coef            (the step mean; the ODE step when std_dt = 0)
//   x_next   = mean + noise * std_dt
//   log_prob = mean over elements of log N(x_next; mean, std_dt^2)
//            = -(sum (x_next - mean)^2) / (2 std_dt^2 D) - log(std_dt) - log(2 pi) / 2
//
// where, with dt = s_next - s < 0, s' = s (sigma_max when s = 1) and
// std = a sqrt(s / (1 - s')):
//   x_coef = 1 + std^2 dt / (2 s),  v_coef = (1 + std^2 (1 - s) / (2 s)) dt,  std_dt = std sqrt(-dt).
//
// The coefficients are computed in double and rounded to fp32 once, as LibTorch
// does for a double scalar times an fp32 tensor, so mean and x_next are
// bit-identical to the composed operations (x * c1 + v * c2, each rounded).
// The log-prob sum is accumulated in double in fixed chunks of kSdeChunk
// elements, so its value never depends on how the work is split over threads.
#pragma once

#include <cstdint>

#include "kernels/element.h"

namespace spotlight::kernels {

struct SdeCoefficients {
  float x_coef = 1.0f;
  float v_coef = 0.0f;
  float std_dt = 0.0f;        // 0: a deterministic (ODE) step
  double std = 0.0;           // std without sqrt(-dt), as Flow-GRPO's KL uses it
  double inv_two_var = 0.0;   // 1 / (2 std_dt^2), from the fp32 std_dt
  double log_norm = 0.0;      // -log(std_dt) - log(2 pi) / 2
};

// Throws std::invalid_argument unless 0 <= s_next < s <= 1, sigma_max in [0, 1)
// and noise_level >= 0. noise_level 0 gives the Euler ODE step.
SdeCoefficients sde_coefficients(double s, double s_next, double sigma_max, double noise_level);

// One step over a batch of samples of `dim` elements each. x and v are fp32 or
// bf16 (`type`); noise, x_next, mean and log_prob are fp32. mean, log_prob and
// (for an ODE step) noise may be null.
struct SdeStepArgs {
  const void* x = nullptr;
  const void* v = nullptr;
  const float* noise = nullptr;
  float* x_next = nullptr;
  float* mean = nullptr;
  float* log_prob = nullptr;  // [batch]
  ElementType type = ElementType::kF32;
  int64_t batch = 0;
  int64_t dim = 0;
};

inline constexpr int64_t kSdeChunk = 16384;

inline int64_t sde_chunks(int64_t dim) { return dim == 0 ? 1 : (dim + kSdeChunk - 1) / kSdeChunk; }

// Chunk c of sample b: writes its x_next and mean and returns its sum of
// (x_next - mean)^2 (0 for an ODE step). Chunks are independent.
double sde_step_chunk(const SdeStepArgs& a, const SdeCoefficients& c, int64_t b, int64_t chunk);

// log_prob of one sample from its chunk sums, added in chunk order.
float sde_log_prob(const double* chunk_sums, int64_t chunks, int64_t dim, const SdeCoefficients& c);

// The whole step, one thread.
void sde_step_reference(const SdeStepArgs& a, const SdeCoefficients& c);

}  // namespace spotlight::kernels

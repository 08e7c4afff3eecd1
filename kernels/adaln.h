// Fused LayerNorm + adaLN modulation, and the gated residual add: the
// element-wise work around every attention and MLP of a DiT block, CPU
// reference.
//
//   adaln:          out[b,n,:] = LN(x[b,n,:]) * (1 + scale[b,:]) + shift[b,:]
//                   LN without affine parameters: (x - mean) * rstd, rstd = 1 / sqrt(var + eps),
//                   var the biased variance over the channels
//   gated residual: out[b,n,:] = residual[b,n,:] + gate[b,:] * y[b,n,:]
//
// x, shift, scale, residual, gate, y and out share one element type (fp32 or
// bf16); arithmetic and the saved row statistics are fp32. Rows are
// independent: a row's output never depends on the batch it is in.
#pragma once

#include <cstdint>

#include "kernels/element.h"

namespace spotlight::kernels {

struct AdaLnArgs {
  const void* x = nullptr;      // [batch, tokens, channels]
  const void* shift = nullptr;  // [batch, channels]
  const void* scale = nullptr;  // [batch, channels]
  void* out = nullptr;          // [batch, tokens, channels]
  float* row_mean = nullptr;    // [batch * tokens], optional (saved for the backward pass)
  float* row_rstd = nullptr;    // [batch * tokens], optional
  ElementType type = ElementType::kF32;
  int64_t batch = 0, tokens = 0, channels = 0;
  float eps = 1e-6f;
};

// Rows [row_begin, row_end) of the batch * tokens rows.
void adaln_rows(const AdaLnArgs& a, int64_t row_begin, int64_t row_end);

struct GatedResidualArgs {
  const void* residual = nullptr;  // [batch, tokens, channels]
  const void* gate = nullptr;      // [batch, channels]
  const void* y = nullptr;         // [batch, tokens, channels]
  void* out = nullptr;             // [batch, tokens, channels]; never aliases an input
  ElementType type = ElementType::kF32;
  int64_t batch = 0, tokens = 0, channels = 0;
};

void gated_residual_rows(const GatedResidualArgs& a, int64_t row_begin, int64_t row_end);

}  // namespace spotlight::kernels

// Row-invariant linear layer, CPU reference: y = x W^T + b, where every row of
// y is computed from its row of x alone, in one fixed order, whatever the
// number of rows, their position and the thread count. A seeded rollout's
// bits must not depend on the batch a sample sits in; OpenBLAS picks kernels
// and blockings by the row count, so one GEMM over a batch is not invariant,
// and one GEMM a sample (what the DiT ran before) repacks W for every sample
// and pays a BLAS call's overhead for products of 64 x 96 x 288.
//
// Each output is acc + b with acc = fma(x[k], W[k], acc) over k = 0, 1, ...,
// in-1 from acc = 0 (b = 0 without a bias): the AVX-512, AVX2 + FMA and
// scalar paths do exactly these fused operations, so they give the same bits
// as one another. fp32 only (the models' bf16 and GPU paths use LibTorch).
#pragma once

#include <cstdint>
#include <vector>

namespace spotlight::kernels {

// W [out, in] rearranged into panels of 16 output columns, k-major and zero
// padded: panel p holds W[16p + j, k] at [p][k][j]. Packed once a call and
// shared by every row block.
struct PackedWeight {
  int64_t in = 0, out = 0;
  std::vector<float> panels;
};

PackedWeight pack_weight(const float* weight, int64_t out, int64_t in);

// The instruction sets linear_rows runs on; every one gives the same bits.
enum class LinearIsa { kBest, kAvx512, kAvx2Fma, kScalar };

// Whether this machine runs `isa` (kBest and kScalar: always).
bool linear_isa_supported(LinearIsa isa);

// y[r, :] = x[r, :] W^T + bias for r in [row_begin, row_end); x [rows, in] and
// y [rows, out] row-major and dense; bias [out] or null. `isa` other than
// kBest is for the tests; it must be supported.
void linear_rows(const float* x, const PackedWeight& w, const float* bias, float* y,
                 int64_t row_begin, int64_t row_end, LinearIsa isa = LinearIsa::kBest);

}  // namespace spotlight::kernels

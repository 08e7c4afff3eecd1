#include "kernels/linear.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define SPOTLIGHT_LINEAR_X86 1
#endif

namespace spotlight::kernels {
namespace {

constexpr int64_t kPanel = 16;  // output columns a packed panel holds

int64_t panel_count(int64_t out) {
  return (out + kPanel - 1) / kPanel;
}

// The reference every vector path matches bit for bit: one fused
// multiply-add a k, in order, then the bias.
void rows_scalar(const float* x, const PackedWeight& w, const float* bias, float* y,
                 int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t c = 0; c < w.out; ++c) {
      const float* panel = w.panels.data() + (c / kPanel) * w.in * kPanel + c % kPanel;
      float acc = 0.0f;
      for (int64_t k = 0; k < w.in; ++k) acc = std::fma(x[r * w.in + k], panel[k * kPanel], acc);
      y[r * w.out + c] = acc + (bias ? bias[c] : 0.0f);
    }
  }
}

#ifdef SPOTLIGHT_LINEAR_X86

// R rows x P panels of 16 columns in zmm accumulators: per k, P loads of the
// packed weight, R broadcasts of x and R * P fused multiply-adds.
template <int R, int P>
[[gnu::target("avx512f")]] void tile_avx512(const float* x, int64_t in, const float* wp,
                                            const float* bias, float* y, int64_t out,
                                            int64_t col0) {
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int64_t k = 0; k < in; ++k) {
    __m512 w[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) w[p] = _mm512_loadu_ps(wp + p * in * kPanel + k * kPanel);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * in + k]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(a, w[p], acc[r][p]);
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) {
    const int64_t c = col0 + p * kPanel;
    const int64_t n = std::min<int64_t>(kPanel, out - c);
    const __mmask16 mask = __mmask16((1u << n) - 1u);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + c) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      _mm512_mask_storeu_ps(y + r * out + c, mask, _mm512_add_ps(acc[r][p], b));
  }
}

template <int R>
[[gnu::target("avx512f")]] void block_avx512(const float* x, const PackedWeight& w,
                                             const float* bias, float* y) {
  const int64_t panels = panel_count(w.out);
  const float* wp = w.panels.data();
  int64_t p = 0;
  for (; p + 2 <= panels; p += 2)
    tile_avx512<R, 2>(x, w.in, wp + p * w.in * kPanel, bias, y, w.out, p * kPanel);
  if (p < panels) tile_avx512<R, 1>(x, w.in, wp + p * w.in * kPanel, bias, y, w.out, p * kPanel);
}

// AVX2 has 16 vector registers: R rows x one panel (two ymm) leaves room for
// the two weight vectors and the broadcast.
template <int R>
[[gnu::target("avx2,fma")]] void tile_avx2(const float* x, int64_t in, const float* wp,
                                           const float* bias, float* y, int64_t out, int64_t col0) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < in; ++k) {
    const __m256 w0 = _mm256_loadu_ps(wp + k * kPanel), w1 = _mm256_loadu_ps(wp + k * kPanel + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_set1_ps(x[r * in + k]);
      acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int h = 0; h < 2; ++h) {
    const int64_t c = col0 + h * 8;
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(out - c, 0, 8))), lane);
    const __m256 b = bias ? _mm256_maskload_ps(bias + c, mask) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
      _mm256_maskstore_ps(y + r * out + c, mask, _mm256_add_ps(acc[r][h], b));
  }
}

template <int R>
[[gnu::target("avx2,fma")]] void block_avx2(const float* x, const PackedWeight& w,
                                            const float* bias, float* y) {
  for (int64_t p = 0; p < panel_count(w.out); ++p)
    tile_avx2<R>(x, w.in, w.panels.data() + p * w.in * kPanel, bias, y, w.out, p * kPanel);
}

#endif  // SPOTLIGHT_LINEAR_X86

// Rows [row_begin, row_end) in register blocks of sizeof...(kBlocks) rows;
// kBlocks[n - 1] runs a block of n rows (the last block may be short).
using BlockFn = void (*)(const float* x, const PackedWeight& w, const float* bias, float* y);

template <BlockFn... kBlocks>
void rows_in_blocks(const float* x, const PackedWeight& w, const float* bias, float* y,
                    int64_t row_begin, int64_t row_end) {
  constexpr BlockFn blocks[] = {kBlocks...};
  constexpr int64_t kRows = sizeof...(kBlocks);
  for (int64_t r = row_begin; r < row_end; r += kRows)
    blocks[std::min(kRows, row_end - r) - 1](x + r * w.in, w, bias, y + r * w.out);
}

}  // namespace

PackedWeight pack_weight(const float* weight, int64_t out, int64_t in) {
  PackedWeight w;
  w.in = in;
  w.out = out;
  w.panels.assign(size_t(panel_count(out) * in * kPanel), 0.0f);
  for (int64_t c = 0; c < out; ++c)
    for (int64_t k = 0; k < in; ++k)
      w.panels[size_t((c / kPanel) * in * kPanel + k * kPanel + c % kPanel)] = weight[c * in + k];
  return w;
}

bool linear_isa_supported(LinearIsa isa) {
#ifdef SPOTLIGHT_LINEAR_X86
  if (isa == LinearIsa::kAvx512) return __builtin_cpu_supports("avx512f");
  if (isa == LinearIsa::kAvx2Fma)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  if (isa == LinearIsa::kAvx512 || isa == LinearIsa::kAvx2Fma) return false;
#endif
  return true;
}

void linear_rows(const float* x, const PackedWeight& w, const float* bias, float* y,
                 int64_t row_begin, int64_t row_end, LinearIsa isa) {
  if (isa == LinearIsa::kBest)
    isa = linear_isa_supported(LinearIsa::kAvx512)    ? LinearIsa::kAvx512
          : linear_isa_supported(LinearIsa::kAvx2Fma) ? LinearIsa::kAvx2Fma
                                                      : LinearIsa::kScalar;
#ifdef SPOTLIGHT_LINEAR_X86
  if (isa == LinearIsa::kAvx512)
    return rows_in_blocks<block_avx512<1>, block_avx512<2>, block_avx512<3>, block_avx512<4>,
                          block_avx512<5>, block_avx512<6>, block_avx512<7>, block_avx512<8>>(
        x, w, bias, y, row_begin, row_end);
  if (isa == LinearIsa::kAvx2Fma)
    return rows_in_blocks<block_avx2<1>, block_avx2<2>, block_avx2<3>, block_avx2<4>, block_avx2<5>,
                          block_avx2<6>>(x, w, bias, y, row_begin, row_end);
#endif
  rows_scalar(x, w, bias, y, row_begin, row_end);
}

}  // namespace spotlight::kernels

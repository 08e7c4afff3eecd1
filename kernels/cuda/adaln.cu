// Fused LayerNorm + adaLN modulation and the gated residual add on the GPU
// (kernels/adaln.h has the formulas and the CPU reference). One block per
// row: the row is read once into shared memory as fp32, its mean and variance
// are reduced in a fixed order (two passes, as the reference), and the
// modulated row is written once.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace spotlight::kernels::cuda {
namespace {

template <typename T>
__global__ void adaln_kernel(const T* __restrict__ x, const T* __restrict__ shift, const T* __restrict__ scale,
                             T* __restrict__ out, float* __restrict__ row_mean, float* __restrict__ row_rstd,
                             int64_t tokens, int64_t channels, float eps) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, b = r / tokens, C = channels;
  const T* xr = x + r * C;
  float sum = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float f = to_float(xr[c]);
    row[c] = f;
    sum += f;
  }
  const float mean = block_sum(sum, scratch) / float(C);
  float sq = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = row[c] - mean;
    sq += d * d;
  }
  const float var = block_sum(sq, scratch) / float(C);
  const float rstd = 1.0f / sqrtf(var + eps);
  if (threadIdx.x == 0) {
    if (row_mean) row_mean[r] = mean;
    if (row_rstd) row_rstd[r] = rstd;
  }
  const T* sh = shift + b * C;
  const T* sc = scale + b * C;
  T* o = out + r * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    from_float(o + c, ((row[c] - mean) * rstd) * (1.0f + to_float(sc[c])) + to_float(sh[c]));
}

template <typename T>
__global__ void gated_kernel(const T* residual, const T* __restrict__ gate, const T* __restrict__ y, T* out,
                             int64_t tokens, int64_t channels) {
  const int64_t r = blockIdx.x, C = channels;
  const T* g = gate + (r / tokens) * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    from_float(out + r * C + c, to_float(residual[r * C + c]) + to_float(g[c]) * to_float(y[r * C + c]));
}

// Threads per row: a multiple of 32 with about four channels each, 32..512.
int threads_for(int64_t channels) {
  int64_t t = (channels + 3) / 4;
  t = (t + 31) / 32 * 32;
  return int(t < 32 ? 32 : (t > 512 ? 512 : t));
}

void check_rows(int64_t rows) {
  if (rows > 0x7fffffff) throw std::invalid_argument("adaln: more than 2^31 - 1 rows in one call");
}

}  // namespace

void adaln(const AdaLnArgs& a, void* stream) {
  const int64_t rows = a.batch * a.tokens;
  if (rows <= 0 || a.channels <= 0) return;
  check_rows(rows);
  const size_t smem = size_t(a.channels) * sizeof(float);
  const int threads = threads_for(a.channels);
  auto s = as_stream(stream);
  if (a.type == ElementType::kF32) {
    if (smem > 48 * 1024)
      check(cudaFuncSetAttribute(adaln_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
            "adaln shared memory");
    adaln_kernel<float><<<unsigned(rows), threads, smem, s>>>(
        static_cast<const float*>(a.x), static_cast<const float*>(a.shift), static_cast<const float*>(a.scale),
        static_cast<float*>(a.out), a.row_mean, a.row_rstd, a.tokens, a.channels, a.eps);
  } else {
    if (smem > 48 * 1024)
      check(cudaFuncSetAttribute(adaln_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(smem)),
            "adaln shared memory");
    adaln_kernel<__nv_bfloat16><<<unsigned(rows), threads, smem, s>>>(
        static_cast<const __nv_bfloat16*>(a.x), static_cast<const __nv_bfloat16*>(a.shift),
        static_cast<const __nv_bfloat16*>(a.scale), static_cast<__nv_bfloat16*>(a.out), a.row_mean, a.row_rstd,
        a.tokens, a.channels, a.eps);
  }
  check_launch("adaln kernel");
}

void gated_residual(const GatedResidualArgs& a, void* stream) {
  const int64_t rows = a.batch * a.tokens;
  if (rows <= 0 || a.channels <= 0) return;
  check_rows(rows);
  const int threads = threads_for(a.channels);
  auto s = as_stream(stream);
  if (a.type == ElementType::kF32)
    gated_kernel<float><<<unsigned(rows), threads, 0, s>>>(static_cast<const float*>(a.residual),
                                                           static_cast<const float*>(a.gate),
                                                           static_cast<const float*>(a.y),
                                                           static_cast<float*>(a.out), a.tokens, a.channels);
  else
    gated_kernel<__nv_bfloat16><<<unsigned(rows), threads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(a.residual), static_cast<const __nv_bfloat16*>(a.gate),
        static_cast<const __nv_bfloat16*>(a.y), static_cast<__nv_bfloat16*>(a.out), a.tokens, a.channels);
  check_launch("gated residual kernel");
}

}  // namespace spotlight::kernels::cuda

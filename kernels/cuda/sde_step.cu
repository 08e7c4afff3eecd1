// The fused Flow-GRPO SDE step on the GPU (kernels/sde_step.h has the formulas
// and the CPU reference). One read of x, v and noise and one write of x_next
// and mean; the log-prob sum is reduced per chunk of kSdeChunk elements into a
// workspace and then per sample in chunk order, so it is deterministic.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace spotlight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ double step_one(const T* __restrict__ x, const T* __restrict__ v,
                                           const float* __restrict__ noise, float* __restrict__ x_next,
                                           float* __restrict__ mean, int64_t i, float xc, float vc, float sd) {
  // __fmul_rn/__fadd_rn: rounded one at a time like the composed operations.
  const float m = __fadd_rn(__fmul_rn(to_float(x[i]), xc), __fmul_rn(to_float(v[i]), vc));
  if (mean) mean[i] = m;
  if (sd == 0.0f) {
    x_next[i] = m;
    return 0.0;
  }
  const float xn = __fadd_rn(m, __fmul_rn(noise[i], sd));
  x_next[i] = xn;
  const double d = double(__fsub_rn(xn, m));
  return d * d;
}

// grid (chunks, batch): block (k, b) does chunk k of sample b.
template <typename T>
__global__ void sde_chunk_kernel(const T* __restrict__ x, const T* __restrict__ v,
                                 const float* __restrict__ noise, float* __restrict__ x_next,
                                 float* __restrict__ mean, int64_t dim, float xc, float vc, float sd,
                                 double* __restrict__ partial) {
  __shared__ double scratch[kThreads / 32];
  const int64_t b = blockIdx.y, begin = int64_t(blockIdx.x) * kSdeChunk;
  const int64_t end = begin + kSdeChunk < dim ? begin + kSdeChunk : dim;
  const int64_t base = b * dim;
  double acc = 0;
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads)
    acc += step_one(x, v, noise, x_next, mean, base + i, xc, vc, sd);
  if (sd == 0.0f) return;
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[b * gridDim.x + blockIdx.x] = acc;
}

__global__ void sde_log_prob_kernel(const double* __restrict__ partial, int64_t batch, int64_t chunks,
                                    int64_t dim, double inv_two_var, double log_norm,
                                    float* __restrict__ log_prob) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  double sum = 0;
  for (int64_t k = 0; k < chunks; ++k) sum += partial[b * chunks + k];
  log_prob[b] = float(-sum * inv_two_var / double(dim) + log_norm);
}

}  // namespace

int64_t sde_step_workspace(int64_t batch, int64_t dim) { return batch * sde_chunks(dim); }

void sde_step(const SdeStepArgs& a, const SdeCoefficients& c, double* workspace, void* stream) {
  if (a.batch <= 0 || a.dim <= 0) return;
  if (c.std_dt != 0.0f && !a.noise) throw std::invalid_argument("sde step: a stochastic step needs noise");
  const int64_t chunks = sde_chunks(a.dim);
  if (a.batch > 65535) throw std::invalid_argument("sde step: at most 65535 samples per call");
  const dim3 grid(unsigned(chunks), unsigned(a.batch));
  auto s = as_stream(stream);
  if (a.type == ElementType::kF32)
    sde_chunk_kernel<float><<<grid, kThreads, 0, s>>>(static_cast<const float*>(a.x),
                                                      static_cast<const float*>(a.v), a.noise, a.x_next, a.mean,
                                                      a.dim, c.x_coef, c.v_coef, c.std_dt, workspace);
  else
    sde_chunk_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(a.x), static_cast<const __nv_bfloat16*>(a.v), a.noise, a.x_next, a.mean,
        a.dim, c.x_coef, c.v_coef, c.std_dt, workspace);
  check_launch("sde_step kernel");
  if (c.std_dt == 0.0f || !a.log_prob) return;
  sde_log_prob_kernel<<<unsigned((a.batch + 127) / 128), 128, 0, s>>>(workspace, a.batch, chunks, a.dim,
                                                                      c.inv_two_var, c.log_norm, a.log_prob);
  check_launch("sde_step log-prob kernel");
}

}  // namespace spotlight::kernels::cuda

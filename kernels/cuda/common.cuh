// Shared device helpers of the CUDA kernels: error checks, element loads and
// deterministic block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/element.h"

namespace spotlight::kernels::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

__device__ __forceinline__ float to_float(float f) { return f; }
__device__ __forceinline__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }
__device__ __forceinline__ void from_float(float* p, float v) { *p = v; }
__device__ __forceinline__ void from_float(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Sum over the block in a fixed tree order (warp shuffles, then the warps'
// partials by warp 0): the same inputs give the same bits on every run.
// `scratch` holds one T per warp; every thread gets the total.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : T(0);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace spotlight::kernels::cuda

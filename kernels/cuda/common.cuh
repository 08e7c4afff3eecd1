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

// 16 bytes of elements (4 floats or 8 bf16) moved as one vector load or
// store: memory-bound kernels need wide accesses to come near the copy
// bandwidth. The pointer must be 16-byte aligned. bf16 widens exactly (its
// bits are a float's top half) and narrows with round-to-nearest-even, as
// to_float/from_float do.
template <typename T>
inline constexpr int kPackWidth = 16 / int(sizeof(T));

// A pack as loaded, and its elements widened to float. Kernels that hold
// rows in registers keep the raw pack: 4 registers for 8 bf16 instead of 8.
template <typename T>
__device__ __forceinline__ uint4 load_raw(const T* __restrict__ p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

template <typename T>
__device__ __forceinline__ void unpack(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int k = 0; k < 4; ++k) f[k] = __uint_as_float(w[k]);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // little-endian: the low half is the first element
      f[2 * k] = __uint_as_float(w[k] << 16);
      f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  }
}

template <typename T>
__device__ __forceinline__ void load_pack(const T* __restrict__ p, float* f) {
  unpack<T>(load_raw(p), f);
}

template <typename T>
__device__ __forceinline__ void store_pack(T* __restrict__ p, const float* f) {
  uint32_t w[4];
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = __float_as_uint(f[k]);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      w[k] = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * k]))) |
             (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * k + 1]))) << 16);
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace spotlight::kernels::cuda

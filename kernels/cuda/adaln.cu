// Fused LayerNorm + adaLN modulation and the gated residual add on the GPU
// (kernels/adaln.h has the formulas and the CPU reference). One block per
// row: the row is read once, its mean and variance are reduced in a fixed
// order (two passes, as the reference), and the modulated row is written once.
//
// Two forms of each kernel. The packed one, for rows whose channels are a
// multiple of 16 bytes of elements and 16-byte aligned buffers (every DiT
// shape), moves 16 bytes per access and keeps the row in registers; on the
// H200 the scalar form alone reached only 47 % (fp32) and 25 % (bf16) of the
// copy bandwidth for adaLN and 53 % for the bf16 gated residual. The scalar
// form, staging the row in shared memory, takes any other shape.
#include <algorithm>
#include <initializer_list>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace spotlight::kernels::cuda {
namespace {

// 1 / sqrt(variance + eps) of row r from the threads' sums of squared
// deviations; thread 0 saves the row's statistics for the backward pass.
__device__ __forceinline__ float row_rstd_of(float sq, float mean, int64_t C, float eps, float* scratch, int64_t r,
                                             float* row_mean, float* row_rstd) {
  const float var = block_sum(sq, scratch) / float(C);
  const float rstd = 1.0f / sqrtf(var + eps);
  if (threadIdx.x == 0) {
    if (row_mean) row_mean[r] = mean;
    if (row_rstd) row_rstd[r] = rstd;
  }
  return rstd;
}

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
  const float rstd = row_rstd_of(sq, mean, C, eps, scratch, r, row_mean, row_rstd);
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

// What a thread keeps of one pack of its row: bf16 keeps the pack as loaded
// (4 registers for 8 elements, so twice the rows fit on a multiprocessor; at
// 8 registers the bf16 rows reached only 64 % of the copy bandwidth on the
// H200) and widens it at each of the three passes, a shift or a mask per
// element; fp32 keeps its floats.
template <typename T>
struct HeldPack {
  uint4 raw;
  __device__ __forceinline__ void load(const T* __restrict__ p) { raw = load_raw(p); }
  __device__ __forceinline__ void get(float* f) const { unpack<T>(raw, f); }
};

template <>
struct HeldPack<float> {
  float v[4];
  __device__ __forceinline__ void load(const float* __restrict__ p) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  }
  __device__ __forceinline__ void get(float* f) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) f[j] = v[j];
  }
};

// The packed forms: each thread holds kPacks packs of the row, pack p =
// threadIdx.x + k * blockDim.x; blockDim is a multiple of 32 (block_sum).
// No __launch_bounds__(1024): with it ptxas squeezed the fp32 4-pack form
// (the DiT's shape) into 32 registers and spilled. Every form needs at most
// 64 registers without it (ptxas -v: 50 at most), so 1,024-thread blocks
// still launch; the tests launch them at 16,384 and 32,768 channels.
template <typename T, int kPacks>
__global__ void adaln_packed_kernel(const T* __restrict__ x, const T* __restrict__ shift, const T* __restrict__ scale,
                        T* __restrict__ out, float* __restrict__ row_mean, float* __restrict__ row_rstd,
                        int64_t tokens, int64_t channels, float eps) {
  constexpr int W = kPackWidth<T>;
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, b = r / tokens, C = channels;
  const int packs = int(C / W);
  HeldPack<T> row[kPacks];
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int p = threadIdx.x + k * blockDim.x;
    if (p < packs) {
      row[k].load(x + r * C + int64_t(p) * W);
      float v[W];
      row[k].get(v);
#pragma unroll
      for (int j = 0; j < W; ++j) sum += v[j];
    }
  }
  const float mean = block_sum(sum, scratch) / float(C);
  float sq = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (threadIdx.x + k * blockDim.x < packs) {
      float v[W];
      row[k].get(v);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float d = v[j] - mean;
        sq += d * d;
      }
    }
  }
  const float rstd = row_rstd_of(sq, mean, C, eps, scratch, r, row_mean, row_rstd);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int p = threadIdx.x + k * blockDim.x;
    if (p < packs) {
      float v[W], sh[W], sc[W], o[W];
      row[k].get(v);
      load_pack(shift + b * C + int64_t(p) * W, sh);
      load_pack(scale + b * C + int64_t(p) * W, sc);
#pragma unroll
      for (int j = 0; j < W; ++j) o[j] = ((v[j] - mean) * rstd) * (1.0f + sc[j]) + sh[j];
      store_pack(out + r * C + int64_t(p) * W, o);
    }
  }
}

template <typename T>
__global__ void gated_packed_kernel(const T* __restrict__ residual, const T* __restrict__ gate,
                                    const T* __restrict__ y, T* __restrict__ out, int64_t tokens,
                                    int64_t channels) {
  constexpr int W = kPackWidth<T>;
  const int64_t r = blockIdx.x, C = channels;
  const int packs = int(C / W);
  const T* g = gate + (r / tokens) * C;
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const int64_t c = int64_t(p) * W;
    float a[W], gv[W], yv[W], o[W];
    load_pack(residual + r * C + c, a);
    load_pack(g + c, gv);
    load_pack(y + r * C + c, yv);
#pragma unroll
    for (int j = 0; j < W; ++j) o[j] = a[j] + gv[j] * yv[j];
    store_pack(out + r * C + c, o);
  }
}

// Whether rows of `channels` elements of T can go in 16-byte packs.
template <typename T>
bool packable(int64_t channels, std::initializer_list<const void*> buffers) {
  if (channels % kPackWidth<T> != 0) return false;
  for (const void* p : buffers)
    if (!aligned16(p)) return false;
  return true;
}

int round_up_32(int64_t t) { return int((t + 31) / 32 * 32); }

// Threads per row of the scalar forms: a multiple of 32 with about four
// channels each, 32..512.
int threads_for(int64_t channels) { return std::clamp(round_up_32((channels + 3) / 4), 32, 512); }

// Launches the packed adaLN. Each thread holds 4 packs (64 bytes) of the
// row: fewer for rows too short to give a warp work, 8 (fp32) for rows too
// long for 1,024 threads. Bytes in flight per multiprocessor set the
// bandwidth; at 2 packs a thread the bf16 rows of the second H200 run
// reached only 64 % of the copy bandwidth. Returns false when the row is
// too wide for the registers' budget of 32 values per thread; the scalar
// form then runs.
template <typename T>
bool launch_adaln_packed(const AdaLnArgs& a, int64_t rows, cudaStream_t s) {
  constexpr int W = kPackWidth<T>, kMaxPacks = 32 / W;
  const int64_t packs = a.channels / W;
  int k = 4;
  while (k > 1 && (packs + k - 1) / k < 32) k /= 2;
  while (k < kMaxPacks && (packs + k - 1) / k > 1024) k *= 2;
  const int64_t threads = round_up_32((packs + k - 1) / k);
  if (threads > 1024) return false;
  auto* kernel = k == 1   ? adaln_packed_kernel<T, 1>
                 : k == 2 ? adaln_packed_kernel<T, 2>
                          : adaln_packed_kernel<T, 4>;
  if constexpr (kMaxPacks >= 8)
    if (k == 8) kernel = adaln_packed_kernel<T, 8>;
  kernel<<<unsigned(rows), unsigned(threads), 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.shift), static_cast<const T*>(a.scale),
      static_cast<T*>(a.out), a.row_mean, a.row_rstd, a.tokens, a.channels, a.eps);
  check_launch("adaln kernel");
  return true;
}

template <typename T>
void launch_adaln(const AdaLnArgs& a, int64_t rows, cudaStream_t s) {
  if (packable<T>(a.channels, {a.x, a.shift, a.scale, a.out}) && launch_adaln_packed<T>(a, rows, s)) return;
  const size_t smem = size_t(a.channels) * sizeof(float);
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(adaln_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
          "adaln shared memory");
  adaln_kernel<T><<<unsigned(rows), threads_for(a.channels), smem, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.shift), static_cast<const T*>(a.scale),
      static_cast<T*>(a.out), a.row_mean, a.row_rstd, a.tokens, a.channels, a.eps);
  check_launch("adaln kernel");
}

template <typename T>
void launch_gated_residual(const GatedResidualArgs& a, int64_t rows, cudaStream_t s) {
  const auto* res = static_cast<const T*>(a.residual);
  const auto* gate = static_cast<const T*>(a.gate);
  const auto* y = static_cast<const T*>(a.y);
  auto* out = static_cast<T*>(a.out);
  if (packable<T>(a.channels, {a.residual, a.gate, a.y, a.out})) {
    const int threads = std::min(256, round_up_32(a.channels / kPackWidth<T>));
    gated_packed_kernel<T><<<unsigned(rows), threads, 0, s>>>(res, gate, y, out, a.tokens, a.channels);
  } else {
    gated_kernel<T><<<unsigned(rows), threads_for(a.channels), 0, s>>>(res, gate, y, out, a.tokens, a.channels);
  }
  check_launch("gated residual kernel");
}

void check_rows(int64_t rows) {
  if (rows > 0x7fffffff) throw std::invalid_argument("adaln: more than 2^31 - 1 rows in one call");
}

}  // namespace

void adaln(const AdaLnArgs& a, void* stream) {
  const int64_t rows = a.batch * a.tokens;
  if (rows <= 0 || a.channels <= 0) return;
  check_rows(rows);
  if (a.type == ElementType::kF32)
    launch_adaln<float>(a, rows, as_stream(stream));
  else
    launch_adaln<__nv_bfloat16>(a, rows, as_stream(stream));
}

void gated_residual(const GatedResidualArgs& a, void* stream) {
  const int64_t rows = a.batch * a.tokens;
  if (rows <= 0 || a.channels <= 0) return;
  check_rows(rows);
  if (a.type == ElementType::kF32)
    launch_gated_residual<float>(a, rows, as_stream(stream));
  else
    launch_gated_residual<__nv_bfloat16>(a, rows, as_stream(stream));
}

}  // namespace spotlight::kernels::cuda

// The CUDA twin of kernels::seed_noise (kernels/philox.h holds the contract
// and the device-callable Philox and Box-Muller). Bit-identity with the CPU
// reference needs IEEE-rounded + - * / and sqrt without contraction: this file
// is compiled with -fmad=false, -prec-div=true and -prec-sqrt=true.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/philox.h"

namespace spotlight::kernels::cuda {
namespace {

// One thread per Philox block of four normals; blockIdx.y picks the sample
// (and gridDim.y strides over samples past 65,535), so no thread divides a
// flat index by the sample's length: a 64-bit division is emulated in dozens
// of instructions. With the 32-bit multiplies in philox.h this took the
// noise of 16 x 12.6 M floats on the H200 from 0.69 to 0.55 ms.
__global__ void seed_noise_kernel(const uint64_t* __restrict__ seeds, uint32_t stream_id, int64_t per_sample,
                                  int64_t blocks_per_sample, int64_t batch, float* __restrict__ out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t b = blockIdx.y; b < batch; b += gridDim.y) {
    const PhiloxKey key = philox_key(seeds[b]);
    float* sample = out + b * per_sample;
    const bool aligned = ((b * per_sample) & 3) == 0;
    for (int64_t blk = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; blk < blocks_per_sample; blk += stride) {
      const PhiloxCounter w = philox4x32_10(philox_counter(uint64_t(blk), stream_id), key);
      float z[4];
      normals_of_block(w, z);
      const int64_t first = blk * 4;
      const int64_t n = per_sample - first < 4 ? per_sample - first : 4;
      if (n == 4 && aligned) {
        *reinterpret_cast<float4*>(sample + first) = make_float4(z[0], z[1], z[2], z[3]);
      } else {
        for (int64_t k = 0; k < n; ++k) sample[first + k] = z[k];
      }
    }
  }
}

__global__ void fill_kernel(float* __restrict__ out, int64_t n, float value) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t n4 = n / 4;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride)
    reinterpret_cast<float4*>(out)[i] = make_float4(value, value, value, value);
  for (int64_t i = n4 * 4 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = value;
}

int grid_for(int64_t work, int threads) {
  int dev = 0, sms = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  const int64_t want = (work + threads - 1) / threads, cap = int64_t(sms) * 32;
  return int(want < cap ? (want > 0 ? want : 1) : cap);
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void seed_noise(const uint64_t* seeds, uint32_t stream_id, int64_t batch, int64_t per_sample, float* out,
                void* stream) {
  if (batch <= 0 || per_sample <= 0) return;
  const int64_t blocks_per_sample = (per_sample + 3) / 4;
  constexpr int kThreads = 256;
  // About 32 blocks per multiprocessor in all, shared out over the samples.
  const int64_t cap = grid_for(blocks_per_sample * batch, kThreads);
  const int64_t ys = std::min<int64_t>(batch, 65535);
  const int64_t xs = std::clamp<int64_t>(cap / ys, 1, (blocks_per_sample + kThreads - 1) / kThreads);
  seed_noise_kernel<<<dim3(unsigned(xs), unsigned(ys)), kThreads, 0, as_stream(stream)>>>(
      seeds, stream_id, per_sample, blocks_per_sample, batch, out);
  check_launch("seed_noise kernel");
}

void fill(float* out, int64_t n, float value, void* stream) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  fill_kernel<<<grid_for((n + 3) / 4, kThreads), kThreads, 0, as_stream(stream)>>>(out, n, value);
  check_launch("fill kernel");
}

}  // namespace spotlight::kernels::cuda

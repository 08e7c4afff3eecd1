// Host-side helpers of the CUDA kernels: memory, synchronisation and the copy
// bandwidth ceiling the kernel benchmarks compare against.
#include <algorithm>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace spotlight::kernels::cuda {

void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void* device_alloc(int64_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, size_t(std::max<int64_t>(bytes, 1))), "cudaMalloc");
  return p;
}

void device_free(void* p) { check(cudaFree(p), "cudaFree"); }

void copy_to_device(void* dst, const void* src, int64_t bytes) {
  check(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void copy_to_host(void* dst, const void* src, int64_t bytes) {
  check(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

double copy_ms(int64_t bytes, int iters) {
  void* a = device_alloc(bytes);
  void* b = device_alloc(bytes);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaMemcpy(b, a, size_t(bytes), cudaMemcpyDeviceToDevice), "warm-up copy");
  std::vector<float> ms(std::max(iters, 1));
  for (auto& m : ms) {
    check(cudaEventRecord(start), "cudaEventRecord");
    check(cudaMemcpyAsync(b, a, size_t(bytes), cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&m, start, stop), "cudaEventElapsedTime");
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  device_free(a);
  device_free(b);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace spotlight::kernels::cuda

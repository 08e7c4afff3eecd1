// --device for the LibTorch tools: "cpu" here, "cuda" / "cuda:N" on the GPU host.
#pragma once

#include <torch/torch.h>

#include "tools/common/omp_env.h"

#include <stdexcept>
#include <string>

namespace spotlight::tools {

inline torch::Device parse_device(const std::string& name) {
  try {
    torch::Device d(name);
    if (d.is_cuda() && !torch::cuda::is_available())
      throw std::invalid_argument("--device " + name + ": this LibTorch has no CUDA or sees no GPU");
    return d;
  } catch (const c10::Error&) {
    throw std::invalid_argument("--device " + name + ": not a device (cpu, cuda, cuda:N)");
  }
}

// --threads: LibTorch's intra-op pool and OpenBLAS's pool alike.
inline void set_cpu_threads(int n) {
  at::set_num_threads(n);
  set_blas_threads(n);
}

}  // namespace spotlight::tools

// The CUDA kernels, callable from plain C++ (no CUDA or LibTorch headers
// here). Every pointer is a device pointer; `stream` is a cudaStream_t, null
// for the legacy default stream. Launch errors throw std::runtime_error.
// Built only when CMake finds nvcc (SPOTLIGHT_CUDA=AUTO|ON); then
// kernels/config.h defines SPOTLIGHT_WITH_CUDA.
#pragma once

#include <cstdint>

#include "kernels/adaln.h"
#include "kernels/sde_step.h"

namespace spotlight::kernels::cuda {

// Devices this process can use (0 without a driver or a GPU; never throws).
int device_count();

// seed_noise(seeds[b], stream_id, element i) for i < per_sample into
// out[b * per_sample + i]: bit-identical to kernels::seed_noise.
void seed_noise(const uint64_t* seeds, uint32_t stream_id, int64_t batch, int64_t per_sample, float* out,
                void* stream);

// Doubles of scratch sde_step needs (one per chunk of each sample).
int64_t sde_step_workspace(int64_t batch, int64_t dim);
void sde_step(const SdeStepArgs& a, const SdeCoefficients& c, double* workspace, void* stream);

void adaln(const AdaLnArgs& a, void* stream);
void gated_residual(const GatedResidualArgs& a, void* stream);

// For benchmarks: the device's own ceilings, measured with CUDA events.
void fill(float* out, int64_t n, float value, void* stream);  // a write-only kernel
void synchronize();
// Milliseconds per device-to-device copy of `bytes` (median of `iters`).
double copy_ms(int64_t bytes, int iters);

// Host <-> device helpers for tests and tools that do not use LibTorch.
void* device_alloc(int64_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, int64_t bytes);
void copy_to_host(void* dst, const void* src, int64_t bytes);

}  // namespace spotlight::kernels::cuda

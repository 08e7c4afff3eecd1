// The fused kernels on LibTorch tensors. Each call dispatches on the tensor's
// device: the CPU reference (split over LibTorch's threads) on the CPU, the
// CUDA kernel on a GPU (when built with CUDA and LibTorch has CUDA), so the
// models call one function wherever they run.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "kernels/sde_step.h"

namespace spotlight::kernels {

// True when the CUDA kernels were compiled in and LibTorch can run them.
bool cuda_kernels_available();

// [seeds.size(), sample_shape...] standard normals; row b is
// seed_noise(seeds[b], stream, 0..), the same bits on every device.
torch::Tensor seed_noise(const std::vector<uint64_t>& seeds, uint32_t stream, torch::IntArrayRef sample_shape,
                         torch::Device device = torch::kCPU);

struct SdeStepResult {
  torch::Tensor x_next;    // fp32, x's shape
  torch::Tensor mean;      // fp32, x's shape (undefined unless asked for)
  torch::Tensor log_prob;  // fp32 [batch] (undefined for an ODE step or unless asked for)
};

// One fused SDE (or, with c.std_dt = 0, ODE) step for a batch: x and v are
// fp32 or bf16 [batch, ...]; noise fp32 of x's shape (undefined for an ODE
// step). Not differentiable: rollouts run without autograd.
SdeStepResult sde_step(const torch::Tensor& x, const torch::Tensor& v, const torch::Tensor& noise,
                       const SdeCoefficients& c, bool want_mean = false, bool want_log_prob = true);

// LN(x) * (1 + scale) + shift for x [B, N, C], shift and scale [B, C]; fp32 or
// bf16. Differentiable (a fused forward and a composed backward).
torch::Tensor adaln_modulate(const torch::Tensor& x, const torch::Tensor& shift, const torch::Tensor& scale,
                             double eps = 1e-6);

// residual + gate * y for residual and y [B, N, C], gate [B, C]. Differentiable.
torch::Tensor gated_residual(const torch::Tensor& residual, const torch::Tensor& gate, const torch::Tensor& y);

// gelu(x) with the tanh approximation (kernels/gelu.h), any shape, fp32 or
// bf16. On the CPU the fused kernel, differentiable with a fused backward; on
// a GPU LibTorch's own gelu(approximate="tanh"), already one fused kernel
// there. A second derivative (create_graph) goes through LibTorch's
// gelu_backward.
torch::Tensor gelu_tanh(const torch::Tensor& x);

// grad * gelu'(x): the backward pass of gelu_tanh on its own.
torch::Tensor gelu_tanh_backward(const torch::Tensor& x, const torch::Tensor& grad);

// x W^T + bias for x [B, ..., in], weight [out, in], bias [out] or undefined,
// as torch::nn::Linear, but row-invariant: a row of the result depends only
// on its row of x, bit for bit, whatever B, the row's place and the thread
// count (kernels/linear.h on the CPU in fp32; one GEMM a sample elsewhere).
// Differentiable; the gradients are exact but not batch-invariant.
torch::Tensor invariant_linear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias = {});

}  // namespace spotlight::kernels

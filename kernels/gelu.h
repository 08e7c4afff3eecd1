// Fused tanh-GELU, forward and backward, CPU reference: the activation of
// every MLP in the DiT. LibTorch evaluates 0.5 x (1 + tanh(u)) with SLEEF's
// 1-ulp tanh in the forward pass and again in the backward pass; on the tiny
// DiT's DRaFT steps that tanh alone took 11 % of a core (perf, fifty-third
// entry of docs/benchmarks.md). The same function written through the
// identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)):
//
//   z = 2 sqrt(2/pi) (x + 0.044715 x^3),   s = 1 / (1 + exp(-z))
//   gelu(x) = x s
//   gelu'(x) = s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//
// needs one exp, evaluated here by range reduction and a polynomial that the
// compiler vectorizes (no libm call in the loop). It agrees with LibTorch's
// gelu(approximate="tanh") to float rounding (a few ulp of the larger of x
// and 1e-7); for x < 0 it is the more accurate of the two, since 1 + tanh(u)
// cancels there and 1 / (1 + exp(-z)) does not. Below z = -87, s is taken as
// 0 (the true s is under 2^-125): gelu(x) = -0 and gelu'(x) = 0.
//
// x, grad, y and dx share one element type (fp32 or bf16); arithmetic is fp32.
// Elements are independent, so a value never depends on the batch or the
// thread count.
#pragma once

#include <cstdint>

#include "kernels/element.h"

namespace spotlight::kernels {

// y[i] = gelu(x[i]) for i in [begin, end).
void gelu_tanh_forward(const void* x, void* y, ElementType type, int64_t begin, int64_t end);

// dx[i] = grad[i] * gelu'(x[i]) for i in [begin, end).
void gelu_tanh_backward(const void* x, const void* grad, void* dx, ElementType type, int64_t begin,
                        int64_t end);

// e^t for t in [-87, 88] (clamped outside), within 2 ulp of exp; vectorizes.
float exp_clamped(float t);

}  // namespace spotlight::kernels

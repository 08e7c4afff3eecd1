// Element types the fused kernels read: fp32, and bf16 (the dtype DiTs run in
// on GPUs). Arithmetic is always fp32; bf16 is only a storage format here.
#pragma once

#include <cstdint>
#include <cstring>

namespace spotlight::kernels {

enum class ElementType : uint8_t { kF32, kBF16 };

// bf16 as raw bits: the top half of an fp32.
struct Bf16 {
  uint16_t bits;
};

inline float bf16_to_float(Bf16 h) {
  const uint32_t w = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

// Round to nearest, ties to even, as LibTorch and CUDA's __float2bfloat16 do;
// NaN stays a (quiet) NaN.
// Written as selects, not branches, so that loops over it vectorize.
inline Bf16 float_to_bf16(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof w);
  const uint32_t rounded = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (w >> 16) | 0x40u;
  const bool nan = (w & 0x7fff'ffffu) > 0x7f80'0000u;
  return Bf16{uint16_t(nan ? quiet_nan : rounded)};
}

// Overloads the CPU references' templates read and write elements with.
inline float widen(float f) { return f; }
inline float widen(Bf16 h) { return bf16_to_float(h); }
inline void narrow(float* p, float v) { *p = v; }
inline void narrow(Bf16* p, float v) { *p = float_to_bf16(v); }

// An element by type, for tests that read buffers of either type.
inline float load_element(const void* base, ElementType t, int64_t i) {
  return t == ElementType::kF32 ? static_cast<const float*>(base)[i]
                                : bf16_to_float(static_cast<const Bf16*>(base)[i]);
}

}  // namespace spotlight::kernels

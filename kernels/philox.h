// Counter-based seeded noise: Philox4x32-10 and the Gaussian/uniform streams
// built on it. This is the CPU reference; a CUDA twin must reproduce it bit for
// bit, so everything below that defines a value is written in IEEE basic
// operations with a fixed evaluation order (see "Determinism" below).
//
// The stream contract (the CUDA twin copies it exactly):
//
//   key      = {uint32(seed), uint32(seed >> 32)}
//   element i (any uint64) of stream (seed, stream) lives in block b = i / 4, lane i % 4:
//   counter  = {uint32(b), uint32(b >> 32), stream, kPhiloxTag}     kPhiloxTag = "SPOT"
//   w[0..3]  = philox4x32_10(counter, key)
//
//   uniform  u(w) = ((w >> 9) + 0.5f) * 2^-23                       exact, in [2^-24, 1 - 2^-24]
//   seed_uniform: element i = u(w[i % 4])
//   seed_noise:   lanes (0,1) from the pair (w[0], w[1]), lanes (2,3) from (w[2], w[3]):
//                 u1 = u(w[2k]), u2 = u(w[2k+1]), r = sqrt(-2 * det_log(u1)),
//                 det_sincos_2pi(u2, &s, &c), lane 2k = r * c, lane 2k+1 = r * s.
//
// So element i depends only on (seed, stream, i): never on the range a call
// asks for, the batch, the thread or the machine. The tag keeps these streams
// apart from any other Philox use that shares a seed (other tags, or 0).
//
// Why 23 bits per uniform and not 24: ((w >> 8) + 0.5f) * 2^-24 is not exact in
// float (2^24 - 0.5 needs 25 bits) and rounds to 1.0 at the top; with 23 bits
// every value (k + 0.5) * 2^-23 is exact and the interval stays open. The
// smallest u1 is 2^-24, so |z| <= sqrt(48 ln 2) ~ 5.77.
//
// Determinism: std::log/sin/cos differ between libms (glibc, CUDA, MSVC), so
// det_log and det_sincos_2pi below use only + - * /, exact bit manipulation and
// integer ops; std::sqrt is IEEE correctly rounded everywhere. A translation
// unit that must reproduce the reference has to be compiled without FMA
// contraction (-ffp-contract=off on the host, -fmad=false or __fadd_rn/__fmul_rn
// on CUDA) and without -ffast-math. philox.cc is. The helpers have internal
// linkage (static) so a copy compiled under other flags in some other
// translation unit can never be the one the linker picks for philox.cc.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#ifndef SPOTLIGHT_HD
#if defined(__CUDACC__)
#define SPOTLIGHT_HD __host__ __device__
#else
#define SPOTLIGHT_HD
#endif
#endif

namespace spotlight::kernels {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Fourth counter word of every noise block: "SPOT" in ASCII.
inline constexpr uint32_t kPhiloxTag = 0x5350'4f54;

// Philox4x32 with 10 rounds (Salmon, Moraes, Dror, Shaw: "Parallel random
// numbers: as easy as 1, 2, 3", SC'11; the Random123 constants).
SPOTLIGHT_HD constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD251'1F53, kM1 = 0xCD9E'8D57;  // round multipliers
  constexpr uint32_t kW0 = 0x9E37'79B9, kW1 = 0xBB67'AE85;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
#if defined(__CUDA_ARCH__)
    // The same integers from 32-bit multiplies: nvcc compiled the 64-bit
    // product below into emulated 64-bit multiplies, several instructions each.
    const uint32_t hi0 = __umulhi(kM0, ctr[0]), lo0 = kM0 * ctr[0];
    const uint32_t hi1 = __umulhi(kM1, ctr[2]), lo1 = kM1 * ctr[2];
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
#else
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1),
           uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
#endif
  }
  return ctr;
}

SPOTLIGHT_HD constexpr PhiloxKey philox_key(uint64_t seed) {
  return {uint32_t(seed), uint32_t(seed >> 32)};
}

SPOTLIGHT_HD constexpr PhiloxCounter philox_counter(uint64_t block, uint32_t stream) {
  return {uint32_t(block), uint32_t(block >> 32), stream, kPhiloxTag};
}

namespace detail {

SPOTLIGHT_HD static constexpr uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}

SPOTLIGHT_HD static constexpr float bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

}  // namespace detail

// One 32-bit word to a uniform in the open interval (0, 1): 2^23 equally
// spaced midpoints, every step exact in float.
SPOTLIGHT_HD static constexpr float uniform_from_bits(uint32_t w) {
  // w >> 9 < 2^23, so the signed conversion is exact (and vectorizes).
  return (float(int32_t(w >> 9)) + 0.5f) * 0x1p-23f;
}

// Natural log of a positive, normal, finite float; max relative error well
// under 1e-6 (8e-8 measured). No special cases: callers pass (0, 1].
//
// x = 2^e * m with m in [sqrt(1/2), sqrt(2)) by bit operations; f = m - 1 is
// exact; log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| < 0.172, written as
// f - (f^2/2 - s (f^2/2 + R)) with R = 2s^2/3 + 2s^4/5 + 2s^6/7 + 2s^8/9 so that
// the rounding of s is damped by the small correction; e ln2 is added through
// a split ln2 = kLn2Hi + kLn2Lo whose high part has 12 bits, so e * kLn2Hi is
// exact.
SPOTLIGHT_HD static constexpr float det_log(float x) {
  constexpr uint32_t kSqrtHalfBits = 0x3f35'04f3;       // sqrt(1/2) as float
  constexpr uint32_t kOneBits = 0x3f80'0000;            // 1.0f
  constexpr float kLn2Hi = 0x1.62ep-1f;                 // ln 2 to 12 bits
  constexpr float kLn2Lo = 0x1.0bfbe8p-15f;             // ln 2 - kLn2Hi
  constexpr float kL3 = 0x1.555556p-1f, kL5 = 0x1.99999ap-2f;  // 2/3, 2/5
  constexpr float kL7 = 0x1.24924ap-2f, kL9 = 0x1.c71c72p-3f;  // 2/7, 2/9

  // Shifting the bits by (1 - sqrt(1/2)) moves the exponent boundary from
  // 2^e to sqrt(1/2) * 2^(e+1); the mantissa is re-based at sqrt(1/2).
  const uint32_t ix = detail::float_bits(x) + (kOneBits - kSqrtHalfBits);
  const int32_t e = int32_t(ix >> 23) - 127;
  const float m = detail::bits_float((ix & 0x007f'ffffu) + kSqrtHalfBits);

  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float s2 = s * s;
  const float r = s2 * (kL3 + s2 * (kL5 + s2 * (kL7 + s2 * kL9)));
  const float hfsq = 0.5f * f * f;
  const float fe = float(e);
  return fe * kLn2Hi - ((hfsq - (s * (hfsq + r) + fe * kLn2Lo)) - f);
}

// sin(2 pi u) and cos(2 pi u) for u in [0, 1); max absolute error well under
// 2e-6 (9e-8 measured).
//
// Reduction in turns, all exact: a = 4u quarter turns, q = nearest integer,
// r = a - q in [-1/2, 1/2], i.e. an angle r pi/2 in [-pi/4, pi/4], where the
// Taylor polynomials (sin to degree 9, cos to degree 10, coefficients
// (pi/2)^k / k! so r is never rounded into radians) are good to ~1e-9; then
// rotate by q quarter turns.
SPOTLIGHT_HD static constexpr void det_sincos_2pi(float u, float* sin_out, float* cos_out) {
  constexpr float kS1 = 0x1.921fb6p+0f, kS3 = -0x1.4abbcep-1f, kS5 = 0x1.466bc6p-4f;
  constexpr float kS7 = -0x1.32d2ccp-8f, kS9 = 0x1.507834p-13f;
  constexpr float kC2 = -0x1.3bd3ccp+0f, kC4 = 0x1.03c1f0p-2f, kC6 = -0x1.55d3c8p-6f;
  constexpr float kC8 = 0x1.e1f506p-11f, kC10 = -0x1.a6d1f2p-16f;

  const float a = u * 4.0f;
  const int32_t q0 = int32_t(a);  // truncation; a >= 0
  const float r0 = a - float(q0);  // exact: the fraction bits of a
  // To nearest quarter turn, r0 - 1 being exact (Sterbenz). Written as
  // arithmetic, not a branch, so that loops around this vectorize.
  const int32_t up = int32_t(r0 > 0.5f);
  const float r = r0 - float(up);
  const int32_t q = q0 + up;
  const float r2 = r * r;
  const float s = r * (kS1 + r2 * (kS3 + r2 * (kS5 + r2 * (kS7 + r2 * kS9))));
  const float c = 1.0f + r2 * (kC2 + r2 * (kC4 + r2 * (kC6 + r2 * (kC8 + r2 * kC10))));

  // Rotation by q quarter turns: (sin, cos) -> (c, -s) -> (-s, -c) -> (-c, s).
  // Signs are products with +-1, exact.
  const bool swap = (q & 1) != 0;
  const float sv = swap ? c : s;
  const float cv = swap ? s : c;
  *sin_out = sv * float(1 - (q & 2));
  *cos_out = cv * float(1 - ((q + 1) & 2));
}

// Box-Muller on one pair of words: u1 = u(w1) sets the radius, u2 = u(w2)
// the angle; z0 = r cos(2 pi u2), z1 = r sin(2 pi u2).
SPOTLIGHT_HD static inline void box_muller(uint32_t w1, uint32_t w2, float* z0, float* z1) {
  const float radius = std::sqrt(-2.0f * det_log(uniform_from_bits(w1)));
  float s = 0.0f, c = 0.0f;
  det_sincos_2pi(uniform_from_bits(w2), &s, &c);
  *z0 = radius * c;
  *z1 = radius * s;
}

// The four standard normals of one Philox block: words (0, 1) give lanes 0
// and 1, words (2, 3) give lanes 2 and 3.
SPOTLIGHT_HD static inline void normals_of_block(const PhiloxCounter& w, float* out) {
  box_muller(w[0], w[1], &out[0], &out[1]);
  box_muller(w[2], w[3], &out[2], &out[3]);
}

// Standard-normal floats for elements [first, first + n) of the stream keyed
// by (seed, stream). Element i depends only on (seed, stream, i).
void seed_noise(uint64_t seed, uint32_t stream, uint64_t first, size_t n, float* out);

// Uniform (0, 1) floats for elements [first, first + n), same keying.
void seed_uniform(uint64_t seed, uint32_t stream, uint64_t first, size_t n, float* out);

}  // namespace spotlight::kernels

// A small seeded generator whose every output is defined by this file alone.
//
// std::uniform_int_distribution and friends are implementation-defined, so the
// same seed gives different prompts and scenes under libstdc++ and libc++.
// The prompt grammar and the renderer promise determinism given a seed across
// platforms, so they draw only through this class: splitmix64 for the bits,
// rejection sampling for unbiased integers.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace spotlight::scene {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit stream.
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0. Draws below 2^64 mod n are redrawn so that
  // every residue is equally likely (no modulo bias).
  uint64_t below(uint64_t n) {
    const uint64_t reject_under = (0 - n) % n;  // == 2^64 mod n
    for (;;) {
      uint64_t r = next();
      if (r >= reject_under) return r % n;
    }
  }

  // Uniform integer in [lo, hi], inclusive; lo <= hi.
  int uniform_int(int lo, int hi) {
    return lo + static_cast<int>(below(static_cast<uint64_t>(static_cast<int64_t>(hi) - lo + 1)));
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  bool coin() { return (next() >> 63) != 0; }

  // Standard normal by Box-Muller (for tests and augmentations; its last bits
  // depend on the libm, unlike everything above).
  double normal() {
    const double u1 = (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53;  // in (0, 1)
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// FNV-1a, to fold a text into a seed.
constexpr uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace spotlight::scene

// The CPU reference of the seeded noise streams. Built with -ffp-contract=off
// (kernels/CMakeLists.txt): see philox.h, "Determinism".
#include "kernels/philox.h"

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "kernels/cpu_dispatch.h"

#if defined(__FAST_MATH__)
#error "philox.cc must not be built with -ffast-math: it would break bit-identity"
#endif
#if FLT_EVAL_METHOD != 0
#error "philox.cc needs float arithmetic evaluated in float (FLT_EVAL_METHOD == 0)"
#endif

namespace spotlight::kernels {
namespace {

// Blocks per batch in the aligned middle of a range. Batching only reorders
// independent work (words first, then transforms over unit-stride arrays) so
// the compiler can vectorize it; every value is the same as block by block.
constexpr size_t kBatch = 8;

SPOTLIGHT_INLINE void uniforms_of_block(const PhiloxCounter& w, float* out) {
  for (int k = 0; k < 4; ++k) out[k] = uniform_from_bits(w[k]);
}

struct Normals {
  SPOTLIGHT_INLINE static void block(const PhiloxCounter& w, float* out) { normals_of_block(w, out); }
  SPOTLIGHT_INLINE static void batch(const PhiloxKey& key, uint32_t stream, uint64_t b0, float* out) {
    // Pair p of the batch is (words 2(p%2), 2(p%2)+1) of block p/2.
    uint32_t radius_words[2 * kBatch], angle_words[2 * kBatch];
    for (size_t l = 0; l < kBatch; ++l) {
      const PhiloxCounter w = philox4x32_10(philox_counter(b0 + l, stream), key);
      radius_words[2 * l] = w[0], angle_words[2 * l] = w[1];
      radius_words[2 * l + 1] = w[2], angle_words[2 * l + 1] = w[3];
    }
    float z0[2 * kBatch], z1[2 * kBatch];
    for (size_t p = 0; p < 2 * kBatch; ++p) box_muller(radius_words[p], angle_words[p], &z0[p], &z1[p]);
    for (size_t p = 0; p < 2 * kBatch; ++p) out[2 * p] = z0[p], out[2 * p + 1] = z1[p];
  }
};

struct Uniforms {
  SPOTLIGHT_INLINE static void block(const PhiloxCounter& w, float* out) { uniforms_of_block(w, out); }
  SPOTLIGHT_INLINE static void batch(const PhiloxKey& key, uint32_t stream, uint64_t b0, float* out) {
    for (size_t l = 0; l < kBatch; ++l)
      uniforms_of_block(philox4x32_10(philox_counter(b0 + l, stream), key), out + 4 * l);
  }
};

// Fills elements [first, first + n): an unaligned head and a short tail go
// through a scratch block, the middle is written in place in whole batches and
// blocks. Which block and lane an element comes from depends only on its index.
template <class Kind>
SPOTLIGHT_INLINE void fill(uint64_t seed, uint32_t stream, uint64_t first, size_t n, float* out) {
  const PhiloxKey key = philox_key(seed);
  auto block = [&](uint64_t b, float* dst) { Kind::block(philox4x32_10(philox_counter(b, stream), key), dst); };

  uint64_t i = first;
  size_t left = n;
  if (left > 0 && (i & 3) != 0) {
    float scratch[4];
    block(i >> 2, scratch);
    const size_t lane = i & 3;
    const size_t take = std::min<size_t>(4 - lane, left);
    std::memcpy(out, scratch + lane, take * sizeof(float));
    out += take;
    i += take;
    left -= take;
  }
  for (; left >= 4 * kBatch; left -= 4 * kBatch, i += 4 * kBatch, out += 4 * kBatch) Kind::batch(key, stream, i >> 2, out);
  for (; left >= 4; left -= 4, i += 4, out += 4) block(i >> 2, out);
  if (left > 0) {
    float scratch[4];
    block(i >> 2, scratch);
    std::memcpy(out, scratch, left * sizeof(float));
  }
}

}  // namespace

SPOTLIGHT_CPU_CLONES void seed_noise(uint64_t seed, uint32_t stream, uint64_t first, size_t n, float* out) {
  fill<Normals>(seed, stream, first, n, out);
}

SPOTLIGHT_CPU_CLONES void seed_uniform(uint64_t seed, uint32_t stream, uint64_t first, size_t n, float* out) {
  fill<Uniforms>(seed, stream, first, n, out);
}

}  // namespace spotlight::kernels

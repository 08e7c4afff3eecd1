// The CPU references' hot loops are compiled three times, for AVX-512, AVX2
// and the x86-64 baseline, and the loader picks the best the machine has
// (GCC's target_clones, an ifunc). LibTorch dispatches its own kernels the
// same way; without this the references would run on 16-byte SSE vectors.
// Every clone does the same IEEE operations in the same order (the kernels
// are built with -ffp-contract=off, so AVX2's FMA is never used), so the bits
// do not depend on the clone: the golden-value tests run the clone this
// machine picks.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define SPOTLIGHT_CPU_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define SPOTLIGHT_CPU_CLONES
#endif

// Loop bodies are inlined into the cloned entry points so that they are
// compiled for each clone's instruction set.
#define SPOTLIGHT_INLINE [[gnu::always_inline]] inline

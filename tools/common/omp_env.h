// LibTorch's OpenMP (libgomp) keeps idle threads spinning, and so does
// OpenBLAS between calls; on a 2-core machine they steal each other's cores
// and halve the DiT's speed (measured: rollouts 13 -> 26 images/s with
// OMP_WAIT_POLICY=PASSIVE). libgomp reads the policy when it loads, before
// main, so a tool re-executes itself once with the variable set.
#pragma once

#include <unistd.h>

#include <cstdlib>

namespace spotlight::tools {

inline void ensure_passive_omp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;  // the user's choice stands
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // on failure, go on as we are
}

}  // namespace spotlight::tools

// LibTorch's OpenMP (libgomp) keeps idle threads spinning, and so does
// OpenBLAS between calls; on a 2-core machine they steal each other's cores
// and halve the DiT's speed (measured: rollouts 13 -> 26 images/s with
// OMP_WAIT_POLICY=PASSIVE). libgomp reads the policy when it loads, before
// main, so a tool re-executes itself once with the variable set.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace spotlight::tools {

inline void ensure_passive_omp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;  // the user's choice stands
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // on failure, go on as we are
}

// OpenBLAS sizes its own thread pool to the machine whatever
// at::set_num_threads says, and its idle worker spins in sched_yield between
// GEMMs: a "--threads 1" training run held both cores (seen in gdb on
// 2026-12-01: sgemm_thread_nn with a second OpenBLAS thread). Looked up at run
// time, so another BLAS (or a CUDA build without OpenBLAS) simply skips it.
inline void set_blas_threads(int n) {
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set) set(n);
}

}  // namespace spotlight::tools

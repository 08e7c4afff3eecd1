// The NCCL backend on the one GPU of the GPU host: every collective at one
// rank on device buffers, a communicator derived by ncclCommSplit, and what
// a fresh ncclCommInitRank costs against a split (printed for
// `tools/run gpu-check`). Skips, and says so, where there is no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "spotlight/collective_nccl.h"

using namespace spotlight::collective;

namespace {

bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: the NCCL test did not run"

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
std::vector<T> roundtrip(Communicator& c, const std::vector<T>& in, void (*op)(Communicator&, void*, void*, size_t)) {
  void *d_in = nullptr, *d_out = nullptr;
  const size_t bytes = in.size() * sizeof(T);
  cudaMalloc(&d_in, bytes);
  cudaMalloc(&d_out, bytes);
  cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d_out, in.data(), bytes, cudaMemcpyHostToDevice);
  op(c, d_in, d_out, bytes);
  std::vector<T> out(in.size());
  cudaMemcpy(out.data(), d_out, bytes, cudaMemcpyDeviceToHost);
  cudaFree(d_in);
  cudaFree(d_out);
  return out;
}

}  // namespace

TEST(Nccl, EveryCollectiveAtOneRankAndASplitCommunicator) {
  SKIP_WITHOUT_GPU();
  auto kv = make_memory_kv();
  auto t0 = std::chrono::steady_clock::now();
  auto c = make_nccl_communicator(*kv, "gpu", 1, 0, 1, 0);
  const double init_ms = ms_since(t0);
  ASSERT_EQ(c->size(), 1);
  ASSERT_EQ(c->epoch(), 1u);
  std::vector<float> v(1 << 20);
  std::iota(v.begin(), v.end(), 0.0f);
  EXPECT_EQ(roundtrip<float>(*c, v, [](Communicator& c, void* in, void* out, size_t b) { c.all_to_all(in, out, b); }), v);
  EXPECT_EQ(roundtrip<float>(*c, v, [](Communicator& c, void* in, void* out, size_t b) { c.all_gather(in, out, b); }), v);
  EXPECT_EQ(roundtrip<float>(*c, v, [](Communicator& c, void*, void* out, size_t b) { c.broadcast(out, b, 0); }), v);
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(roundtrip<float>(*c, v,
                             [](Communicator& c, void*, void* out, size_t b) {
                               c.all_reduce(out, b / sizeof(float), DataType::kFloat32, ReduceOp::kSum);
                             }),
            v);
  const double all_reduce_ms = ms_since(t0);
  c->barrier();
  EXPECT_THROW(c->broadcast(nullptr, 4, 1), CollectiveError);

  t0 = std::chrono::steady_clock::now();
  auto next = c->split(0, 0, 2);
  const double split_ms = ms_since(t0);
  EXPECT_EQ(next->epoch(), 2u);
  EXPECT_EQ(next->size(), 1);
  next->barrier();
  std::printf("nccl (one rank): ncclCommInitRank %.1f ms, ncclCommSplit %.1f ms, all-reduce of 4 MB with copies %.2f ms\n",
              init_ms, split_ms, all_reduce_ms);
}

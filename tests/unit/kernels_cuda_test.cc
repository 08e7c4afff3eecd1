// The CUDA kernels against their CPU references (no LibTorch): Philox noise
// bit-exact over 10^8 values, the SDE step (mean and x_next bit-exact, the
// log-prob within rounding), LayerNorm + adaLN within tolerance, the gated
// residual bit-exact. Every test skips, and says so, where there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/adaln.h"
#include "kernels/cuda/launch.h"
#include "kernels/philox.h"
#include "kernels/sde_step.h"

using namespace spotlight::kernels;

namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: the GPU test did not run"

// A device buffer that frees itself.
struct DeviceBuffer {
  void* p = nullptr;
  int64_t bytes = 0;
  explicit DeviceBuffer(int64_t n) : p(cuda::device_alloc(n)), bytes(n) {}
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(int64_t(host.size() * sizeof(T))) {
    cuda::copy_to_device(p, host.data(), bytes);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cuda::device_free(p); }
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
  template <typename T>
  std::vector<T> fetch() const {
    std::vector<T> h(size_t(bytes) / sizeof(T));
    cuda::copy_to_host(h.data(), p, bytes);
    return h;
  }
};

std::vector<float> normals(size_t n, uint64_t seed, float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> v(n);
  seed_noise(seed, 99, 0, n, v.data());
  for (auto& f : v) f = f * scale + offset;
  return v;
}

std::vector<Bf16> to_bf16(const std::vector<float>& v) {
  std::vector<Bf16> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = float_to_bf16(v[i]);
  return o;
}

// The host copy of a test input in the element type under test.
const void* host_input(bool bf16, const std::vector<float>& f, const std::vector<Bf16>& h) {
  return bf16 ? static_cast<const void*>(h.data()) : f.data();
}

}  // namespace

TEST(CudaPhilox, IsBitIdenticalToTheCpuReferenceOver1e8Values) {
  SKIP_WITHOUT_GPU();
  // 100 samples of 10^6 values, and an odd length for the tail path.
  for (auto [batch, per] : {std::pair<int64_t, int64_t>{100, 1'000'000}, std::pair<int64_t, int64_t>{3, 12'345}}) {
    std::vector<uint64_t> seeds(batch);
    std::mt19937_64 gen(batch);
    for (auto& s : seeds) s = gen();
    DeviceBuffer d_seeds(seeds), d_out(batch * per * 4);
    cuda::seed_noise(d_seeds.as<uint64_t>(), 7, batch, per, d_out.as<float>(), nullptr);
    cuda::synchronize();
    const auto gpu = d_out.fetch<float>();
    std::vector<float> cpu(size_t(batch * per));
    for (int64_t b = 0; b < batch; ++b) seed_noise(seeds[b], 7, 0, size_t(per), cpu.data() + b * per);
    int64_t mismatches = 0;
    for (size_t i = 0; i < cpu.size(); ++i) mismatches += std::memcmp(&cpu[i], &gpu[i], 4) != 0;
    EXPECT_EQ(mismatches, 0) << "of " << cpu.size() << " values";
  }
}

class CudaSdeStep : public ::testing::TestWithParam<bool> {};  // bf16 inputs?

TEST_P(CudaSdeStep, MatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const bool bf16 = GetParam();
  const int64_t batch = 5, dim = 2 * kSdeChunk + 777;
  const auto x = normals(batch * dim, 1), v = normals(batch * dim, 2), noise = normals(batch * dim, 3);
  for (double a : {0.0, 0.7}) {
    const auto c = sde_coefficients(0.6, 0.5, 0.9, a);
    SdeStepArgs ha;
    std::vector<Bf16> xb = to_bf16(x), vb = to_bf16(v);
    ha.x = bf16 ? static_cast<const void*>(xb.data()) : x.data();
    ha.v = bf16 ? static_cast<const void*>(vb.data()) : v.data();
    ha.noise = noise.data();
    std::vector<float> x_next(batch * dim), mean(batch * dim), lp(batch);
    ha.x_next = x_next.data();
    ha.mean = mean.data();
    ha.log_prob = lp.data();
    ha.type = bf16 ? ElementType::kBF16 : ElementType::kF32;
    ha.batch = batch;
    ha.dim = dim;
    sde_step_reference(ha, c);

    DeviceBuffer dx = bf16 ? DeviceBuffer(xb) : DeviceBuffer(x), dv = bf16 ? DeviceBuffer(vb) : DeviceBuffer(v);
    DeviceBuffer dn(noise), dxn(batch * dim * 4), dm(batch * dim * 4), dlp(batch * 4),
        ws(cuda::sde_step_workspace(batch, dim) * 8);
    SdeStepArgs da = ha;
    da.x = dx.p;
    da.v = dv.p;
    da.noise = dn.as<float>();
    da.x_next = dxn.as<float>();
    da.mean = dm.as<float>();
    da.log_prob = dlp.as<float>();
    cuda::sde_step(da, c, ws.as<double>(), nullptr);
    cuda::synchronize();
    EXPECT_EQ(dxn.fetch<float>(), x_next) << "x_next, a=" << a;
    EXPECT_EQ(dm.fetch<float>(), mean) << "mean, a=" << a;
    if (a > 0) {
      const auto glp = dlp.fetch<float>();
      for (int64_t b = 0; b < batch; ++b) EXPECT_NEAR(glp[b], lp[b], 1e-6) << "log-prob of sample " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fp32AndBf16, CudaSdeStep, ::testing::Values(false, true));

class CudaAdaLn : public ::testing::TestWithParam<int64_t> {};  // channels

TEST_P(CudaAdaLn, MatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const int64_t B = 3, N = 17, C = GetParam();
  for (bool bf16 : {false, true}) {
    const auto x = normals(B * N * C, 4, 2.0f, 3.0f), shift = normals(B * C, 5), scale = normals(B * C, 6, 0.5f);
    const auto xb = to_bf16(x), sb = to_bf16(shift), cb = to_bf16(scale);
    const int64_t es = bf16 ? 2 : 4;
    AdaLnArgs ha;
    ha.x = host_input(bf16, x, xb);
    ha.shift = host_input(bf16, shift, sb);
    ha.scale = host_input(bf16, scale, cb);
    std::vector<char> out(B * N * C * es);
    std::vector<float> mean(B * N), rstd(B * N);
    ha.out = out.data();
    ha.row_mean = mean.data();
    ha.row_rstd = rstd.data();
    ha.type = bf16 ? ElementType::kBF16 : ElementType::kF32;
    ha.batch = B;
    ha.tokens = N;
    ha.channels = C;
    adaln_rows(ha, 0, B * N);

    DeviceBuffer dx(B * N * C * es), ds(B * C * es), dc(B * C * es), dout(B * N * C * es), dm(B * N * 4),
        dr(B * N * 4);
    cuda::copy_to_device(dx.p, ha.x, dx.bytes);
    cuda::copy_to_device(ds.p, ha.shift, ds.bytes);
    cuda::copy_to_device(dc.p, ha.scale, dc.bytes);
    AdaLnArgs da = ha;
    da.x = dx.p;
    da.shift = ds.p;
    da.scale = dc.p;
    da.out = dout.p;
    da.row_mean = dm.as<float>();
    da.row_rstd = dr.as<float>();
    cuda::adaln(da, nullptr);
    cuda::synchronize();
    const auto gout = dout.fetch<char>();
    double worst = 0;
    for (int64_t i = 0; i < B * N * C; ++i) {
      const float g = load_element(gout.data(), ha.type, i), r = load_element(out.data(), ha.type, i);
      // fp32: reduction order only; bf16: at most one bf16 rounding apart.
      const double tol = bf16 ? std::abs(r) / 128 + 1e-3 : 1e-5 * (1 + std::abs(r));
      worst = std::max(worst, std::abs(g - r) - tol);
    }
    EXPECT_LE(worst, 0.0) << "C=" << C << (bf16 ? " bf16" : " fp32");
    const auto gm = dm.fetch<float>(), gr = dr.fetch<float>();
    for (int64_t r = 0; r < B * N; ++r) {
      EXPECT_NEAR(gm[r], mean[r], 1e-5 * (1 + std::abs(mean[r])));
      EXPECT_NEAR(gr[r], rstd[r], 1e-5 * rstd[r]);
    }
  }
}

// 96, 256, 3072, 16384 and 32768 channels (multiples of 16 bytes of
// elements) take the packed kernel, with 1, 2, 4 or 8 packs a thread (fp32:
// 1, 2, 4, 4, 8; bf16: 1, 1, 4, 4, 4); 1, 1029 and 16385 the scalar one,
// which stages the row in shared memory: 16385 needs 64 KB of it, the opt-in
// path.
INSTANTIATE_TEST_SUITE_P(Channels, CudaAdaLn, ::testing::Values(1, 96, 256, 1029, 3072, 16384, 16385, 32768));

// 333 channels take the scalar kernel; 96 and 3072 (multiples of 16 bytes of
// elements) the packed one, in fp32 and bf16.
class CudaGatedResidual : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};  // channels, bf16

TEST_P(CudaGatedResidual, IsBitIdenticalToTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const auto [C, bf16] = GetParam();
  const int64_t B = 4, N = 9, es = bf16 ? 2 : 4;
  const auto res = normals(B * N * C, 7), gate = normals(B * C, 8), y = normals(B * N * C, 9);
  const auto rb = to_bf16(res), gb = to_bf16(gate), yb = to_bf16(y);
  GatedResidualArgs ha;
  ha.residual = host_input(bf16, res, rb);
  ha.gate = host_input(bf16, gate, gb);
  ha.y = host_input(bf16, y, yb);
  std::vector<char> out(B * N * C * es);
  ha.out = out.data();
  ha.type = bf16 ? ElementType::kBF16 : ElementType::kF32;
  ha.batch = B;
  ha.tokens = N;
  ha.channels = C;
  gated_residual_rows(ha, 0, B * N);
  DeviceBuffer dr(B * N * C * es), dg(B * C * es), dy(B * N * C * es), dout(B * N * C * es);
  cuda::copy_to_device(dr.p, ha.residual, dr.bytes);
  cuda::copy_to_device(dg.p, ha.gate, dg.bytes);
  cuda::copy_to_device(dy.p, ha.y, dy.bytes);
  GatedResidualArgs da = ha;
  da.residual = dr.p;
  da.gate = dg.p;
  da.y = dy.p;
  da.out = dout.p;
  cuda::gated_residual(da, nullptr);
  cuda::synchronize();
  EXPECT_EQ(dout.fetch<char>(), out) << "C=" << C << (bf16 ? " bf16" : " fp32");
}

INSTANTIATE_TEST_SUITE_P(ChannelsAndTypes, CudaGatedResidual,
                         ::testing::Combine(::testing::Values(333, 96, 3072), ::testing::Bool()));

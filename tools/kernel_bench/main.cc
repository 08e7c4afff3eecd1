// spotlight-kernel-bench: each fused kernel against the unfused LibTorch
// composition it replaces (the row-invariant linear layer against LibTorch's
// GEMMs), at small (tiny DiT) and large shapes: time per
// call and achieved GB/s (the bytes a fused kernel must move, over its time).
// On a GPU it also measures the ceilings in the same run: device-to-device
// copy bandwidth, and the rate of a write-only kernel for Philox noise.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "kernels/config.h"
#include "kernels/ops.h"
#include "tools/common/device.h"
#include "tools/common/omp_env.h"
#ifdef SPOTLIGHT_WITH_CUDA
#include "kernels/cuda/launch.h"
#endif

using namespace spotlight;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  std::string name;
  int64_t batch, tokens, channels;
  int64_t elements() const { return batch * tokens * channels; }
};

struct Row {
  std::string kernel, shape, dtype;
  double fused_ms, composed_ms, gbytes;  // gbytes moved by one fused call
};

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

// Median milliseconds per call of f over `iters` calls (after a warm-up).
template <class F>
double time_ms(const torch::Device& d, int iters, F&& f) {
  f();
  sync(d);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    f();
    sync(d);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

std::string dtype_name(torch::Dtype t) { return t == torch::kBFloat16 ? "bf16" : "fp32"; }

}  // namespace

int main(int argc, char** argv) {
  spotlight::tools::ensure_passive_omp(argv);
  CLI::App app{"spotlight-kernel-bench: fused kernels against the unfused LibTorch composition"};
  std::string device = "cpu";
  int threads = 2, iters = 20;
  bool json = false, quick = false;
  app.add_option("--device", device, "cpu, cuda or cuda:N");
  app.add_option("--threads", threads, "CPU threads (LibTorch's and OpenBLAS's)")->check(CLI::PositiveNumber);
  app.add_option("--iters", iters, "timed calls per measurement; the median is reported")
      ->check(CLI::PositiveNumber);
  app.add_flag("--quick", quick, "small shapes only");
  app.add_flag("--json", json, "print one JSON object as the last line");
  CLI11_PARSE(app, argc, argv);
  try {
    spotlight::tools::set_cpu_threads(threads);
    const auto dev = spotlight::tools::parse_device(device);
    const bool gpu = dev.is_cuda();
    if (gpu && !kernels::cuda_kernels_available())
      throw std::runtime_error("--device cuda: this build has no CUDA kernels (configure with SPOTLIGHT_CUDA=ON)");
    torch::NoGradGuard no_grad;
    // Small: the tiny DiT's rows (64 images x 64 tokens x 96 channels). Large:
    // a DiT at scale on the GPU (16 x 4096 tokens x 3072 channels, 805 MB per
    // fp32 tensor); a tenth of it on this CPU.
    std::vector<Shape> shapes{{"small", 64, 64, 96}};
    if (!quick) shapes.push_back(gpu ? Shape{"large", 16, 4096, 3072} : Shape{"large-cpu", 16, 1024, 768});
    std::vector<Row> rows;
    auto opts = torch::TensorOptions().device(dev);
    for (const auto& sh : shapes) {
      for (auto dt : {torch::kFloat32, torch::kBFloat16}) {
        const int64_t es = dt == torch::kBFloat16 ? 2 : 4, n = sh.elements();
        std::cerr << "kernel-bench: " << sh.name << " " << dtype_name(dt) << " ..." << std::endl;
        {  // SDE step: reads x, v, noise; writes x_next, mean; a log-prob per sample.
          auto x = torch::randn({sh.batch, sh.tokens * sh.channels}, opts).to(dt);
          auto v = torch::randn_like(x), noise = torch::randn(x.sizes(), opts);
          const auto c = kernels::sde_coefficients(0.6, 0.5, 0.9, 0.7);
          const double fused = time_ms(dev, iters, [&] { kernels::sde_step(x, v, noise, c, true, true); });
          const double composed = time_ms(dev, iters, [&] {
            auto xf = x.to(torch::kFloat32), vf = v.to(torch::kFloat32);
            auto mean = xf * c.x_coef + vf * c.v_coef;
            auto x_next = mean + noise * c.std_dt;
            auto d = x_next - mean;
            auto lp = (-(d * d) / (2.0 * c.std_dt * c.std_dt) - std::log(double(c.std_dt)) -
                       0.5 * std::log(2 * M_PI)).mean(1);
          });
          rows.push_back({"sde_step", sh.name, dtype_name(dt), fused, composed, double(n * (2 * es + 12)) / 1e9});
        }
        auto x = torch::randn({sh.batch, sh.tokens, sh.channels}, opts).to(dt);
        auto shift = torch::randn({sh.batch, sh.channels}, opts).to(dt), scale = torch::randn_like(shift);
        {  // LayerNorm + modulation: reads x, writes out.
          const double fused = time_ms(dev, iters, [&] { kernels::adaln_modulate(x, shift, scale); });
          const double composed = time_ms(dev, iters, [&] {
            auto y = torch::layer_norm(x, {sh.channels}, {}, {}, 1e-6) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1);
          });
          rows.push_back({"adaln", sh.name, dtype_name(dt), fused, composed, double(n * 2 * es) / 1e9});
        }
        {  // Gated residual: reads residual and y, writes out.
          auto y = torch::randn_like(x);
          const double fused = time_ms(dev, iters, [&] { kernels::gated_residual(x, shift, y); });
          const double composed = time_ms(dev, iters, [&] { auto o = x + shift.unsqueeze(1) * y; });
          rows.push_back({"gated_residual", sh.name, dtype_name(dt), fused, composed, double(n * 3 * es) / 1e9});
        }
        // tanh-GELU over the MLP's hidden rows (4x the channels); on a GPU it is LibTorch's own.
        if (!gpu) {
          auto h = torch::randn({sh.batch, sh.tokens, 4 * sh.channels}, opts).to(dt) * 2;
          auto g = torch::randn_like(h);
          const auto approx = torch::nn::functional::GELUFuncOptions().approximate("tanh");
          const double fused = time_ms(dev, iters, [&] { kernels::gelu_tanh(h); });
          const double composed =
              time_ms(dev, iters, [&] { torch::nn::functional::gelu(h, approx); });
          rows.push_back({"gelu_tanh", sh.name, dtype_name(dt), fused, composed,
                          double(4 * n * 2 * es) / 1e9});
          const double fused_bw = time_ms(dev, iters, [&] { kernels::gelu_tanh_backward(h, g); });
          const double composed_bw = time_ms(dev, iters, [&] { at::gelu_backward(g, h, "tanh"); });
          rows.push_back({"gelu_tanh backward", sh.name, dtype_name(dt), fused_bw, composed_bw,
                          double(4 * n * 3 * es) / 1e9});
        }
      }
      // The row-invariant linear layer (fp32 on the CPU; elsewhere it is
      // LibTorch's batched GEMM) against the per-sample GEMM the DiT ran
      // before, and against one GEMM over all rows, which is not invariant:
      // the QKV projection of the small shape, a square layer at large.
      if (!gpu) {
        const int64_t in = sh.channels, out = sh.name == "small" ? 3 * sh.channels : sh.channels;
        auto x = torch::randn({sh.batch, sh.tokens, in}, opts), w = torch::randn({out, in}, opts),
             b = torch::randn({out}, opts);
        const double fused = time_ms(dev, iters, [&] { kernels::invariant_linear(x, w, b); });
        const double per_sample = time_ms(dev, iters, [&] {
          torch::baddbmm(b.view({1, 1, out}).expand({sh.batch, sh.tokens, out}), x,
                         w.t().unsqueeze(0).expand({sh.batch, in, out}));
        });
        const double one_gemm = time_ms(dev, iters, [&] {
          torch::addmm(b, x.view({-1, in}), w.t());
        });
        const double gb = double(4 * (sh.batch * sh.tokens * (in + out) + in * out)) / 1e9;
        rows.push_back(
            {"invariant_linear (vs per-sample GEMM)", sh.name, "fp32", fused, per_sample, gb});
        rows.push_back({"invariant_linear (vs one GEMM)", sh.name, "fp32", fused, one_gemm, gb});
      }
      {  // Philox noise against LibTorch's own generator (the composition has no twin).
        std::vector<uint64_t> seeds(sh.batch);
        for (size_t i = 0; i < seeds.size(); ++i) seeds[i] = 1000 + i;
        const int64_t per = sh.tokens * sh.channels;
        const double fused = time_ms(dev, iters, [&] { kernels::seed_noise(seeds, 3, {per}, dev); });
        const double composed = time_ms(dev, iters, [&] { torch::randn({sh.batch, per}, opts); });
        rows.push_back({"philox_noise (vs torch::randn)", sh.name, "fp32", fused, composed,
                        double(sh.elements() * 4) / 1e9});
      }
    }
    double copy_gbs = 0, write_gbs = 0;
#ifdef SPOTLIGHT_WITH_CUDA
    if (gpu) {
      const int64_t bytes = shapes.back().elements() * 4;
      copy_gbs = 2.0 * double(bytes) / 1e9 / (kernels::cuda::copy_ms(bytes, iters) / 1e3);
      auto buf = torch::empty({bytes / 4}, opts.dtype(torch::kFloat32));
      const double ms = time_ms(dev, iters, [&] { kernels::cuda::fill(buf.data_ptr<float>(), buf.numel(), 1.0f, nullptr); });
      write_gbs = double(bytes) / 1e9 / (ms / 1e3);
    }
#endif
    std::printf("\n| kernel | shape | dtype | fused ms | composed ms | speed-up | fused GB/s |%s\n",
                gpu ? " % of copy |" : "");
    std::printf("| --- | --- | --- | ---: | ---: | ---: | ---: |%s\n", gpu ? " ---: |" : "");
    std::ostringstream js;
    js << "{\"device\":\"" << device << "\",\"threads\":" << threads << ",\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      const double gbs = r.gbytes / (r.fused_ms / 1e3);
      std::printf("| %s | %s | %s | %.4f | %.4f | %.2fx | %.1f |", r.kernel.c_str(), r.shape.c_str(), r.dtype.c_str(),
                  r.fused_ms, r.composed_ms, r.composed_ms / r.fused_ms, gbs);
      if (gpu) std::printf(" %.0f %% |", 100.0 * gbs / copy_gbs);
      std::printf("\n");
      js << (i ? "," : "") << "{\"kernel\":\"" << r.kernel << "\",\"shape\":\"" << r.shape << "\",\"dtype\":\""
         << r.dtype << "\",\"fused_ms\":" << r.fused_ms << ",\"composed_ms\":" << r.composed_ms
         << ",\"fused_gbs\":" << gbs << "}";
    }
    if (gpu)
      std::printf("\nceilings, same run: device-to-device copy %.1f GB/s (read + write); write-only kernel %.1f GB/s "
                  "(Philox at scale must reach half of it)\n",
                  copy_gbs, write_gbs);
    js << "],\"copy_gbs\":" << copy_gbs << ",\"write_gbs\":" << write_gbs << "}";
    if (json) std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "spotlight-kernel-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

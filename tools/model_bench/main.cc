// spotlight-model-bench: throughput of the DiT on this machine: rollout
// images/s (SDE sampler), flow-matching and GRPO training step times, and
// the share of each part, so that slow parts show.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <chrono>
#include <iomanip>
#include <iostream>

#include "models/dit.h"
#include "tools/common/device.h"
#include "tools/common/omp_env.h"
#include "models/evaluate.h"
#include "models/flow.h"
#include "models/grpo.h"
#include "models/sampler.h"
#include "models/scene/prompt.h"

using namespace spotlight;
using Clock = std::chrono::steady_clock;

namespace {
// GPU work is asynchronous: wait for it before reading the clock.
void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

template <class F>
double best_of(int reps, const torch::Device& d, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    sync(d);
    auto t0 = Clock::now();
    f();
    sync(d);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) {
  spotlight::tools::ensure_passive_omp(argv);
  CLI::App app{"spotlight-model-bench: DiT rollout and training throughput"};
  std::string config = "tiny", device = "cpu";
  int batch = 32, threads = 2, steps = 10, reps = 3;
  double guidance = 1.0;
  bool json = false;
  app.add_option("--config", config, "model configuration");
  app.add_option("--batch", batch, "images per batch")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "denoising steps per rollout")->check(CLI::PositiveNumber);
  app.add_option("--guidance", guidance, "classifier-free guidance scale of the rollout and GRPO step (1: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads, "CPU threads (LibTorch's and OpenBLAS's)")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "repetitions; the best is reported")->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print one JSON object as the last line");
  app.add_option("--device", device, "cpu, cuda or cuda:N");
  CLI11_PARSE(app, argc, argv);
  try {
    spotlight::tools::set_cpu_threads(threads);
    const auto dev = spotlight::tools::parse_device(device);
    models::DiT model(models::dit_config(config));
    model->to(dev);
    const auto& cfg = model->config();
    scene::PromptGenerator gen(7);
    std::vector<scene::Prompt> prompts;
    std::vector<uint64_t> seeds;
    for (int i = 0; i < batch; ++i) {
      prompts.push_back(gen.next());
      seeds.push_back(1000 + i);
    }
    auto tokens = models::encode_prompts(prompts, cfg.text_len).to(dev);
    auto x0 = models::render_batch(prompts, seeds, cfg.image_size).to(dev);
    auto s = torch::full({batch}, 0.5, x0.options());
    auto eps = torch::randn_like(x0);
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-4));

    const double render = best_of(reps, dev, [&] { models::render_batch(prompts, seeds, cfg.image_size); });
    const double forward = best_of(reps, dev, [&] {
      torch::NoGradGuard ng;
      model->forward(x0, s, tokens);
    });
    const double train = best_of(reps, dev, [&] {
      auto loss = models::flow_matching_loss(model->forward(models::interpolate(x0, eps, s), s, tokens), x0, eps);
      opt.zero_grad();
      loss.backward();
      opt.step();
    });
    models::SamplerOptions so;
    so.steps = steps;
    so.record = true;
    so.guidance = guidance;
    models::Rollout roll;
    const double rollout = best_of(reps, dev, [&] { roll = models::sample(model, tokens, seeds, so); });
    const double score = best_of(reps, dev, [&] { models::score_batch(prompts, roll.images); });
    auto adv = torch::randn({batch}, x0.options());
    const double grpo = best_of(reps, dev, [&] {
      opt.zero_grad();
      for (size_t k = 0; k < roll.sde_steps.size(); ++k)
        models::grpo_step_loss(model, nullptr, tokens, roll, k, adv, so, {}).backward();
      opt.step();
    });
    std::cout << std::fixed << std::setprecision(4);
    std::cout << cfg.name << " DiT, " << model->parameter_count() << " parameters, batch " << batch << ", "
              << threads << " threads, guidance " << guidance << "\n"
              << "| what | time (s) | rate |\n| --- | --- | --- |\n"
              << "| render batch | " << render << " | " << batch / render << " images/s |\n"
              << "| forward | " << forward << " | " << batch / forward << " images/s |\n"
              << "| flow-matching train step | " << train << " | " << batch / train << " images/s |\n"
              << "| rollout, " << steps << " steps | " << rollout << " | " << batch / rollout << " images/s |\n"
              << "| reward | " << score << " | " << batch / score << " images/s |\n"
              << "| GRPO step, " << roll.sde_steps.size() << " trained steps | " << grpo << " | "
              << batch / grpo << " samples/s |\n";
    if (json)
      std::cout << "{\"config\":\"" << cfg.name << "\",\"batch\":" << batch << ",\"forward_s\":" << forward
                << ",\"guidance\":" << guidance << ",\"fm_train_step_s\":" << train << ",\"rollout_images_per_s\":" << batch / rollout
                << ",\"grpo_step_s\":" << grpo << ",\"reward_images_per_s\":" << batch / score << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "spotlight-model-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

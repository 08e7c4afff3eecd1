// spotlight-pretrain: trains the base DiT with the flow-matching loss on
// rendered shape scenes, logging JSON lines and evaluating on mini-GenEval.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "models/checkpoint.h"
#include "tools/common/device.h"
#include "tools/common/omp_env.h"
#include "models/ema.h"
#include "models/evaluate.h"
#include "models/flow.h"
#include "models/scene/prompt.h"

using namespace spotlight;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  spotlight::tools::ensure_passive_omp(argv);
  CLI::App app{"spotlight-pretrain: flow-matching pre-training of the base DiT on rendered scenes"};
  std::string config = "tiny", out = "pretrained.pt", resume, device = "cpu";
  int steps = 6000, batch = 64, eval_every = 1000, threads = 2, warmup = 200, pixel_head = -1;
  double lr = 1e-3, minutes = 0, ema_decay = 0.999, shift = 1.0, cond_drop = 0.1, guidance = -1;
  uint64_t seed = 1;
  models::EvalOptions eval;
  app.add_option("--config", config, "model configuration (tiny, base)");
  app.add_option("--out", out, "checkpoint to write (the EMA weights)");
  app.add_option("--resume", resume, "start from this checkpoint instead of a fresh model");
  app.add_option("--pixel-head", pixel_head,
                 "hidden channels of the pixel head (docs/models.md; 0: none). With --resume, a "
                 "model without "
                 "one gains it, starting as the identity (default: the configuration's or the "
                 "checkpoint's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "optimiser steps")->check(CLI::PositiveNumber);
  app.add_option("--minutes", minutes, "stop after this wall time even if steps remain (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "peak AdamW learning rate (linear warm-up, cosine decay)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "warm-up steps")->check(CLI::NonNegativeNumber);
  app.add_option("--ema", ema_decay, "EMA decay of the saved weights")->check(CLI::Range(0.0, 1.0));
  app.add_option("--shift", shift, "shift of the uniform training noise levels")->check(CLI::PositiveNumber);
  app.add_option("--cond-drop", cond_drop,
                 "fraction of training images whose prompt is replaced by the null prompt (all padding), so the "
                 "model also learns the unconditional velocity that classifier-free guidance needs")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--guidance", guidance,
                 "classifier-free guidance scale of the evaluations, recorded in the checkpoint as its sampling "
                 "default (default: the resumed checkpoint's, else 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-every", eval_every, "evaluate and checkpoint every N steps")->check(CLI::PositiveNumber);
  app.add_option("--eval-steps", eval.steps, "ODE steps of the evaluation")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads (LibTorch's and OpenBLAS's)")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "data and initialisation seed");
  app.add_option("--device", device, "cpu, cuda or cuda:N");
  CLI11_PARSE(app, argc, argv);

  try {
    spotlight::tools::set_cpu_threads(threads);
    torch::manual_seed(seed);
    models::DiT model{nullptr};
    int64_t start_step = 0;
    double resumed_guidance = 1.0;
    if (!resume.empty()) {
      auto ck = models::load_checkpoint(resume);
      model = ck.model;
      start_step = ck.info.step;
      resumed_guidance = ck.info.guidance;
      if (pixel_head >= 0 && pixel_head != model->config().pixel_head) {
        if (model->config().pixel_head > 0)
          throw std::invalid_argument("the checkpoint already has a pixel head of " +
                                      std::to_string(model->config().pixel_head) + " channels");
        auto cfg = model->config();
        cfg.pixel_head = pixel_head;
        models::DiT grown(cfg);
        auto fresh = models::copy_matching_weights(model, grown);
        std::cerr << "spotlight-pretrain: pixel head of " << pixel_head << " channels added ("
                  << fresh.size() << " new weights)\n";
        model = grown;
      }
    } else {
      auto cfg = models::dit_config(config);
      if (pixel_head >= 0) cfg.pixel_head = pixel_head;
      model = models::DiT(cfg);
    }
    const auto dev = spotlight::tools::parse_device(device);
    model->to(dev);
    eval.guidance = guidance >= 0 ? guidance : resumed_guidance;
    models::Ema ema(model, ema_decay);
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(lr).weight_decay(1e-4));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    scene::PromptGenerator prompts(seed);
    const auto& cfg = model->config();
    std::cerr << "spotlight-pretrain: " << cfg.name << " DiT, " << model->parameter_count()
              << " parameters, batch " << batch << ", " << steps << " steps, prompt dropout " << cond_drop
              << ", evaluation guidance " << eval.guidance << "\n";

    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    double loss_sum = 0;
    int loss_n = 0;
    uint64_t image_seed = seed << 32;
    auto checkpoint = [&](int64_t step) {
      auto r = models::evaluate(ema.model(), eval);
      models::save_checkpoint(out, ema.model(), {"pretrain", step, r.reward, eval.guidance});
      std::cout << "{\"event\":\"eval\",\"step\":" << step << ",\"reward\":" << r.reward
                << ",\"strict\":" << r.strict << ",\"elapsed_s\":" << elapsed() << "}" << std::endl;
    };
    int step = 0;
    for (; step < steps; ++step) {
      if (minutes > 0 && elapsed() > minutes * 60) break;
      // Linear warm-up, then cosine decay to 10 % of the peak.
      double f = step < warmup ? double(step + 1) / warmup
                               : 0.1 + 0.45 * (1 + std::cos(M_PI * double(step - warmup) / std::max(1, steps - warmup)));
      for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr * f);

      std::vector<scene::Prompt> batch_prompts;
      std::vector<uint64_t> seeds;
      for (int i = 0; i < batch; ++i) {
        batch_prompts.push_back(prompts.next());
        seeds.push_back(image_seed++);
      }
      auto x0 = models::render_batch(batch_prompts, seeds, cfg.image_size).to(dev);
      auto tokens = models::encode_prompts(batch_prompts, cfg.text_len);
      if (cond_drop > 0) {  // the null prompt for a random cond_drop of the batch
        auto keep = torch::rand({batch, 1}, gen).ge(cond_drop).to(torch::kInt64);
        tokens = tokens * keep;
      }
      tokens = tokens.to(dev);
      auto eps = torch::randn(x0.sizes(), gen).to(dev);
      auto s = models::sample_training_sigmas(batch, shift, gen).to(dev);
      auto loss = models::flow_matching_loss(model->forward(models::interpolate(x0, eps, s), s, tokens), x0, eps);
      opt.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt.step();
      ema.update(model);
      loss_sum += loss.item<double>();
      ++loss_n;
      if ((step + 1) % 50 == 0) {
        std::cout << "{\"event\":\"train\",\"step\":" << start_step + step + 1 << ",\"loss\":" << loss_sum / loss_n
                  << ",\"lr\":" << lr * f << ",\"elapsed_s\":" << elapsed()
                  << ",\"images_per_s\":" << (step + 1) * double(batch) / elapsed() << "}" << std::endl;
        loss_sum = 0;
        loss_n = 0;
      }
      if ((step + 1) % eval_every == 0) checkpoint(start_step + step + 1);
    }
    if (step % eval_every != 0) checkpoint(start_step + step);
    std::cerr << "spotlight-pretrain: wrote " << out << " after " << step << " steps in " << elapsed() << " s\n";
  } catch (const std::exception& e) {
    std::cerr << "spotlight-pretrain: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// spotlight-eval: the mean mini-GenEval reward of a checkpoint over the fixed
// evaluation set (Euler ODE sampler, fixed seeds); the last line is reward=<value>.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <chrono>
#include <iomanip>
#include <iostream>

#include "models/checkpoint.h"
#include "tools/common/device.h"
#include "tools/common/omp_env.h"
#include "models/evaluate.h"

using namespace spotlight;

namespace {

// --shape-report's tables: the calls against the wanted shapes over every
// tag, then the share called right per tag and wanted shape.
void print_shape_calls(const scene::ShapeConfusion& c) {
  std::cout << "| wanted |";
  for (const auto s : scene::kShapes) std::cout << " called " << scene::shape_name(s) << " |";
  std::cout << " called right |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (const auto w : scene::kShapes) {
    std::cout << "| " << scene::shape_name(w) << " |";
    for (const auto s : scene::kShapes) std::cout << " " << c.total(w, s) << " |";
    std::cout << " " << c.right_share(w) << " |\n";
  }
  std::cout << "| tag |";
  for (const auto w : scene::kShapes) std::cout << " " << scene::shape_name(w) << " called right |";
  std::cout << "\n| --- | ---: | ---: | ---: |\n";
  for (const auto t : scene::kTags) {
    std::cout << "| " << scene::tag_name(t) << " |";
    for (const auto w : scene::kShapes) std::cout << " " << c.right_share(t, w) << " |";
    std::cout << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  spotlight::tools::ensure_passive_omp(argv);
  CLI::App app{"spotlight-eval: mini-GenEval reward of a checkpoint"};
  std::string checkpoint, grid, device = "cpu";
  int grid_images = 32;
  int threads = 2;
  double guidance = -1;
  models::EvalOptions eval;
  // 8 seeds (512 images): a 128-image reward has a standard error of about
  // 0.035, too much to judge one checkpoint against another; the trainers'
  // periodic evaluations keep EvalOptions' 2 seeds for speed.
  eval.seeds_per_prompt = 8;
  app.add_option("--checkpoint", checkpoint, "checkpoint file")->required();
  app.add_option("--prompts", eval.prompts, "evaluation prompts (at least 64)")->check(CLI::Range(64, 100000));
  app.add_option("--seeds", eval.seeds_per_prompt, "fixed seeds per prompt")->check(CLI::PositiveNumber);
  app.add_option("--steps", eval.steps, "Euler ODE steps")->check(CLI::PositiveNumber);
  app.add_option("--shift", eval.shift, "schedule shift of the sampler")->check(CLI::PositiveNumber);
  app.add_option("--guidance", guidance, "classifier-free guidance scale (default: the checkpoint's)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--validation", eval.validation,
               "the trainers' validation set (spotlight-train --keep-best) instead of the evaluation set");
  app.add_flag(
      "--shape-report", eval.shape_report,
      "also print the shape-soft reward (spotlight-train --reward soft) and the reward with every "
      "shape call in the image's favour: what the detector's shape calls cost; and which shape "
      "each blob is called against the shape its prompt wants of it, overall and per tag");
  app.add_flag("--colour-report", eval.colour_report,
               "also print, per palette colour, the blobs found an image and the share of the clauses asking "
               "for it whose image has a blob of it: a collapse of the colours shows here, not in the reward");
  app.add_option("--soft-width", eval.soft_width, "--shape-report: the shape-soft reward's width scale")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads (LibTorch's and OpenBLAS's)")->check(CLI::PositiveNumber);
  app.add_option("--device", device, "cpu, cuda or cuda:N");
  app.add_option("--grid", grid, "also write the first --grid-images images as a PPM grid to this file");
  app.add_option("--grid-images", grid_images, "images in the grid")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    spotlight::tools::set_cpu_threads(threads);
    auto ck = models::load_checkpoint(checkpoint);
    ck.model->to(spotlight::tools::parse_device(device));
    eval.guidance = guidance >= 0 ? guidance : ck.info.guidance;
    const auto t0 = std::chrono::steady_clock::now();
    eval.keep_images = !grid.empty();
    auto r = models::evaluate(ck.model, eval);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << std::fixed << std::setprecision(4);
    std::cout << "checkpoint " << checkpoint << " (" << ck.model->config().name << ", " << ck.info.kind << " step "
              << ck.info.step << "): " << r.images << " images, " << eval.prompts << " prompts x "
              << eval.seeds_per_prompt << " seeds" << (eval.validation ? " (validation set)" : "") << ", " << eval.steps << " ODE steps, guidance " << eval.guidance << ", " << secs << " s\n";
    std::cout << "| tag | reward |\n| --- | --- |\n";
    for (const auto& [tag, v] : r.reward_by_tag) std::cout << "| " << tag << " | " << v << " |\n";
    if (!grid.empty()) {
      const int64_t n = std::min<int64_t>(grid_images, r.samples.size(0));
      models::write_ppm_grid(grid, r.samples.slice(0, 0, n), 8);
      std::cout << "grid " << grid << " (8 per row), prompts and rewards in order:\n";
      for (int64_t i = 0; i < n; ++i) std::cout << "  " << i << ": " << r.texts[i] << " -> " << r.rewards[i] << "\n";
    }
    if (eval.shape_report) {
      std::cout << "shape-soft reward " << r.soft << ", with every shape call favourable " << r.shape_best << "\n";
      print_shape_calls(r.shapes);
    }
    if (eval.colour_report) {
      std::cout << "| colour | blobs an image | clauses asking it | of them, drawn |\n| --- | ---: | ---: | ---: |\n";
      for (const auto c : scene::kColors)
        std::cout << "| " << scene::color_name(c) << " | " << r.colours.blobs_per_image(c) << " | "
                  << r.colours.asked[size_t(c)] << " | " << r.colours.drawn_share(c) << " |\n";
    }
    std::cout << "strict=" << r.strict << "\n";
    std::cout << "reward=" << r.reward << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "spotlight-eval: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

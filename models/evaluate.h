// The glue between the shape world (models/scene, plain C++) and tensors:
// prompt tokens, rendered training batches, rewards of generated images, and
// the fixed mini-GenEval evaluation that spotlight-eval reports.
#pragma once

#include <torch/torch.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/dit.h"
#include "models/sampler.h"
#include "models/scene/colour_tally.h"
#include "models/scene/prompt.h"
#include "models/scene/reward.h"
#include "models/scene/shape_confusion.h"

namespace spotlight::models {

// [B, text_len] int64 token ids.
torch::Tensor encode_prompts(const std::vector<scene::Prompt>& prompts, int64_t text_len);

// Rendered scenes, [B, 3, size, size] in [-1, 1]: the pre-training data.
torch::Tensor render_batch(const std::vector<scene::Prompt>& prompts, const std::vector<uint64_t>& seeds,
                           int64_t size);

// Calls f(i, chw, size) for each image of [B, 3, S, S], clamped to [-1, 1] and
// on the CPU, with its prompt's index; `who` names the caller in the error.
template <class F>
void for_each_image(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images, const char* who, F&& f) {
  if (images.dim() != 4 || images.size(0) != int64_t(prompts.size()) || images.size(1) != 3 ||
      images.size(2) != images.size(3))
    throw std::invalid_argument(std::string(who) + ": images must be [B, 3, S, S] with one prompt per image");
  auto img = images.detach().to(torch::kCPU, torch::kFloat32).clamp(-1, 1).contiguous();
  const int size = int(img.size(2));
  const int64_t per = 3 * int64_t(size) * size;
  for (size_t i = 0; i < prompts.size(); ++i) f(i, img.data_ptr<float>() + i * per, size);
}

// Mini-GenEval scores of generated images [B, 3, H, W] (clamped to [-1, 1]).
std::vector<scene::Score> score_batch(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images);
torch::Tensor rewards_tensor(const std::vector<scene::Score>& scores);  // [B] float32
// scene::expected_reward of each image: the shape-soft training reward, [B] float32;
// `width` scales scene::SoftOptions' widths (wider: softer calls further from the cuts).
// With `scores`, also each image's mini-GenEval score (score_batch's), from the same detection.
torch::Tensor soft_rewards(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images, double width = 1,
                           std::vector<scene::Score>* scores = nullptr);
// Sums over the images (one detection each) of scene::expected_reward and of
// scene::best_reward_over_shapes, the reward with every shape call in the image's favour.
struct ShapeReport {
  double soft = 0, favourable = 0;
};
// With `confusion`, also adds each image's shape calls to it (the same detection).
ShapeReport shape_report(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                         double width = 1, scene::ShapeConfusion* confusion = nullptr);

struct EvalOptions {
  int prompts = 64;          // scene::evaluation_prompts(n): fixed
  int seeds_per_prompt = 2;  // fixed seeds: kEvalSeedBase + prompt * seeds_per_prompt + j
  int steps = 20;            // Euler ODE steps (noise level 0)
  double shift = 3.0;
  double guidance = 1.0;     // classifier-free guidance scale (SamplerOptions::guidance)
  int64_t batch = 64;
  bool keep_images = false;  // return the generated images (to look at them)
  bool validation = false;   // the trainer's validation set: other prompts, other seeds
  // Also the shape-soft reward, the reward with every shape call favourable
  // and the shape calls against the wanted shapes (scene::ShapeConfusion).
  bool shape_report = false;
  double soft_width = 1;      // shape_report: the soft reward's width scale (soft_rewards)
  bool colour_report = false; // also the blobs of each colour, and the asked colours drawn (scene::ColourTally)
};
constexpr uint64_t kEvalSeedBase = 0x5eed0000;
constexpr uint64_t kValidationSeedBase = 0x7a110000;

struct EvalResult {
  double reward = 0;  // mean partial-credit reward
  double strict = 0;  // fraction of images with every clause exact
  int images = 0;
  double soft = 0;        // shape_report: mean scene::expected_reward
  double shape_best = 0;  // shape_report: mean scene::best_reward_over_shapes
  scene::ShapeConfusion shapes;  // shape_report
  std::map<std::string, double> reward_by_tag;
  scene::ColourTally colours;  // colour_report
  torch::Tensor samples;                // keep_images: [images, 3, S, S]
  std::vector<std::string> texts;       // keep_images: the prompt of each image
  std::vector<double> rewards;          // keep_images: the reward of each image
};

// Writes images [B, 3, S, S] in [-1, 1] as one binary PPM grid, `cols` wide
// with a 2-pixel black gutter.
void write_ppm_grid(const std::string& path, const torch::Tensor& images, int cols);

EvalResult evaluate(DiT& model, const EvalOptions& opts);

}  // namespace spotlight::models

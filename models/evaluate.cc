#include "models/evaluate.h"

#include <fstream>
#include <stdexcept>

#include "models/scene/detect.h"
#include "models/scene/render.h"
#include "models/scene/soft.h"
#include "models/scene/tokenizer.h"

namespace spotlight::models {

torch::Tensor encode_prompts(const std::vector<scene::Prompt>& prompts, int64_t text_len) {
  static const scene::Tokenizer tokenizer;
  auto out = torch::zeros({int64_t(prompts.size()), text_len}, torch::kInt64);
  auto* p = out.data_ptr<int64_t>();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ids = tokenizer.encode(prompts[i].text, int(text_len));
    std::copy(ids.begin(), ids.end(), p + i * text_len);
  }
  return out;
}

torch::Tensor render_batch(const std::vector<scene::Prompt>& prompts, const std::vector<uint64_t>& seeds,
                           int64_t size) {
  if (prompts.size() != seeds.size()) throw std::invalid_argument("render_batch: one seed per prompt");
  auto out = torch::empty({int64_t(prompts.size()), 3, size, size}, torch::kFloat32);
  const int64_t per = 3 * size * size;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto img = scene::render(prompts[i], seeds[i], int(size));
    std::copy(img.begin(), img.end(), out.data_ptr<float>() + i * per);
  }
  return out;
}

namespace {

scene::SoftOptions soft_options(double width) {
  scene::SoftOptions soft;
  soft.centroid_width *= float(width);
  soft.fill_width *= float(width);
  return soft;
}

}  // namespace

std::vector<scene::Score> score_batch(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images) {
  std::vector<scene::Score> out;
  out.reserve(prompts.size());
  for_each_image(prompts, images, "score_batch", [&](size_t i, const float* chw, int size) {
    out.push_back(scene::score_image(prompts[i], chw, size));
  });
  return out;
}

torch::Tensor soft_rewards(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images, double width,
                           std::vector<scene::Score>* scores) {
  const auto soft = soft_options(width);
  auto out = torch::empty({int64_t(prompts.size())}, torch::kFloat32);
  if (scores) scores->clear();
  for_each_image(prompts, images, "soft_rewards", [&](size_t i, const float* chw, int size) {
    const auto found = scene::detect(chw, size);
    out[int64_t(i)] = float(scene::expected_reward(prompts[i], found, soft));
    if (scores) scores->push_back(scene::score(prompts[i], found));
  });
  return out;
}

ShapeReport shape_report(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                         double width, scene::ShapeConfusion* confusion) {
  const auto soft = soft_options(width);
  ShapeReport sum;
  for_each_image(prompts, images, "shape_report", [&](size_t i, const float* chw, int size) {
    const auto found = scene::detect(chw, size);
    sum.soft += scene::expected_reward(prompts[i], found, soft);
    sum.favourable += scene::best_reward_over_shapes(prompts[i], found);
    if (confusion) confusion->add(prompts[i], found);
  });
  return sum;
}

torch::Tensor rewards_tensor(const std::vector<scene::Score>& scores) {
  auto out = torch::empty({int64_t(scores.size())}, torch::kFloat32);
  for (size_t i = 0; i < scores.size(); ++i) out[int64_t(i)] = float(scores[i].reward);
  return out;
}

EvalResult evaluate(DiT& model, const EvalOptions& opts) {
  const auto prompts = scene::evaluation_prompts(
      opts.prompts, opts.validation ? scene::kValidationPromptSeed : scene::kEvaluationPromptSeed);
  const uint64_t seed_base = opts.validation ? kValidationSeedBase : kEvalSeedBase;
  std::vector<scene::Prompt> all;
  std::vector<uint64_t> seeds;
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int j = 0; j < opts.seeds_per_prompt; ++j) {
      all.push_back(prompts[p]);
      seeds.push_back(seed_base + p * opts.seeds_per_prompt + j);
    }
  SamplerOptions sampler;
  sampler.steps = opts.steps;
  sampler.shift = opts.shift;
  sampler.guidance = opts.guidance;
  sampler.noise_level = 0;  // evaluation is the deterministic ODE
  const auto device = model->parameters().front().device();
  EvalResult res;
  std::map<std::string, std::pair<double, int>> by_tag;
  for (size_t at = 0; at < all.size(); at += opts.batch) {
    const size_t end = std::min(all.size(), at + size_t(opts.batch));
    std::vector<scene::Prompt> chunk(all.begin() + at, all.begin() + end);
    std::vector<uint64_t> chunk_seeds(seeds.begin() + at, seeds.begin() + end);
    auto tokens = encode_prompts(chunk, model->config().text_len).to(device);
    auto images = sample(model, tokens, chunk_seeds, sampler).images;
    auto scores = score_batch(chunk, images);
    if (opts.shape_report) {
      const auto shapes = shape_report(chunk, images, opts.soft_width, &res.shapes);
      res.soft += shapes.soft;
      res.shape_best += shapes.favourable;
    }
    if (opts.colour_report)
      for_each_image(chunk, images, "evaluate", [&](size_t i, const float* chw, int size) {
        res.colours.add(chunk[i], scene::detect(chw, size));
      });
    if (opts.keep_images) {
      res.samples = res.samples.defined() ? torch::cat({res.samples, images.cpu()}) : images.cpu();
      for (size_t i = 0; i < scores.size(); ++i) {
        res.texts.push_back(chunk[i].text);
        res.rewards.push_back(scores[i].reward);
      }
    }
    for (size_t i = 0; i < scores.size(); ++i) {
      res.reward += scores[i].reward;
      res.strict += scores[i].strict ? 1 : 0;
      auto& t = by_tag[std::string(scene::tag_name(chunk[i].tag))];
      t.first += scores[i].reward;
      t.second += 1;
    }
  }
  res.images = int(all.size());
  if (res.images > 0) {
    res.reward /= res.images;
    res.soft /= res.images;
    res.shape_best /= res.images;
    res.strict /= res.images;
  }
  for (auto& [tag, v] : by_tag) res.reward_by_tag[tag] = v.first / v.second;
  return res;
}

void write_ppm_grid(const std::string& path, const torch::Tensor& images, int cols) {
  if (images.dim() != 4 || images.size(1) != 3 || cols < 1)
    throw std::invalid_argument("write_ppm_grid: images must be [B, 3, S, S]");
  const int64_t n = images.size(0), S = images.size(2), gutter = 2;
  const int64_t rows = (n + cols - 1) / cols;
  const int64_t W = cols * (S + gutter) + gutter, H = rows * (S + gutter) + gutter;
  auto px = ((images.detach().cpu().to(torch::kFloat32).clamp(-1, 1) + 1) * 127.5).round().to(torch::kUInt8);
  px = px.permute({0, 2, 3, 1}).contiguous();  // [B, S, S, 3]
  std::vector<uint8_t> canvas(size_t(W * H * 3), 0);
  const auto* p = px.data_ptr<uint8_t>();
  for (int64_t b = 0; b < n; ++b) {
    const int64_t ox = gutter + (b % cols) * (S + gutter), oy = gutter + (b / cols) * (S + gutter);
    for (int64_t y = 0; y < S; ++y)
      std::copy_n(p + (b * S + y) * S * 3, S * 3, canvas.begin() + ((oy + y) * W + ox) * 3);
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
  out << "P6\n" << W << " " << H << "\n255\n";
  out.write(reinterpret_cast<const char*>(canvas.data()), std::streamsize(canvas.size()));
}

}  // namespace spotlight::models

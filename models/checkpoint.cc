#include "models/checkpoint.h"

#include <cstdio>
#include <filesystem>

namespace spotlight::models {
namespace {

void write_config(torch::serialize::OutputArchive& a, const DiTConfig& c) {
  a.write("config/name", c10::IValue(c.name));
  for (auto [key, v] :
       std::initializer_list<std::pair<const char*, int64_t>>{{"image_size", c.image_size},
                                                              {"channels", c.channels},
                                                              {"patch", c.patch},
                                                              {"dim", c.dim},
                                                              {"depth", c.depth},
                                                              {"heads", c.heads},
                                                              {"mlp_ratio", c.mlp_ratio},
                                                              {"vocab", c.vocab},
                                                              {"text_len", c.text_len},
                                                              {"text_depth", c.text_depth},
                                                              {"pixel_head", c.pixel_head},
                                                              {"pixel_features", c.pixel_features}})
    a.write(std::string("config/") + key, c10::IValue(v));
  a.write("config/expert_boundary", c10::IValue(c.expert_boundary));
}

int64_t read_int(torch::serialize::InputArchive& a, const std::string& key) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isInt()) throw CheckpointError("checkpoint lacks integer '" + key + "'");
  return v.toInt();
}

std::string read_string(torch::serialize::InputArchive& a, const std::string& key) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isString()) throw CheckpointError("checkpoint lacks string '" + key + "'");
  return v.toStringRef();
}

DiTConfig read_config(torch::serialize::InputArchive& a) {
  DiTConfig c;
  c.name = read_string(a, "config/name");
  c.image_size = read_int(a, "config/image_size");
  c.channels = read_int(a, "config/channels");
  c.patch = read_int(a, "config/patch");
  c.dim = read_int(a, "config/dim");
  c.depth = read_int(a, "config/depth");
  c.heads = read_int(a, "config/heads");
  c.mlp_ratio = read_int(a, "config/mlp_ratio");
  c.vocab = read_int(a, "config/vocab");
  c.text_len = read_int(a, "config/text_len");
  c.text_depth = read_int(a, "config/text_depth");
  // Absent in checkpoints made before the pixel head existed: no head.
  c10::IValue v;
  c.pixel_head = a.try_read("config/pixel_head", v) && v.isInt() ? v.toInt() : 0;
  if (a.try_read("config/pixel_features", v) && v.isInt()) c.pixel_features = v.toInt();
  // Absent before the low-noise expert existed: one set of weights.
  if (a.try_read("config/expert_boundary", v) && v.isDouble()) c.expert_boundary = v.toDouble();
  return c;
}

}  // namespace

void save_checkpoint(const std::string& path, DiT& model, const CheckpointInfo& info) {
  torch::serialize::OutputArchive a;
  a.write("format", c10::IValue(kCheckpointFormat));
  write_config(a, model->config());
  a.write("info/kind", c10::IValue(info.kind));
  a.write("info/step", c10::IValue(info.step));
  a.write("info/reward", c10::IValue(info.reward));
  a.write("info/guidance", c10::IValue(info.guidance));
  torch::serialize::OutputArchive weights;
  // Weights are stored on the CPU, so a GPU-trained checkpoint loads anywhere.
  for (const auto& p : model->named_parameters()) weights.write(p.key(), p.value().detach().cpu());
  for (const auto& b : model->named_buffers()) weights.write(b.key(), b.value().detach().cpu(), true);
  a.write("weights", weights);
  const std::string tmp = path + ".tmp";
  a.save_to(tmp);
  std::filesystem::rename(tmp, path);
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw CheckpointError("no checkpoint file at '" + path + "'");
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const c10::Error& e) {
    throw CheckpointError("'" + path + "' is not a Spotlight checkpoint: " + e.what_without_backtrace());
  }
  const auto format = read_int(a, "format");
  if (format != kCheckpointFormat)
    throw CheckpointError("'" + path + "' has checkpoint format " + std::to_string(format) + ", this build reads " +
                          std::to_string(kCheckpointFormat));
  LoadedCheckpoint out;
  try {
    out.model = DiT(read_config(a));
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("'" + path + "' holds an invalid configuration: " + e.what());
  }
  out.info.kind = read_string(a, "info/kind");
  out.info.step = read_int(a, "info/step");
  c10::IValue reward;
  if (a.try_read("info/reward", reward) && reward.isDouble()) out.info.reward = reward.toDouble();
  c10::IValue guidance;  // absent in checkpoints made before guidance existed: 1
  if (a.try_read("info/guidance", guidance) && guidance.isDouble()) out.info.guidance = guidance.toDouble();
  torch::serialize::InputArchive weights;
  if (!a.try_read("weights", weights)) throw CheckpointError("'" + path + "' has no weights");
  torch::NoGradGuard no_grad;
  for (auto& p : out.model->named_parameters()) {
    torch::Tensor t;
    if (!weights.try_read(p.key(), t)) throw CheckpointError("'" + path + "' lacks weight '" + p.key() + "'");
    if (t.sizes() != p.value().sizes())
      throw CheckpointError("'" + path + "': weight '" + p.key() + "' has the wrong shape");
    p.value().copy_(t);
  }
  return out;
}

std::vector<std::string> copy_matching_weights(DiT& from, DiT& to) {
  auto source = from->named_parameters();
  std::vector<std::string> fresh;
  torch::NoGradGuard no_grad;
  for (auto& p : to->named_parameters()) {
    const auto* t = source.find(p.key());
    if (!t) {
      fresh.push_back(p.key());
      continue;
    }
    if (t->sizes() != p.value().sizes())
      throw CheckpointError("weight '" + p.key() + "' has another shape in the new configuration");
    p.value().copy_(*t);
  }
  return fresh;
}

DiT grow_low_noise_expert(DiT& base, double boundary) {
  auto cfg = base->config();
  if (cfg.expert_boundary > 0)
    throw CheckpointError("the model already has a low-noise expert (below noise level " +
                          std::to_string(cfg.expert_boundary) + ")");
  if (!(boundary > 0 && boundary < 1))
    throw CheckpointError("an expert boundary must lie in (0, 1)");
  cfg.expert_boundary = boundary;
  DiT grown(cfg);
  grown->to(base->parameters().front().device());
  copy_matching_weights(base, grown);
  DiT expert(grown->low_noise_expert());
  if (!copy_matching_weights(base, expert).empty())
    throw CheckpointError("the low-noise expert has weights its base lacks");
  return grown;
}

}  // namespace spotlight::models

// DiT checkpoints: the configuration, the weights and a little provenance in
// one LibTorch archive, so a file alone rebuilds the model it holds.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "models/dit.h"

namespace spotlight::models {

struct CheckpointInfo {
  std::string kind = "pretrain";  // pretrain | grpo
  int64_t step = 0;               // optimiser steps or GRPO iterations behind it
  double reward = -1;             // last measured evaluation reward, -1 if none
  // The classifier-free guidance scale the model is meant to be sampled with
  // (and `reward` was measured at); tools default to it. 1: no guidance.
  double guidance = 1.0;
};

// Missing, unreadable or incompatible checkpoint files.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr int64_t kCheckpointFormat = 1;

// Writes atomically (a temporary file renamed over `path`).
void save_checkpoint(const std::string& path, DiT& model, const CheckpointInfo& info);

struct LoadedCheckpoint {
  DiT model{nullptr};
  CheckpointInfo info;
};
LoadedCheckpoint load_checkpoint(const std::string& path);

// Copies every weight of `from` into the weight of `to` with the same name,
// so a trained model carries over into a configuration that adds layers
// (a pixel head). Returns the names of `to`'s weights left as initialised;
// throws CheckpointError if a shared name has another shape.
std::vector<std::string> copy_matching_weights(DiT& from, DiT& to);

// `base` with a low-noise expert (DiTConfig::expert_boundary) grown onto it:
// both experts start as copies of base's weights, so the grown model samples
// exactly what base does until the expert is trained. Throws CheckpointError
// if base already has an expert or the boundary is outside (0, 1).
DiT grow_low_noise_expert(DiT& base, double boundary);

}  // namespace spotlight::models

// DiffusionNFT (Zheng et al. 2025, arXiv 2509.16117): online RL for flow models
// on the forward process. Instead of Flow-GRPO's policy gradient through the
// SDE noise of a few denoising steps, it fits the velocity by flow matching on
// the policy's own samples, pulled towards the better samples of a group and
// pushed away from the worse through two implicit policies around the old one:
//   v+ = (1 - b) v_old + b v,   v- = (1 + b) v_old - b v
//   L  = mean_i [ r_i |v+ - (eps - x0_i)|^2 + (1 - r_i) |v- - (eps - x0_i)|^2 ]
// with r_i in [0, 1] the sample's optimality probability. Each sample supplies
// a full-image regression target, not one scalar per noise draw, which is why
// it learns from far fewer samples. The loss is a convex quadratic in v whose
// minimiser is v_old + (2r - 1)(eps - x0 - v_old) / b: it cannot run away.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/dit.h"

namespace spotlight::models {

// r = 1/2 + 1/2 clip(A, -M, M) / M from group-normalised advantages A [N]
// (M = clip, DiffusionNFT's adv_clip_max; its release uses 5). Why M matters:
// the advantages of a group sum to zero, so without clipping so does the
// sum of (2r - 1), and the loss's pull towards the better samples and push
// from the worse cancel on average. Clipping breaks that: rewards here are
// skewed (a few good samples among many poor ones), the large positive
// advantages are cut, and the net (2r - 1) < 0 is gradient ascent on the
// flow-matching error of the model's own samples, a steady drift. A larger
// M clips less and keeps the balance.
// positive_only raises r to at least 1/2: a worse-than-average sample then
// anchors the velocity at the old policy's instead of pushing it away from
// its own image. Why: the push-away term is gradient ascent on the flow-
// matching error of the model's own samples, and on a small model it erodes
// what the base model draws well (colours, counts) while the better samples
// teach the rest.
torch::Tensor nft_optimality(const torch::Tensor& advantages, bool positive_only = false, double clip = 1.0);

// Rejection-sampling fine-tuning (RAFT) in NFT's form: r = 1 for the selected
// samples, 1/2 for the rest. With beta = 1 an r = 1 sample is plain flow
// matching on its image and an r = 1/2 sample anchors the velocity at the old
// policy's (zero gradient there, a restoring force away from it). Why select
// by an absolute criterion (every clause of the prompt right) and not by the
// group's advantage: --positive-only pulls every better-than-average sample,
// which in a poor group is still a wrong image, and it collapsed. Measured
// on the tiny model, this collapsed as well (docs/benchmarks.md, seventh
// session): fitting only correct images is not enough to keep the rest.
torch::Tensor nft_selected_optimality(const std::vector<bool>& selected);

struct NftLossStats {
  double loss = 0;
  double positive_mse = 0;  // r-weighted error of v+ (flow-matching units)
  double negative_mse = 0;  // (1 - r)-weighted error of v-
  double reference_mse = 0; // |v - v_ref|^2, when a reference anchors the loss
};

// x0: the samples [B, C, H, W]; tokens: their prompts [B, L]; r: [B] in [0, 1];
// s: noise levels [B]; eps: noise like x0. `old` is evaluated without gradients.
// guidance: the velocity fitted. 1 is the prompt branch alone; w != 1 fits the
// classifier-free-guided velocity v_null + w (v_prompt - v_null) that a
// sampler at scale w follows, with gradients through both branches. Why: a
// rollout at w = 5 moves with five times any change of the prompt branch, so
// fitting the prompt branch alone to guided samples overshoots by that much.
// reference, reference_weight: adds reference_weight * |v - v_ref|^2, the
// velocity's distance from a fixed reference (the pre-trained model) at the
// same noisy inputs: the flow-matching form of the KL to the reference that
// DiffusionNFT's release carries, so that RL keeps what the base model knew.
// null_grad false (with guidance != 1): the null branch carries no gradient.
// Why: the guided velocity weighs the null branch by 1 - w (-4 at w = 5), so
// a net pull of the guided velocity towards the samples pushes the null
// branch four times as hard away from them, ascending its flow-matching
// loss. Runs with a net pull (--positive-only, --select strict) collapsed;
// freezing the null branch slowed that collapse but did not stop it. The
// weights are shared, so the null branch still moves.
torch::Tensor nft_loss(DiT& model, DiT& old, const torch::Tensor& x0, const torch::Tensor& tokens,
                       const torch::Tensor& r, const torch::Tensor& s, const torch::Tensor& eps,
                       double beta, NftLossStats* stats = nullptr, double guidance = 1.0,
                       DiT* reference = nullptr, double reference_weight = 0.0, bool null_grad = true);

}  // namespace spotlight::models

// Sequence parallelism over the image tokens (DeepSpeed-Ulysses, as xDiT runs
// it for MMDiTs): each of the d ranks of a group holds N/d image tokens and
// the whole (short) text; everything but attention is token-wise and stays
// local. Attention all-to-alls q, k and v (in one exchange) from "my tokens,
// all heads" to "all tokens, my H/d heads", attends over the whole [text,
// image] sequence, and all-to-alls back in a second exchange that also
// carries the text stream's output heads to every rank. The heads and the
// image tokens must divide by d.
//
// Inference only (rollouts): the exchanges are not differentiable.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "spotlight/collective.h"

namespace spotlight::models {

struct SequenceParallel {
  collective::Communicator* comm = nullptr;
  int rank() const { return comm->rank(); }
  int degree() const { return comm->size(); }
};

// [B, H, n, dh] (this rank's n tokens, all heads) -> [B, H/d, d*n, dh] (all
// tokens in rank order, this rank's heads).
torch::Tensor seq_to_heads(const torch::Tensor& t, collective::Communicator& comm);
// The inverse: [B, H/d, d*n, dh] -> [B, H, n, dh].
torch::Tensor heads_to_seq(const torch::Tensor& t, collective::Communicator& comm);
// [B, H/d, L, dh] (this rank's heads) -> [B, H, L, dh] on every rank.
torch::Tensor gather_heads(const torch::Tensor& t, collective::Communicator& comm);
// [B, n, C] (this rank's tokens) -> [B, d*n, C] on every rank.
torch::Tensor gather_tokens(const torch::Tensor& t, collective::Communicator& comm);

// Joint attention over [text, image] with the image tokens split over the
// group. Text q/k/v: [B, H, L, dh], whole on every rank; image q/k/v:
// [B, H, n, dh], this rank's tokens. key_mask: [B, 1, 1, L + d*n]. Returns
// the text output [B, H, L, dh] (whole) and this rank's image output
// [B, H, n, dh].
std::pair<torch::Tensor, torch::Tensor> ulysses_joint_attention(
    const torch::Tensor& qc, const torch::Tensor& kc, const torch::Tensor& vc, const torch::Tensor& qx,
    const torch::Tensor& kx, const torch::Tensor& vx, const torch::Tensor& key_mask, collective::Communicator& comm);

}  // namespace spotlight::models

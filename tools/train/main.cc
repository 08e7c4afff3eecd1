// spotlight-train: single-process post-training of a pre-trained DiT on
// mini-GenEval: Flow-GRPO (SDE rollouts with per-step log-probs, group
// advantages, clipped ratio), DiffusionNFT (flow matching on the rollouts,
// weighted by the same group advantages), or DRaFT (the gradient of a
// differentiable stand-in for the detector's shape calls, models/draft.h). Logs one JSON line per iteration; evaluates the
// fixed set with the ODE sampler every --eval-every iterations; optionally
// measures how stable seed rankings are from one iteration's weights to the next.
// With --population N it forks N - 1 more trainers that meet at every
// evaluation and go on from the best of them (tools/train/population.h).
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/draft.h"
#include "models/ema.h"
#include "models/evaluate.h"
#include "models/flow.h"
#include "models/grpo.h"
#include "models/nft.h"
#include "models/sampler.h"
#include "models/scene/prompt.h"
#include "models/stats/rank.h"
#include "models/stats/select.h"
#include "tools/common/device.h"
#include "tools/common/omp_env.h"
#include "tools/train/lr_scales.h"
#include "tools/train/population.h"
#include "tools/train/rollout_draw.h"
#include "tools/train/shape_focus.h"
#include "tools/train/tag_curriculum.h"

using namespace spotlight;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<double> to_vector(const torch::Tensor& t) {
  auto c = t.to(torch::kFloat64).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// The elements of `v` at `idx`, in that order.
template <class T>
std::vector<T> gather(const std::vector<T>& v, const std::vector<int64_t>& idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(v[size_t(i)]);
  return out;
}

// A member's state for --population: its trained weights, then its average's.
std::vector<torch::Tensor> member_state(models::DiT& model, models::DiT* average) {
  std::vector<torch::Tensor> state = model->parameters();
  if (average)
    for (const auto& p : (*average)->parameters()) state.push_back(p);
  return state;
}

void save_state(models::DiT& model, models::DiT* average, const std::string& path) {
  std::vector<torch::Tensor> state;
  for (const auto& p : member_state(model, average)) state.push_back(p.detach());
  torch::save(state, path);
}

void load_state(const std::string& path, models::DiT& model, models::DiT* average) {
  std::vector<torch::Tensor> state;
  torch::load(state, path);
  auto dst = member_state(model, average);
  if (state.size() != dst.size())
    throw std::runtime_error("population: " + path + " holds another model's state");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(state[i]);
}

}  // namespace

int main(int argc, char** argv) {
  spotlight::tools::ensure_passive_omp(argv);
  CLI::App app{"spotlight-train: post-training (Flow-GRPO, DiffusionNFT or DRaFT) of a DiT on mini-GenEval"};
  std::string checkpoint, out = "grpo.pt", device = "cpu";
  int prompts_per_iter = 8, group = 8, iterations = 1000000, eval_every = 10, rank_every = 0, threads = 2;
  int train_steps = 0;  // 0: every SDE step of the window
  int explore = 0;      // seeds rolled out per prompt to choose the group from (0: off)
  std::string reward_name = "geneval", objective = "grpo", select = "advantage";
  int updates = 2, noise_draws = 1, epochs = 1, draft_steps = 2, draft_rollout_steps = 0,
      expert_steps = 0, draft_ptx_batch = 32;
  double nft_beta = 1.0, old_decay = 0.0, ema_decay = 0.0, reference_weight = 0.0, adv_clip = 1.0;
  bool nft_cfg = false, positive_only = false, keep_best = false, freeze_null = false;
  int rollback = 0;  // evaluations without a new best before the run returns to it (0: never)
  double rollback_lr = 0.5;  // the learning rate's factor at each return
  int population_size = 1;   // trainers that meet at each evaluation (tools/train/population.h)
  double tag_focus = 0;      // the training prompts' tags drawn towards the worst-scored (tools/train/tag_curriculum.h)
  std::string lr_decay = "none", draft_loss = "mse", draft_targets = "own", draft_missing_loss = "mse";
  std::vector<std::string> lr_scale_texts;  // --lr-scale PREFIX=S, in order
  double minutes = 30, lr = 2e-4, guidance = -1, soft_width = 1, draft_ring_weight = 1,
         draft_hold = 0, draft_bce_weight = 0, draft_ptx = 0, draft_background = 0,
         draft_missing = 0, draft_early = 0, draft_recolour = 0, draft_shape_focus = 0,
         draft_extras_bce = 0, draft_temperature = models::ShapeLossOptions{}.temperature;
  bool per_group_std = false, draft_through_clamp = false, draft_erase_extras = false,
       draft_object_size = false, draft_relocate = false, shape_twins = false;
  uint64_t seed = 1;
  models::SamplerOptions sampler;
  models::GrpoOptions grpo;
  models::EvalOptions eval;
  app.add_option("--checkpoint", checkpoint, "pre-trained checkpoint to start from")->required();
  app.add_option("--out", out, "checkpoint written at every evaluation and at the end (with --keep-best: at each new best)");
  app.add_option("--minutes", minutes, "wall-time budget, evaluations included")->check(CLI::PositiveNumber);
  app.add_option("--iterations", iterations, "stop after this many iterations")->check(CLI::PositiveNumber);
  app.add_option("--prompts", prompts_per_iter, "prompts per iteration")->check(CLI::PositiveNumber);
  app.add_option("--group", group, "samples (seeds) per prompt, G")->check(CLI::Range(2, 1024));
  app.add_option("--steps", sampler.steps, "denoising steps of a rollout")->check(CLI::Range(2, 1000));
  app.add_option("--noise-level", sampler.noise_level,
                 "Flow-GRPO's SDE noise level a of the rollouts (nft also takes 0: the ODE sampler)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--guidance", guidance,
                 "classifier-free guidance scale of rollouts, training and evaluation (default: the checkpoint's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--explore", explore,
                 "nft: seed exploration, the planner's rule: roll out this many seeds per prompt and train on the "
                 "--group of them whose rewards spread the most (0: off, every rolled-out seed is trained on)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--sde-begin", sampler.sde_begin, "first stochastic (trained) step");
  app.add_option("--sde-end", sampler.sde_end, "end of the stochastic window (-1: steps - 1)");
  app.add_option("--train-steps", train_steps,
                 "train on this many SDE steps per iteration, drawn at random from the window (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--reward", reward_name,
                 "geneval (mini-GenEval), soft (mini-GenEval's expectation with each blob's shape call "
                 "uncertain near the detector's cuts: a shaped training reward; evaluations stay mini-GenEval), or "
                 "brightness (the image's mean value: a dense reward that checks the GRPO machinery learns at all)")
      ->check(CLI::IsMember({"geneval", "soft", "brightness"}));
  app.add_option("--soft-width", soft_width,
                 "--reward soft: scale of the widths over which a shape call turns uncertain (scene::SoftOptions)")
      ->check(CLI::PositiveNumber);
  app.add_option("--objective", objective,
                 "grpo (Flow-GRPO: policy gradient through the SDE steps' log-probs) or nft (DiffusionNFT: flow "
                 "matching on the rollouts, towards the better samples of each group and away from the worse), or "
                 "draft (DRaFT: the gradient of a differentiable stand-in for the detector's shape calls, back "
                 "through the last --draft-steps steps of spotlight-eval's ODE rollout; models/draft.h)")
      ->check(CLI::IsMember({"grpo", "nft", "draft"}));
  app.add_flag("--draft-through-clamp", draft_through_clamp,
               "draft: pass the gradient straight through the detector's clamp to [-1, 1], so that saturated "
               "pixels can be darkened or lit");
  app.add_option("--draft-loss", draft_loss,
                 "draft: how a blob is compared with its template: mse or bce on its soft colour snap (bce keeps "
                 "a gradient on pixels snapped firmly to the wrong side), or pixel, the squared error of the image "
                 "against the template painted in the blob's colour (models/draft.h)")
      ->check(CLI::IsMember({"mse", "bce", "pixel"}));
  app.add_option("--draft-ring-weight", draft_ring_weight,
                 "draft: weight of the pixel ring around each blob's box, whose template is dark (the box's "
                 "pixels weigh 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-bce-weight", draft_bce_weight,
                 "draft with --draft-loss mse: add this weight times bce's term to mse's, per pixel, so that the "
                 "pixels snapped firmly to the wrong side get some of bce's push (models/draft.h; 0: plain mse)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-temperature", draft_temperature,
                 "draft: width t of the soft colour snap's logistics; a wider snap leaves a gradient on "
                 "pixels lit firmly on the wrong side of a template, which mse hardly moves at the "
                 "default (models/draft.h; measured no better)")
      ->check(CLI::PositiveNumber);
  app.add_option("--draft-hold", draft_hold,
                 "draft: weight of the hold, the pixel loss on the pixels inside each blob's wanted shape, added to "
                 "--draft-loss's, so that a blob's right pixels resist a dimming of the whole blob (models/draft.h; "
                 "measured worse; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-targets", draft_targets,
                 "draft: whose blobs the loss compares with their wanted shapes: own (the detector on the trained "
                 "model's rollout), reference (on the starting checkpoint's rollout of the same prompt and seed; "
                 "measured worse) or own-and-lost (the own blobs plus the reference's that the trained rollout no "
                 "longer draws, so that erasing a blob costs; models/draft.h)")
      ->check(CLI::IsMember({"own", "reference", "own-and-lost"}));
  app.add_flag("--draft-erase-extras", draft_erase_extras,
               "draft: compare the blobs the image would score no worse without (an extra count, or a shape the "
               "prompt does not ask for) with an all-dark template, so that they go out instead of being shaped "
               "(models/draft.h; the log's extras counts them either way)");
  app.add_flag("--draft-object-size", draft_object_size,
               "draft: draw each blob's wanted shape at the size of an object the renderer draws (a square box of "
               "8-12 px at 32, centred on the blob), holding dark the rest of the blob's box, so that a blob wider "
               "than any object is pulled back rather than rewarded for filling its box (models/draft.h)");
  app.add_option("--draft-background", draft_background,
                 "draft: weight of the background term, which holds dark the pixels outside every blob's box "
                 "and ring in the images that already have as many blobs as their prompt asks objects, so that "
                 "blobs nobody asked for do not appear (models/draft.h; measured no better; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-missing", draft_missing,
                 "draft: weight of the missing objects, each object the prompt asks for that no blob stands for "
                 "compared with its wanted shape and colour at an object's size, placed where the model comes "
                 "nearest to drawing it and where the prompt's relations hold (models/draft.h; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-missing-loss", draft_missing_loss,
                 "draft: how the missing objects are compared with their templates: mse, as the blobs are under "
                 "--draft-loss mse, or bce, whose pull on the pixels of an object the model leaves dark does not "
                 "vanish as mse's does (models/draft.h; measured no better; needs --draft-missing)")
      ->check(CLI::IsMember({"mse", "bce"}));
  app.add_option("--draft-extras-bce", draft_extras_bce,
                 "draft: compare the erased extra blobs with their dark template under bce at "
                 "this weight, instead of under mse at weight 1, so that a blob drawn firmly "
                 "where nobody asked for it keeps a pull to go out (mse's vanishes as its soft "
                 "snap nears 1; models/draft.h; needs --draft-erase-extras; 0: mse)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--draft-relocate", draft_relocate,
               "draft: erase each blob drawn where its prompt's relation fails and place its object again, as a "
               "missing one, where the relation holds (models/draft.h mark_misplaced; needs --draft-missing and "
               "--draft-erase-extras)");
  app.add_option("--draft-recolour", draft_recolour,
                 "draft: weight of the recoloured blobs: each blob that stands for no clause of its "
                 "prompt (extra, or drawn in a colour not asked of its shape) made the target of an "
                 "object asked in a colour too few blobs have, where the relations hold at the blob, "
                 "so that a blob in the wrong hue is recoloured rather than drawn again elsewhere; "
                 "compared under bce (models/draft.h recolour_blobs; measured no better; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-early", draft_early,
                 "draft: weight of the early prediction, the shape loss of the clean image the model predicts at "
                 "one step before the last --draft-steps (drawn per iteration), on the final image's targets, so "
                 "that the steps that lay the objects out learn too (models/draft.h; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-shape-focus", draft_shape_focus,
                 "draft: weigh each blob's (and missing object's) shape loss by how badly the "
                 "shape its prompt wants of it has lately been called in prompts of its tag: "
                 "weight (1 - F) + F * that cell's running share called wrong / the mean over the "
                 "cells, so that a cell being lost weighs more (tools/train/shape_focus.h; 0: "
                 "every blob weighs 1)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--draft-ptx", draft_ptx,
                 "draft: weight of the pre-training mix, the flow-matching loss on freshly rendered scenes (15 % "
                 "of them with the null prompt) added to each step's loss, so that the model stays near the data "
                 "while it learns the shapes (models/draft.h; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-ptx-batch", draft_ptx_batch, "draft: rendered scenes per step in the pre-training mix")
      ->check(CLI::PositiveNumber);
  app.add_option("--draft-steps", draft_steps,
                 "draft: the last denoising steps the gradient flows back through (DRaFT-K)")
      ->check(CLI::PositiveNumber);
  app.add_option("--draft-rollout-steps", draft_rollout_steps,
                 "draft: Euler ODE steps of the training rollouts (0: as many as --eval-steps); "
                 "the run's validations keep --eval-steps. Fewer make an iteration cheaper: the "
                 "steps before the last --draft-steps run without the graph")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--updates", updates, "nft: optimiser steps per iteration, each on its share of the samples")
      ->check(CLI::PositiveNumber);
  app.add_option("--nft-beta", nft_beta, "nft: how far the implicit policies v+ and v- lie from the old one")
      ->check(CLI::PositiveNumber);
  app.add_option("--old-decay", old_decay,
                 "nft: the old policy (which samples and anchors the loss) is an EMA of the trained weights "
                 "with this decay; 0 makes it the weights at the start of each iteration")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--noise-draws", noise_draws,
                 "nft: noise levels (with fresh noise) per sample and update, stratified over [0, 1]; more draws "
                 "average out the noise of the regression target at the cost of update time")
      ->check(CLI::Range(1, 64));
  app.add_flag("--nft-cfg", nft_cfg,
               "nft: fit the classifier-free-guided velocity the rollouts follow (gradients through both "
               "branches), not the prompt branch alone");
  app.add_flag(
      "--freeze-null", freeze_null,
      "nft with --nft-cfg, and draft: the null-prompt branch of the guided velocity moves "
      "no weights (it enters with weight 1 - w, so a net pull towards the samples would push "
      "it away from them, and it is shared by every prompt; draft keeps its path back to the "
      "latent; measured worse for draft, docs/benchmarks.md)");
  app.add_option("--adv-clip", adv_clip,
                 "nft: r = 1/2 + 1/2 clip(A, -M, M) / M; a larger M clips fewer advantages, which keeps the pull "
                 "towards better samples and the push from worse ones balanced (DiffusionNFT's release: 5)")
      ->check(CLI::PositiveNumber);
  app.add_option("--select", select,
                 "nft: how a sample's optimality r is set: advantage (from its group-normalised advantage, "
                 "DiffusionNFT), or strict (RAFT: r = 1 for images with every clause of the prompt right, 1/2 "
                 "for the rest, which anchors them at the old policy)")
      ->check(CLI::IsMember({"advantage", "strict"}));
  app.add_flag("--positive-only", positive_only,
               "nft: worse-than-average samples anchor the velocity at the old policy's (r = 1/2) instead of "
               "pushing it away from their images");
  app.add_option("--reference-weight", reference_weight,
                 "nft and draft: weight of |v - v_ref|^2, the velocity's distance from the starting checkpoint's "
                 "(nft: at the trained noise levels; draft: at one of the steps before the gradient's, drawn per "
                 "iteration; 0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--epochs", epochs, "nft: passes over each iteration's rollouts, each in --updates minibatches")
      ->check(CLI::Range(1, 64));
  app.add_option("--expert-steps", expert_steps,
                 "grow a low-noise expert onto the checkpoint (a second set of weights, started as a copy) that "
                 "denoises the last N of spotlight-eval's --eval-steps steps, and train it alone: the earlier "
                 "steps, which lay out the scene, keep the pre-trained weights (models/dit.h; 0: one set, all "
                 "trained). A checkpoint that already has an expert trains its expert alone without this option")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ema", ema_decay,
                 "evaluate and write an exponential moving average of the trained weights with this decay "
                 "(0: the trained weights themselves)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--lr", lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  app.add_option("--lr-scale", lr_scale_texts,
                 "PREFIX=S: the learning rate of the parameters whose name begins with PREFIX is S times --lr (0: "
                 "frozen); repeatable, the first matching rule wins, * matches every name, others keep 1. E.g. "
                 "--lr-scale text.=20 trains the text encoder 20 times faster; --lr-scale text.=1 --lr-scale '*=0' "
                 "trains it alone (tools/train/lr_scales.h; measured worse for draft: the blobs fade at text.=20 and "
                 "multiply alone)")
      ->allow_extra_args(false);
  app.add_option("--lr-decay", lr_decay,
                 "none, or cosine: the learning rate falls to 0 over the run (whichever of --minutes and "
                 "--iterations ends it first)")
      ->check(CLI::IsMember({"none", "cosine"}));
  app.add_option("--clip", grpo.clip_range, "PPO clip range of the per-step ratio")->check(CLI::PositiveNumber);
  app.add_option("--beta", grpo.beta, "KL weight to the pre-trained reference")->check(CLI::NonNegativeNumber);
  app.add_flag("--group-std", per_group_std, "normalise advantages by the group's std, not the batch's");
  app.add_option("--eval-every", eval_every, "evaluate and checkpoint every N iterations")->check(CLI::PositiveNumber);
  app.add_flag("--keep-best", keep_best,
               "evaluate on a held-out validation set (other prompts, other seeds than spotlight-eval's) and "
               "write --out only when its reward improves: the run returns its best weights, not its last");
  app.add_option("--rollback", rollback,
                 "with --keep-best: after N evaluations in a row without a new best, return the trained weights (and "
                 "--ema's average) to the best evaluation's and go on from there with fresh prompts and seeds, the "
                 "learning rate times --rollback-lr; the budget after a run's peak is spent retrying from the peak "
                 "instead of drifting down from it (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rollback-lr", rollback_lr, "the learning rate's factor at each --rollback")
      ->check(CLI::Range(1e-9, 1.0));
  app.add_option("--population", population_size,
                 "with --keep-best: train N members, one process each (seeds --seed, --seed + 1, ...), that meet at "
                 "every evaluation, where each goes on from the weights (and --ema's average) of whichever scored "
                 "best on the validation set; --out gets the best evaluation of any member (tools/train/population.h; "
                 "1: one trainer)")
      ->check(CLI::Range(1, 16));
  app.add_option("--tag-focus", tag_focus,
                 "draw the training prompts' tags towards those whose running training reward is lowest: a tag "
                 "is drawn with probability (1 - F)/6 + F * (1 - its reward's moving average) / the sum over the "
                 "tags (tools/train/tag_curriculum.h; 0: uniform, as the evaluation set is balanced)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--shape-twins", shape_twins,
               "roll out every second prompt as the one before with its shape words exchanged "
               "(\"a red square left of a blue circle\" -> \"a red circle left of a blue square\", "
               "\"three triangles\" -> \"three squares\"), on the same seeds: what would move a "
               "blob's shape whatever the words say pulls both ways in the pair, what the words "
               "change is left "
               "(tools/train/rollout_draw.h; needs an even --prompts; not with --explore)");
  app.add_option("--eval-seeds", eval.seeds_per_prompt, "seeds per prompt of the run's evaluations")
      ->check(CLI::PositiveNumber);
  app.add_option("--eval-steps", eval.steps, "ODE steps of the evaluation")->check(CLI::PositiveNumber);
  app.add_option("--rank-every", rank_every,
                 "every N iterations, re-roll the iteration's (prompt, seed) pairs with the updated weights "
                 "and report the Spearman correlation of their rewards (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads, "CPU threads (LibTorch's and OpenBLAS's)")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "prompt and seed stream");
  app.add_option("--device", device, "cpu, cuda or cuda:N");
  CLI11_PARSE(app, argc, argv);

  std::optional<spotlight::tools::Population> population;
  std::string member_tag;  // the log lines' "member" field, with --population
  // Writes one line to stderr, named by its writer. A population's members
  // share one stderr: the line goes out in one call, so that the members'
  // lines do not interleave character by character.
  const auto say = [&](const std::string& text) {
    std::cerr << "spotlight-train" +
                     (population ? " member " + std::to_string(population->member())
                                 : std::string()) +
                     ": " + text + "\n";
  };
  try {
    const bool nft = objective == "nft", draft = objective == "draft";
    if (draft && (explore > 0 || reward_name != "geneval" || rank_every > 0 || train_steps > 0 || grpo.beta > 0 ||
                  app.count("--steps") || app.count("--noise-level") || app.count("--sde-begin") ||
                  app.count("--sde-end") || app.count("--clip") || per_group_std))
      throw std::invalid_argument(
          "--objective draft rolls out as spotlight-eval does (the ODE; its steps are "
          "--draft-rollout-steps, else --eval-steps) and trains on its differentiable stand-in "
          "for the detector's shape calls: it takes none of --steps, --noise-level, --sde-begin, "
          "--sde-end, --train-steps, --clip, --beta, --group-std, --explore, --reward, "
          "--rank-every");
    // One list gives both the check and its message, so a new --draft-*
    // option is refused elsewhere by adding its name here.
    const std::vector<std::string> draft_only = {
        "--draft-steps",    "--draft-loss",        "--draft-ring-weight",   "--draft-hold",
        "--draft-targets",  "--draft-temperature", "--draft-through-clamp", "--draft-erase-extras",
        "--draft-ptx",      "--draft-ptx-batch",   "--draft-background",    "--draft-object-size",
        "--draft-missing",  "--draft-early",       "--draft-relocate",      "--draft-missing-loss",
        "--draft-recolour", "--draft-shape-focus", "--draft-rollout-steps", "--draft-extras-bce"};
    if (!draft && std::any_of(draft_only.begin(), draft_only.end(),
                              [&](const auto& o) { return app.count(o) > 0; })) {
      std::string names;
      for (size_t i = 0; i < draft_only.size(); ++i)
        names += (i == 0 ? "" : i + 1 == draft_only.size() ? " and " : ", ") + draft_only[i];
      throw std::invalid_argument(names + " belong to --objective draft");
    }
    if (!nft && (nft_cfg || noise_draws != 1 || positive_only || epochs != 1 || adv_clip != 1.0 ||
                 select != "advantage"))
      throw std::invalid_argument(
          "--nft-cfg, --noise-draws, --positive-only, --epochs, --adv-clip and --select belong to --objective nft");
    if (!nft && !draft && reference_weight > 0)
      throw std::invalid_argument(
          "--reference-weight belongs to --objective nft and draft (grpo's pull to the reference is --beta)");
    if (explore > 0 && !nft)
      throw std::invalid_argument("--explore selects among finished images: it needs --objective nft");
    if (shape_twins && explore > 0)
      throw std::invalid_argument(
          "--shape-twins pairs whole groups on the same seeds: --explore's choice of seeds would "
          "part them");
    if (shape_twins && prompts_per_iter % 2 != 0)
      throw std::invalid_argument(tools::kTwinsNeedEvenPrompts);
    if (explore > 0 && explore <= group)
      throw std::invalid_argument("--explore must exceed --group (it is how many seeds the group is chosen from)");
    if (freeze_null && !nft_cfg && !draft)
      throw std::invalid_argument(
          "--freeze-null needs --nft-cfg (--objective nft) or --objective draft");
    if (select == "strict" && (positive_only || adv_clip != 1.0 || reward_name != "geneval"))
      throw std::invalid_argument(
          "--select strict sets r from mini-GenEval's strict verdict: it takes neither --positive-only, "
          "--adv-clip nor another --reward");
    if (objective == "grpo" && sampler.noise_level <= 0)
      throw std::invalid_argument("--objective grpo trains on SDE steps: --noise-level must be positive");
    if (nft && updates > prompts_per_iter * group)
      throw std::invalid_argument("--updates may not exceed the samples of an iteration (--prompts x --group)");
    sampler.record = !nft && !draft;
    if (rollback > 0 && !keep_best)
      throw std::invalid_argument(
          "--rollback returns to the best validation evaluation: it needs --keep-best");
    if (app.count("--rollback-lr") > 0 && rollback == 0)
      throw std::invalid_argument("--rollback-lr belongs to --rollback");
    if (population_size > 1 && !keep_best)
      throw std::invalid_argument(
          "--population's members meet on the validation set: it needs --keep-best");
    if (tag_focus > 0 && reward_name == "brightness")
      throw std::invalid_argument("--tag-focus follows mini-GenEval's reward per tag: --reward brightness has none");
    // Fork before LibTorch or OpenBLAS start threads: a forked thread pool
    // does not come along, and libgomp hangs in the child.
    const std::string final_out = out;
    if (population_size > 1) {
      population.emplace(out + ".population", population_size);
      seed += uint64_t(population->member());
      out = population->dir() + "/member" + std::to_string(population->member()) + ".pt";
      member_tag = ",\"member\":" + std::to_string(population->member());
    }
    spotlight::tools::set_cpu_threads(threads);
    auto ck = models::load_checkpoint(checkpoint);
    sampler.guidance = eval.guidance = guidance >= 0 ? guidance : ck.info.guidance;
    sampler.validate();
    if (freeze_null && sampler.guidance == 1.0)
      throw std::invalid_argument(
          "--freeze-null: at guidance 1 the rollouts follow the prompt branch alone; "
          "there is no null branch to freeze");
    models::DraftOptions draft_opts;
    draft_opts.steps = draft_rollout_steps > 0 ? draft_rollout_steps : eval.steps;
    draft_opts.shift = eval.shift;
    draft_opts.guidance = sampler.guidance;
    draft_opts.grad_steps = draft_steps;
    draft_opts.null_grad = !freeze_null;
    draft_opts.loss.straight_through = draft_through_clamp;
    draft_opts.loss.ring_weight = draft_ring_weight;
    draft_opts.loss.hold_weight = draft_hold;
    draft_opts.loss.bce_weight = draft_bce_weight;
    draft_opts.loss.temperature = draft_temperature;
    draft_opts.loss.erase_extras = draft_erase_extras;
    draft_opts.loss.object_size = draft_object_size;
    draft_opts.ptx_weight = draft_ptx;
    draft_opts.background_weight = draft_background;
    draft_opts.early_weight = draft_early;
    draft_opts.add_missing = draft_missing > 0;
    draft_opts.loss.missing_weight = draft_missing;
    draft_opts.relocate_misplaced = draft_relocate;
    draft_opts.recolour_blobs = draft_recolour > 0;
    draft_opts.loss.recolour_weight = draft_recolour;
    draft_opts.loss.missing_bce = draft_missing_loss == "bce";
    draft_opts.loss.extras_bce_weight = draft_extras_bce;
    if (draft_extras_bce > 0 && !draft_erase_extras)
      throw std::invalid_argument(
          "--draft-extras-bce compares the erased extra blobs: it needs --draft-erase-extras");
    if (draft_extras_bce > 0 && draft_loss == "pixel")
      throw std::invalid_argument(
          "--draft-extras-bce compares the soft snap, which --draft-loss pixel has not");
    if (app.count("--draft-missing-loss") > 0 && !(draft_missing > 0))
      throw std::invalid_argument(
          "--draft-missing-loss compares the missing objects, which are off without --draft-missing");
    if (draft_missing_loss == "bce" && draft_loss == "pixel")
      throw std::invalid_argument(
          "--draft-missing-loss bce compares the soft snap, which --draft-loss pixel has not");
    if (draft_relocate && !(draft_missing > 0 && draft_erase_extras))
      throw std::invalid_argument(
          "--draft-relocate erases a misplaced blob and places its object again: it needs --draft-missing and "
          "--draft-erase-extras");
    if (app.count("--draft-ptx-batch") > 0 && !(draft_ptx > 0))
      throw std::invalid_argument("--draft-ptx-batch sizes the pre-training mix, which is off without --draft-ptx");
    if (draft_bce_weight > 0 && (!draft || draft_loss != "mse"))
      throw std::invalid_argument("--draft-bce-weight belongs to --objective draft with --draft-loss mse");
    draft_opts.loss.kind = draft_loss == "bce"     ? models::ShapeLossOptions::Kind::bce
                           : draft_loss == "pixel" ? models::ShapeLossOptions::Kind::pixel
                                                   : models::ShapeLossOptions::Kind::mse;
    if (draft && draft_steps > draft_opts.steps)
      throw std::invalid_argument(
          "--draft-steps may not exceed the rollout's steps (--draft-rollout-steps, else "
          "--eval-steps): " +
          std::to_string(draft_opts.steps));
    if (draft && reference_weight > 0 && draft_steps == draft_opts.steps)
      throw std::invalid_argument(
          "--reference-weight anchors the steps before the gradient's: with --draft-steps equal "
          "to the rollout's steps there are none");
    if (expert_steps >= eval.steps)
      throw std::invalid_argument("--expert-steps must be fewer than the rollout's --eval-steps (" +
                                  std::to_string(eval.steps) + ")");
    draft_opts.reference_weight = reference_weight;
    draft_opts.targets = draft_targets == "reference"      ? models::DraftOptions::Targets::reference
                         : draft_targets == "own-and-lost" ? models::DraftOptions::Targets::own_and_lost
                                                           : models::DraftOptions::Targets::own;
    const auto dev = spotlight::tools::parse_device(device);
    auto model = ck.model;
    model->to(dev);
    if (expert_steps > 0) {
      // The boundary falls midway between the noise levels of the last step
      // the base keeps and the first the expert takes.
      const auto sigmas = models::shifted_sigmas(eval.steps, eval.shift);
      const auto first = size_t(eval.steps - expert_steps);
      model = models::grow_low_noise_expert(model, 0.5 * (sigmas[first - 1] + sigmas[first]));
    }
    // With an expert, only it is trained; the base's weights get no gradient.
    if (auto expert = model->low_noise_expert()) {
      for (auto& p : model->parameters()) p.set_requires_grad(false);
      for (auto& p : expert->parameters()) p.set_requires_grad(true);
    }
    if (model->low_noise_expert() && objective == "grpo") {
      const auto sigmas = models::shifted_sigmas(sampler.steps, sampler.shift);
      bool reaches = false;
      for (int i = sampler.sde_begin; i < sampler.resolved_sde_end(); ++i)
        reaches = reaches || sigmas[size_t(i)] < model->config().expert_boundary;
      if (!reaches)
        throw std::invalid_argument("the SDE window's steps all lie above the low-noise expert's noise levels: "
                                    "grpo would train nothing (widen --sde-end or raise --expert-steps)");
    }
    models::DiT ref{nullptr};
    if (grpo.beta > 0 || reference_weight > 0 || draft_opts.targets != models::DraftOptions::Targets::own) {
      ref = models::load_checkpoint(checkpoint).model;
      ref->to(dev);
    }
    // --lr-scale: one AdamW group per factor, frozen parameters in none.
    std::vector<tools::LrScaleRule> lr_rules;
    for (const auto& t : lr_scale_texts) lr_rules.push_back(tools::parse_lr_scale(t));
    std::vector<std::string> names;
    std::vector<torch::Tensor> params;
    // With an expert, its own names (without the "low_noise." prefix): only it trains.
    const auto expert = model->low_noise_expert();
    for (const auto& p : expert ? expert->named_parameters() : model->named_parameters())
      if (p.value().requires_grad()) names.push_back(p.key()), params.push_back(p.value());
    const auto lr_groups = tools::group_by_lr_scale(names, lr_rules);
    if (lr_groups.scales.empty()) throw std::invalid_argument("--lr-scale froze every trained parameter");
    for (size_t i : lr_groups.frozen) params[i].set_requires_grad(false);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    for (size_t g = 0; g < lr_groups.scales.size(); ++g) {
      std::vector<torch::Tensor> members;
      for (size_t i : lr_groups.members[g]) members.push_back(params[i]);
      groups.emplace_back(members, std::make_unique<torch::optim::AdamWOptions>(
                                       torch::optim::AdamWOptions(lr * lr_groups.scales[g]).weight_decay(1e-4)));
    }
    if (!lr_rules.empty()) {
      std::ostringstream line;
      line << "--lr-scale: " << lr_groups.frozen.size() << " tensors frozen";
      for (size_t g = 0; g < lr_groups.scales.size(); ++g)
        line << ", " << lr_groups.members[g].size() << " at " << lr_groups.scales[g] << " x lr";
      say(line.str());
    }
    torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(lr).weight_decay(1e-4));
    // nft's old policy: it samples the rollouts and anchors the implicit policies.
    std::optional<models::Ema> old;
    if (nft) old.emplace(model, old_decay);
    // What is evaluated and written: the trained weights, or their average
    // (which smooths the iteration-to-iteration wander of small-batch RL).
    std::optional<models::Ema> ema;
    if (ema_decay > 0) ema.emplace(model, ema_decay);
    auto kept = [&]() -> models::DiT& { return ema ? ema->model() : model; };
    // --rollback's copies of the best evaluation's trained weights and average.
    models::DiT best_trained{nullptr}, best_average{nullptr};
    if (rollback > 0) {
      best_trained = models::DiT(model->config());
      best_trained->to(dev);
      if (ema) {
        best_average = models::DiT(model->config());
        best_average->to(dev);
      }
    }
    double lr_scale = 1;  // the product of --rollback-lr over the returns so far
    auto set_lr = [&](double value) {
      for (size_t g = 0; g < opt.param_groups().size(); ++g)
        static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[g].options()).lr(value * lr_groups.scales[g]);
    };
    auto train_gen = at::make_generator<at::CPUGeneratorImpl>(seed + 7);
    scene::PromptGenerator prompt_gen(seed);
    // Its own stream, so that --tag-focus 0 leaves the prompts as they were.
    // The averages are this trainer's own: a --population exploit or a
    // --rollback keeps them, and they follow the copied weights within a few
    // iterations. A decay of 0.9 averages a tag over about ten iterations that drew it
    // (some 40 images at 8 prompts x 4 seeds): slow enough to ride out one
    // iteration's luck, fast enough to follow a tag learnt in 100.
    constexpr double kTagDecay = 0.9;
    tools::TagCurriculum curriculum(tag_focus, kTagDecay, seed ^ 0x7a6c0ULL);
    // The shape focus's cells average over as many iterations as the tags do.
    tools::ShapeFocus shape_focus(draft_shape_focus, kTagDecay);
    // Its weights for the log line, per tag in scene::kTags's order, each
    // [square, circle, triangle].
    auto shape_focus_fields = [&] {
      if (draft_shape_focus == 0) return std::string();
      std::ostringstream f;
      f << ",\"shape_weights\":[";
      const auto w = shape_focus.weights();
      for (size_t t = 0; t < w.size(); ++t) {
        f << (t ? ",[" : "[");
        for (size_t k = 0; k < w[t].size(); ++k) f << (k ? "," : "") << w[t][k];
        f << "]";
      }
      f << "]";
      return f.str();
    };
    // The curriculum's state for the log line: the tags' draw probabilities
    // and reward averages, in scene::kTags's order.
    auto curriculum_fields = [&] {
      if (tag_focus == 0) return std::string();
      std::ostringstream f;
      const auto p = curriculum.probabilities();
      const auto m = curriculum.means();
      f << ",\"tag_p\":[";
      for (size_t i = 0; i < p.size(); ++i) f << (i ? "," : "") << p[i];
      f << "],\"tag_mean\":[";
      for (size_t i = 0; i < m.size(); ++i) {
        f << (i ? "," : "");
        if (std::isnan(m[i])) f << "null"; else f << m[i];
      }
      f << "]";
      return f.str();
    };
    auto observe_tags = [&](const std::vector<scene::Prompt>& ps, const std::vector<scene::Score>& sc) {
      if (tag_focus == 0) return;
      std::vector<scene::Tag> tags;
      std::vector<double> r;
      for (size_t i = 0; i < sc.size(); ++i) {
        tags.push_back(ps[i].tag);
        r.push_back(sc[i].reward);
      }
      curriculum.observe(tags, r);
    };
    std::mt19937_64 seed_gen(seed * 0x9e3779b97f4a7c15ULL + 1);
    // The pre-training mix's scenes: their own prompts, images and noise, so
    // that switching it on leaves the rollouts' prompts and seeds as they were.
    scene::PromptGenerator ptx_prompts(seed ^ 0x7074785ULL);
    uint64_t ptx_image_seed = (seed + 1) << 40;
    auto ptx_gen = at::make_generator<at::CPUGeneratorImpl>(seed + 11);
    constexpr double kPtxCondDrop = 0.15;  // the shipped model's last pre-training stage
    const int64_t text_len = model->config().text_len;

    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    eval.validation = keep_best;
    double best = -1;
    int best_iter = 0, stale = 0;  // evaluations since the best
    auto run_eval = [&](int iter, bool last) {
      auto r = models::evaluate(kept(), eval);
      const bool improved = r.reward > best;
      const bool write = !keep_best || improved;
      best = std::max(best, r.reward);
      std::cout << "{\"event\":\"eval\"" << member_tag << ",\"iter\":" << iter
                << ",\"reward\":" << r.reward << ",\"strict\":" << r.strict << ",\"set\":\""
                << (keep_best ? "validation" : "evaluation")
                << "\",\"written\":" << (write ? "true" : "false") << ",\"elapsed_s\":" << elapsed()
                << "}" << std::endl;
      if (write)
        models::save_checkpoint(out, kept(), {objective, iter, r.reward, sampler.guidance});
      bool returned = false;  // by --rollback, to the best evaluation's weights
      if (rollback > 0 && improved) {
        models::copy_parameters(model, best_trained);
        if (ema) models::copy_parameters(ema->model(), best_average);
        best_iter = iter;
        stale = 0;
      } else if (rollback > 0 && ++stale >= rollback && !last) {
        // Adam's moments stay: they are running scales of the gradient, not a position.
        models::copy_parameters(best_trained, model);
        if (ema) models::copy_parameters(best_average, ema->model());
        lr_scale *= rollback_lr;
        if (lr_decay != "cosine") set_lr(lr * lr_scale);
        stale = 0;
        returned = true;
        std::cout << "{\"event\":\"rollback\"" << member_tag << ",\"iter\":" << iter
                  << ",\"to_iter\":" << best_iter << ",\"best\":" << best
                  << ",\"lr\":" << lr * lr_scale << ",\"elapsed_s\":" << elapsed() << "}"
                  << std::endl;
      }
      if (population && !last) {
        // The state the members compare is the one each goes on from.
        const double reward = returned ? best : r.reward;
        const int me = population->member();
        save_state(model, ema ? &ema->model() : nullptr, population->state_path(me, iter));
        const auto top = population->meet(iter, reward);
        if (top.member != me) {
          load_state(population->state_path(top.member, iter), model,
                     ema ? &ema->model() : nullptr);
          std::cout << "{\"event\":\"exploit\"" << member_tag << ",\"iter\":" << iter
                    << ",\"own\":" << reward << ",\"from\":" << top.member
                    << ",\"reward\":" << top.reward << ",\"elapsed_s\":" << elapsed() << "}"
                    << std::endl;
        }
      }
    };
    std::ostringstream header;
    header << objective << ", " << model->config().name << " DiT from " << checkpoint << ", "
           << prompts_per_iter << " prompts x " << group << " seeds per iteration"
           << (explore > 0 ? " (chosen from " + std::to_string(explore) + " explored)"
                           : std::string())
           << (shape_twins ? " (every second prompt the shape twin of the one before, on its seeds)"
                           : "")
           << ", ";
    if (draft)
      header << draft_opts.steps << " ODE steps, the gradient through the last "
             << draft_opts.grad_steps;
    else
      header << sampler.steps << " steps, SDE window [" << sampler.sde_begin << ", "
             << sampler.resolved_sde_end() << ")";
    if (model->low_noise_expert())
      header << ", only the low-noise expert trained (below noise level "
             << model->config().expert_boundary << ")";
    header << ", guidance " << sampler.guidance
           << (freeze_null ? " (the null branch's weights frozen)" : "") << ", budget " << minutes
           << " min";
    say(header.str());
    run_eval(0, false);
    double rho_sum = 0, rho_group_sum = 0, floor_sum = 0;
    int rho_n = 0;
    int iter = 0;
    while (iter < iterations && elapsed() < minutes * 60) {
      ++iter;
      if (lr_decay == "cosine") {
        // Progress by the budget that ends the run first: wall time or iterations.
        const double progress =
            std::min(1.0, std::max(elapsed() / (minutes * 60), double(iter - 1) / double(iterations)));
        set_lr(lr * lr_scale * 0.5 * (1 + std::cos(M_PI * progress)));
      }
      // Seeds rolled out per prompt: the group itself, or the candidates it is chosen from.
      const int rolled = explore > 0 ? explore : group;
      auto draw = tools::draw_rollouts(
          prompts_per_iter, rolled, shape_twins,
          [&] { return tag_focus > 0 ? prompt_gen.next(curriculum.next()) : prompt_gen.next(); },
          [&] { return seed_gen(); });
      auto& prompts = draw.prompts;
      auto& seeds = draw.seeds;
      auto tokens = models::encode_prompts(prompts, text_len).to(dev);
      const auto r0 = Clock::now();
      if (draft) {
        // Rollout and update in one: the images carry the graph of their last steps.
        models::PtxBatch ptx;
        if (draft_ptx > 0)
          ptx = models::make_ptx_batch(model->config(), ptx_prompts, ptx_image_seed, draft_ptx_batch, kPtxCondDrop,
                                       ptx_gen);
        const std::string weights_used = shape_focus_fields();
        if (draft_shape_focus > 0) draft_opts.shape_weights = shape_focus.weights();
        const auto st =
            models::draft_step(model, opt, prompts, tokens, seeds, draft_opts, ref ? &ref : nullptr, &ptx);
        if (ema) ema->update(model);
        observe_tags(prompts, st.scores);
        shape_focus.observe(st.calls);
        const auto rewards = models::rewards_tensor(st.scores);
        std::cout << "{\"event\":\"iter\"" << member_tag << ",\"iter\":" << iter
                  << ",\"reward_mean\":" << rewards.mean().item<double>()
                  << ",\"reward_std\":" << rewards.std(false).item<double>()
                  << ",\"best_of_group\":" << models::best_of_group_mean(rewards, group)
                  << ",\"loss\":" << st.loss.loss << ",\"blobs\":" << st.loss.targets
                  << ",\"called_right\":" << st.loss.called_right
                  << ",\"extras\":" << st.loss.extras << ",\"missing\":" << st.loss.missing
                  << ",\"misplaced\":" << st.loss.misplaced
                  << ",\"recoloured\":" << st.loss.recoloured
                  << ",\"reference_mse\":" << st.reference_mse << ",\"grad_norm\":" << st.grad_norm
                  << ",\"ptx_loss\":" << st.ptx_loss
                  << ",\"background_loss\":" << st.background_loss
                  << ",\"background_images\":" << st.background_images
                  << ",\"early_loss\":" << st.early_loss << curriculum_fields() << weights_used
                  << ",\"step_s\":" << std::chrono::duration<double>(Clock::now() - r0).count()
                  << ",\"elapsed_s\":" << elapsed() << "}" << std::endl;
        if (iter % eval_every == 0) run_eval(iter, iter >= iterations);
        continue;
      }
      auto roll = models::sample(nft ? old->model() : model, tokens, seeds, sampler);
      std::vector<scene::Score> scores;  // mini-GenEval's, unless the reward is brightness
      torch::Tensor rewards;
      if (reward_name == "brightness") {
        rewards = roll.images.to(torch::kFloat32).flatten(1).mean(1).cpu();
      } else if (reward_name == "soft") {
        rewards = models::soft_rewards(prompts, roll.images, soft_width, &scores);
      } else {
        scores = models::score_batch(prompts, roll.images);
        rewards = models::rewards_tensor(scores);
      }
      observe_tags(prompts, scores);
      const double rollout_s = std::chrono::duration<double>(Clock::now() - r0).count();
      // What the policy does, over every rolled-out seed (before any selection).
      const double rolled_mean = rewards.mean().item<double>(), rolled_std = rewards.std(false).item<double>();
      const double best_of_rolled = models::best_of_group_mean(rewards, rolled);
      std::ostringstream fields;  // the objective's own statistics for the log line
      if (reward_name == "soft")  // what the shaped reward stands in for, over every rolled-out seed
        fields << ",\"geneval_mean\":" << models::rewards_tensor(scores).mean().item<double>();
      fields << curriculum_fields();
      if (explore > 0) {
        // Keep, per prompt, the --group seeds whose rewards spread the most.
        const auto all = to_vector(rewards);
        std::vector<int64_t> keep;
        for (int p = 0; p < prompts_per_iter; ++p) {
          const std::vector<double> r(all.begin() + p * rolled, all.begin() + (p + 1) * rolled);
          for (size_t i : stats::max_variance_subset(r, size_t(group))) keep.push_back(int64_t(p * rolled) + int64_t(i));
        }
        auto idx = torch::tensor(keep, torch::kLong);
        roll.images = roll.images.index_select(0, idx.to(roll.images.device()));
        tokens = tokens.index_select(0, idx.to(dev));
        rewards = rewards.index_select(0, idx);
        prompts = gather(prompts, keep);
        seeds = gather(seeds, keep);
        if (!scores.empty()) scores = gather(scores, keep);
        fields << ",\"explored\":" << explore << ",\"selected_mean\":" << rewards.mean().item<double>()
               << ",\"selected_std\":" << rewards.std(false).item<double>();
      }
      auto adv = models::group_advantages(rewards, group, !per_group_std);

      const auto u0 = Clock::now();
      double grad_norm = 0;
      if (nft) {
        // Each of `updates` minibatches: --noise-draws noise levels and noises
        // per sample, one optimiser step; then the old policy catches up.
        auto strict_verdicts = [&] {
          std::vector<bool> v;
          for (const auto& sc : scores) v.push_back(sc.strict);
          return v;
        };
        auto r = select == "strict" ? models::nft_selected_optimality(strict_verdicts())
                                    : models::nft_optimality(adv, positive_only, adv_clip);
        // mean(2r - 1): 0 when pull and push balance; < 0 is a net push away
        // from the model's own samples, > 0 a net fit to them (with --select
        // strict: the fraction of samples selected).
        fields << ",\"imbalance\":" << (2 * r - 1).mean().item<double>();
        models::NftLossStats st, sum;
        const int steps = updates * epochs;
        for (int epoch = 0; epoch < epochs; ++epoch)  // each pass: a fresh order, in `updates` parts
        for (auto idx : torch::randperm(int64_t(seeds.size()), train_gen).tensor_split(updates)) {
          const auto k = int64_t(noise_draws);
          auto x0 = roll.images.index_select(0, idx.to(roll.images.device())).repeat({k, 1, 1, 1});
          auto s = models::stratified_training_sigmas(idx.size(0), k, train_gen).to(dev);
          auto eps = torch::randn(x0.sizes(), train_gen).to(dev);
          opt.zero_grad();
          models::nft_loss(model, old->model(), x0, tokens.index_select(0, idx.to(dev)).repeat({k, 1}),
                           r.index_select(0, idx).repeat({k}), s, eps, nft_beta, &st,
                           nft_cfg ? sampler.guidance : 1.0, ref ? &ref : nullptr, reference_weight, !freeze_null)
              .backward();
          grad_norm = std::max(grad_norm, double(torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0)));
          opt.step();
          sum.loss += st.loss / steps;
          sum.positive_mse += st.positive_mse / steps;
          sum.negative_mse += st.negative_mse / steps;
          sum.reference_mse += st.reference_mse / steps;
        }
        old->update(model);
        fields << ",\"loss\":" << sum.loss << ",\"positive_mse\":" << sum.positive_mse
               << ",\"negative_mse\":" << sum.negative_mse << ",\"reference_mse\":" << sum.reference_mse;
      } else {
        opt.zero_grad();
        models::GrpoStepStats sum, st;
        // The trained steps: all of the window, or a random subset of it (the
        // update costs a forward and backward pass per trained step; the
        // rollout's other steps are free once sampled).
        std::vector<size_t> trained(roll.sde_steps.size());
        for (size_t k = 0; k < trained.size(); ++k) trained[k] = k;
        if (train_steps > 0 && size_t(train_steps) < trained.size()) {
          std::shuffle(trained.begin(), trained.end(), seed_gen);
          trained.resize(size_t(train_steps));
        }
        const auto n_steps = trained.size();
        for (size_t k : trained) {
          auto loss = models::grpo_step_loss(model, ref ? &ref : nullptr, tokens, roll, k, adv, sampler, grpo, &st);
          (loss / double(n_steps)).backward();
          sum.policy_loss += st.policy_loss / n_steps;
          sum.kl += st.kl / n_steps;
          sum.clip_fraction += st.clip_fraction / n_steps;
          sum.max_ratio_deviation = std::max(sum.max_ratio_deviation, st.max_ratio_deviation);
        }
        grad_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
        opt.step();
        fields << ",\"policy_loss\":" << sum.policy_loss << ",\"kl\":" << sum.kl
               << ",\"clip_fraction\":" << sum.clip_fraction
               << ",\"max_ratio_deviation\":" << sum.max_ratio_deviation;
      }
      if (ema) ema->update(model);
      std::cout << "{\"event\":\"iter\"" << member_tag << ",\"iter\":" << iter
                << ",\"reward_mean\":" << rolled_mean << ",\"reward_std\":" << rolled_std
                << ",\"zero_std_fraction\":" << models::zero_std_fraction(rewards, group)
                << ",\"best_of_group\":" << best_of_rolled << fields.str()
                << ",\"grad_norm\":" << grad_norm << ",\"rollout_s\":" << rollout_s
                << ",\"update_s\":" << std::chrono::duration<double>(Clock::now() - u0).count()
                << ",\"elapsed_s\":" << elapsed() << "}" << std::endl;

      if (rank_every > 0 && iter % rank_every == 0) {
        // The same (prompt, seed) pairs under the updated weights, against the
        // same prompts with fresh seeds (the floor: unrelated seed sets).
        auto plain = sampler;
        plain.record = false;
        auto again = models::rewards_tensor(models::score_batch(prompts, models::sample(model, tokens, seeds, plain).images));
        std::vector<uint64_t> fresh(seeds.size());
        for (auto& s : fresh) s = seed_gen();
        auto other = models::rewards_tensor(models::score_batch(prompts, models::sample(model, tokens, fresh, plain).images));
        // Mini-GenEval against mini-GenEval, also when training on the soft reward.
        const auto a = to_vector(scores.empty() ? rewards : models::rewards_tensor(scores));
        const auto b = to_vector(again), c = to_vector(other);
        const double rho = stats::spearman(a, b), floor = stats::spearman(a, c);
        const auto [rho_group, groups] = stats::mean_group_spearman(a, b, group);
        rho_sum += rho;
        floor_sum += floor;
        rho_group_sum += rho_group;
        ++rho_n;
        std::cout << "{\"event\":\"rank\",\"iter\":" << iter << ",\"spearman\":" << rho
                  << ",\"spearman_within_prompt\":" << rho_group << ",\"groups\":" << groups
                  << ",\"spearman_floor\":" << floor << "}" << std::endl;
      }
      if (iter % eval_every == 0) run_eval(iter, iter >= iterations);
    }
    if (iter % eval_every != 0) run_eval(iter, true);
    if (rho_n > 0)
      std::cout << "{\"event\":\"rank_summary\",\"measurements\":" << rho_n << ",\"spearman\":" << rho_sum / rho_n
                << ",\"spearman_within_prompt\":" << rho_group_sum / rho_n << ",\"spearman_floor\":" << floor_sum / rho_n
                << "}" << std::endl;
    std::ostringstream done;
    done << iter << " iterations in " << elapsed() << " s, wrote " << out;
    say(done.str());
    if (population) {
      population->finish(best, out);
      if (population->member() != 0) return 0;
      const auto o = population->gather();
      if (!o)
        throw std::runtime_error("a member of the population failed (its messages are above)");
      std::filesystem::copy_file(o->kept_path, final_out,
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::remove_all(population->dir());
      std::cout << "{\"event\":\"population\",\"members\":" << population_size
                << ",\"kept_member\":" << o->member << ",\"reward\":" << o->reward << "}"
                << std::endl;
      std::cerr << "spotlight-train: the population's best, member " << o->member
                << "'s (validation " << o->reward << "), is at " << final_out << "\n";
    }
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }
  return 0;
}

// Reward-gradient fine-tuning (DRaFT, Clark et al. 2023, arXiv 2309.17400):
// sample with the Euler ODE, keep the autograd graph of the last K steps, and
// follow the gradient of a differentiable reward back into the weights.
//
// Why it is here. Flow-GRPO and DiffusionNFT learn from one scalar per image;
// on this model most lost reward is lost on the detector's shape calls
// (docs/benchmarks.md, eleventh session: 0.32 against 0.79 with every call
// favourable), and a scalar per image did not teach the model to draw
// shapes in 30 minutes. The shape call is a cut on two features of a blob,
// its fill (area / box area) and its centroid height, and both are sums
// over pixels: made soft, they have a gradient per pixel that says which
// pixels to light or darken for the blob to be called the shape its prompt
// needs.
//
// The surrogate. The hard detector (scene::detect) finds the blobs of a
// rolled-out image; scene::best_shapes says which shape each should be for
// the image to score best. Each blob is then compared, pixel by pixel, with
// that shape drawn as the renderer draws it into the blob's box: the soft
// version of the detector's snap to the blob's colour c (detect.h step 1),
//   m(p) = logistic((alpha_c(p) - 1/2) / t) * logistic((r2max - res_c(p)^2) / t),
// against the template T (1 inside the shape, 0 outside it and on a
// one-pixel ring around the box, where a lit pixel would widen the box).
// The loss is mean (m - T)^2 per blob. A hinge on the detector's features
// (fill, centroid height) was tried first and does not work: a blob's fill
// has the same derivative in every pixel of its box, so it fades a square
// evenly instead of rounding its corners; the template says which pixels.
// Evaluations stay mini-GenEval on the hard detector.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "models/dit.h"
#include "models/scene/detect.h"
#include "models/scene/prompt.h"
#include "models/scene/reward.h"
#include "models/scene/shape_confusion.h"

namespace spotlight::models {

// One blob of one image, and the shape it should be called.
struct ShapeTarget {
  int64_t image = 0;  // row of the batch
  scene::Color color = scene::Color::red;
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the detector's box, one past the last pixel
  scene::Shape shape = scene::Shape::square;  // wanted
  bool called_right = false;                  // the detector already calls it so
  // The image scores no worse without it (scene::extra_blobs on the wanted
  // shapes): with ShapeLossOptions::erase_extras its template is all dark.
  bool extra = false;
  // Where the wanted shape is drawn, when not across the whole box
  // (at_object_size): a square box inside [x0, x1) x [y0, y1), the rest of
  // which is held dark. Empty (tx1 <= tx0): the whole box.
  int tx0 = 0, ty0 = 0, tx1 = 0, ty1 = 0;
  // Not a blob: an object the prompt asks for that no blob stands for
  // (missing_objects), drawn where the model comes nearest to drawing it.
  bool missing = false;
  // A blob whose prompt relation fails (mark_misplaced): marked extra too, so
  // that it is erased and missing_objects places its object again.
  bool misplaced = false;
  // An extra blob that now stands for a missing object of another colour
  // (recolour_blobs): its box keeps, its colour and shape are the object's.
  bool recoloured = false;
  // Multiplies the target's term in shape_loss (DraftOptions::shape_weights).
  double weight = 1.0;
};

// The blobs drawn where their prompt's relation fails: for each clause k
// with a relation to clause j, each blob standing for k (serves) whose
// relative_position to some blob standing for j lacks the relation is marked
// extra and misplaced; returns how many. Why: every loss term shapes a drawn
// blob where it is, and a missing object is placed where its relations hold,
// but nothing moves an object drawn on the wrong side, and the position tag
// stayed near 0.28 in every run (forty-first session, docs/benchmarks.md).
// Marked extra, the blob is erased (with ShapeLossOptions::erase_extras) and,
// no longer standing for its clause, its object is one missing_objects
// places again where the relation holds. The relation's target clause j is
// left where it is drawn: the clause that names the relation moves.
int mark_misplaced(const std::vector<scene::Prompt>& prompts, std::vector<ShapeTarget>& targets);

// A target's box in pixels, as scene::relative_position compares boxes.
scene::Box box_of(const ShapeTarget& t);

// The objects each prompt asks for that no blob of `targets` (shape_targets's
// on the same images) stands for, each as a target of the wanted shape and
// colour in a square box of an object's size, (min_side + max_side) / 2
// (10 px at 32). Why: the shape loss shapes only the blobs drawn, so an
// object the model leaves out costs nothing it can follow; a missing object
// scores 0 on its clause (and on the relation that needs it), and the
// evaluations' multi-object tags lose most of their reward there. A clause's
// blobs are the non-extra ones whose wanted shape is the clause's, of its
// colour where it asks one. The box goes where the soft snap to its colour
// (a clause without one: the colour of the clause's other blobs, or else
// any) sums highest, so the loss lights what the model already half draws;
// it keeps off every blob's box and ring and off the boxes placed before it,
// and where the clause is in a relation with another whose blobs (or placed
// boxes) exist, only positions where relative_position holds are allowed.
// Clauses are served in order, so "A left of B" places B first. No position
// left: that object gets no target.
std::vector<ShapeTarget> missing_objects(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                                         const std::vector<ShapeTarget>& targets, double temperature);

// Before missing_objects: each blob that stands for no clause of its prompt
// (an extra one, or one in a colour no clause asks of its shape, which
// scores the object but not its colour), misplaced ones aside, made the
// target of an object its prompt asks in a colour too few blobs are drawn
// in, where the prompt's relations hold at the blob's box; returns how many.
// The blob takes the object's colour and shape and is marked recoloured (no
// longer extra), so it stands for the clause and missing_objects places that
// object no more. Why: a colour that drops out is drawn in a neighbouring
// hue (cyan as blue, forty-fourth session); the loss then shaped (or, extra,
// erased) that blob and lit the missing object elsewhere, two changes where
// one recolouring would do. Among several blobs, the one whose box holds the
// most soft snap to the wanted colour goes first; clauses are served in
// order, as there.
int recolour_blobs(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                    std::vector<ShapeTarget>& targets, double temperature);

// The target at the size of an object the renderer draws: the wanted shape in
// a square box of side max(w, h) clamped to [scene::min_side, max_side]
// (8-12 px at 32), centred on the detector's box and moved inside the image,
// and the compared box the union of the two. A blob larger than any object
// is so pulled back to an object's size (its pixels outside the square are
// held dark), and one smaller is grown to one. Without it the template fills
// whatever box the blob has, so a blob that widens is rewarded for filling
// its wider box: that is how DRaFT grew fields of colour across the frame
// (docs/benchmarks.md, thirty-ninth session).
ShapeTarget at_object_size(const ShapeTarget& t, int size);

// The blobs of each image [B, 3, S, S] and the shapes that would score its
// prompt best (scene::best_shapes; blobs past its first kMaxAssignedBlobs are
// left out), each marked extra where scene::extra_blobs says so. With `scores`, also each image's
// mini-GenEval score (score_batch's), and with `calls` its shape calls added, from the same
// detection.
std::vector<ShapeTarget> shape_targets(const std::vector<scene::Prompt>& prompts,
                                       const torch::Tensor& images,
                                       std::vector<scene::Score>* scores = nullptr,
                                       scene::ShapeConfusion* calls = nullptr);

struct ShapeLossOptions {
  // Width t of the soft snap's logistics. At 0.1 a firmly lit pixel has
  // m ~ 0.99 and m' = m (1 - m) / t ~ 0.07, so under mse the lit corner of a
  // square that should be a circle hardly moves; at 0.3, m ~ 0.73 and the
  // corner's gradient is about four times larger, while the template's
  // lit pixels, never reaching m = 1, keep pulling the blob bright (no
  // erasing as under bce). Measured (thirty-fifth session,
  // docs/benchmarks.md): at 0.3 and 0.5 the reward climbs about twice as
  // fast but peaks no higher, and the kept weights scored what 0.1's did
  // (three seeds' mean 0.442 at 0.3, 0.438 at 0.1).
  double temperature = 0.1;
  // The detector clamps pixels to [-1, 1]; the clamp's gradient is 0 past the
  // ends, so a saturated pixel (guidance overshoots) could not be darkened or
  // lit. Straight through: the clamp's value forwards, the identity's
  // gradient backwards.
  bool straight_through = false;
  // How a blob's soft snap m is compared with its template T, per pixel.
  // mse: (m - T)^2. bce: -T log m - (1 - T) log(1 - m). m is a product of
  // logistics, so under mse a pixel snapped firmly to the wrong side (a lit
  // corner of a square that should be a circle, m ~ 0.99) has almost no
  // gradient: (m - T) m' with m' ~ 0.01. Under bce its gradient through the
  // logits stays of order 1, so the pixels that must change are the ones
  // that move, not only the half-lit edges. Measured: it does teach shapes
  // faster, and it erases blobs: the wrong pixels push hard and the right ones
  // (m ~ 1, T = 1) hardly resist a dimming of the whole blob, and a blob no
  // longer found costs nothing.
  // pixel: (clamp(x) - X)^2 on the image itself, where X is the template
  // painted in the blob's colour on black. Every pixel's pull is linear in
  // its error, so a dimming of the whole blob stops where the right pixels'
  // pull balances the wrong ones', well above the detector's threshold.
  // Measured: it keeps the blobs, but teaches no shapes (the share called
  // right stayed at 0.52-0.58) and the reward fell after 100 iterations.
  // mse stays the default: it measured best (docs/benchmarks.md, issue 4).
  enum class Kind { mse, bce, pixel };
  Kind kind = Kind::mse;
  // With Kind::mse: bce_weight times the bce term added to the mse one, per
  // pixel. mse keeps the blobs but hardly moves the firmly wrong pixels; bce
  // moves them and erases blobs. A little bce is the interpolation between
  // the two (0: plain mse).
  double bce_weight = 0.0;
  // Weight of the one-pixel ring around the box (the box's pixels weigh 1).
  // The ring keeps a blob from widening its box; but the box is the hard
  // detector's, re-found every iteration, so darkening a blob's faint rim
  // can also shrink it step by step until it is no longer found.
  // Measured under mse (thirty-eighth session, docs/benchmarks.md): at 0 a
  // run climbs faster and then collapses, its blobs multiplying to 5-6.5 an
  // image (kept weights 0.431 and 0.433 on seeds 1 and 2); at 0.5, 0.472 on
  // seed 1, against 0.500 at 1.
  double ring_weight = 1.0;
  // The hold: hold_weight times the pixel loss (Kind::pixel's) on the pixels
  // inside the wanted shape only, added to the loss above (the weighted mean
  // over the box and ring, as the rest). Meant for bce: there a firmly wrong
  // pixel's gradient through the blob's brightness is about m / t = 10,
  // while the right pixels (m ~ 1) resist a dimming of the whole blob only
  // near the detector's threshold, and through the weights dimming
  // everything is the easiest way to darken the corners. The hold's pull
  // grows with the dimming from its first step: along the dimming line the
  // loss is least with the blob well lit (dit_test). Measured (thirty-first
  // session, docs/benchmarks.md): it keeps the blobs, but it also pulls
  // every hue to the palette's, its gradient outweighs bce's (medians 57 and
  // 172 before clipping), and the share of blobs called right did not rise; at
  // 30 and 100 the kept weights were worse than mse's. Hinges on the
  // brightness or on the soft snap alone (temporary patches) did no better.
  // 0: off (it costs nothing then).
  double hold_weight = 0.0;
  // Extra blobs (ShapeTarget::extra) are compared with an all-dark template:
  // their box and ring should go out. Without it an extra blob is shaped
  // into whatever best_shapes parked it on, a shape the prompt does not ask
  // for, and nothing pushes back when blobs multiply.
  bool erase_extras = false;
  // Every target is compared at_object_size (above), not across its own box.
  // Measured (thirty-ninth session, docs/benchmarks.md): alone, the blobs
  // keep an object's size but multiply; with erase_extras the reward rose
  // steadily, the best honest end point so far.
  bool object_size = false;
  // Weight of the missing objects' targets (ShapeTarget::missing) against
  // the blobs' (1).
  double missing_weight = 1.0;
  // The missing objects' targets are compared under bce, whatever `kind`
  // (not with Kind::pixel, which has no soft snap). Why: a missing object is
  // one the model leaves (nearly) dark, so its template's lit pixels have
  // m ~ 0, where mse's pull (m - 1) m' with m' = m (1 - m) / t vanishes
  // with m; bce's, through the logits, stays of order 1 / t (75 times mse's
  // on a dark image, dit_test). Measured (forty-fourth session,
  // docs/benchmarks.md): with missing_weight 0.25, 0.473 and 0.532 on two
  // seed pairs against 0.455 and 0.530 under mse, the objects left out a
  // batch falling no faster: no step, and a colour that drops out is not
  // held by it.
  bool missing_bce = false;
  // Weight of the recoloured blobs' targets (ShapeTarget::recoloured), which
  // are compared under bce whatever `kind` but pixel: their pixels are lit in
  // another hue, where the soft snap to the wanted colour is ~1e-7 (blue
  // under cyan: residual^2 2 against 0.56) and mse's pull vanishes with it.
  // Measured (forty-fifth session, docs/benchmarks.md): at 1 the few
  // recoloured blobs' gradient was 2-3 times the rest's before clipping and
  // the runs climbed late (0.491 and 0.428 on two seed pairs); at 0.25,
  // 0.465 and 0.504 against 0.455-0.523 and 0.530-0.532 without it: no step.
  double recolour_weight = 1.0;
  // With erase_extras: the extra blobs are compared with their all-dark
  // template under bce at this weight instead of under mse at weight 1
  // (0: mse). Why: a firmly drawn extra blob has m ~ 1 (a palette colour
  // drawn true gives m ~ 0.99 at t = 0.1), where mse's pull 2 m m' with
  // m' ~ (1 - m) / t vanishes with 1 - m; bce's, 1 / (1 - m) times m',
  // stays of order 1 / t. Per pixel bce's pull is this weight times
  // 1 / (2 m (1 - m)) of mse's: weaker on a faint extra (m = 0.5, weight
  // 0.25: half), stronger on a firm one (m = 0.99: 12 times). In the runs
  // whose validation fell in their second half the extra blobs a batch rose
  // again from about 1.5 to 6-8 while the missing ones stayed near 2
  // (fifty-second session, docs/benchmarks.md).
  double extras_bce_weight = 0.0;
};

struct ShapeLossStats {
  double loss = 0;
  int targets = 0;       // blobs in the batch
  int called_right = 0;  // of them, called the wanted shape already
  int extras = 0;        // of them, extra (whether or not they are erased)
  int missing = 0;       // targets that are missing objects, not blobs (not in `targets`)
  int misplaced = 0;     // blobs marked misplaced (among `extras`)
  int recoloured = 0;    // blobs recoloured (among `targets`, not among `extras`)
};

// The soft snap of every pixel to every palette colour: [B, 6, S, S] in (0, 1).
torch::Tensor soft_color_masks(const torch::Tensor& images, double temperature, bool straight_through = false);

// [h + 2, w + 2]: the wanted shape drawn into a w x h box (as the renderer
// draws it into a square one), with the one-pixel ring around the box at 0.
torch::Tensor shape_template(scene::Shape shape, int w, int h);

// The template loss (opts.kind, the weighted mean over a blob's box and
// ring), summed over blobs and divided by the batch's images (0 without
// targets, with the graph of `images` kept). The ring is clipped to the image.
torch::Tensor shape_loss(const torch::Tensor& images, const std::vector<ShapeTarget>& targets,
                         const ShapeLossOptions& opts = {}, ShapeLossStats* stats = nullptr);

// The background term: in each image that already has as many blobs as its
// prompt asks objects (the sum of its clauses' counts), the soft snap of every
// pixel outside all of its blobs' boxes and rings to every palette colour,
// squared, averaged over those pixels; summed over such images and divided by
// the batch's images (0, with the graph of `images` kept, where none
// qualifies). Why: the shape loss compares only the blobs the detector finds,
// so nothing it says keeps the rest of the image dark. Measured before it
// (thirty-seventh and thirty-eighth sessions, docs/benchmarks.md): after
// each run's peak the blobs nobody asked for double, and with the text
// encoder trained alone they went from 2 to 4 an image. Images with fewer
// blobs than objects asked for are left out, so that a missing object may
// still appear (much of DRaFT's gain is objects drawn where the base model
// drew none).
torch::Tensor background_loss(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                              const std::vector<ShapeTarget>& targets, double temperature,
                              bool straight_through = false, int* held_images = nullptr);

// The Euler ODE rollout of spotlight-eval (steps, shift, guidance), the same
// seeded initial noise, with the autograd graph kept through the last
// `grad_steps` steps only (DRaFT-K): the earlier steps run without it. With
// `early` (and `grad_steps` < `steps`), it also receives the latent before
// step early->step, which must be one of the steps run without the graph,
// and that step's noise level.
struct EarlyLatent {
  int step = 0;
  torch::Tensor x;
  double sigma = 0;
};
torch::Tensor sample_with_grad_tail(DiT& model, const torch::Tensor& tokens,
                                    const std::vector<uint64_t>& seeds, int steps, double shift,
                                    double guidance, int grad_steps, EarlyLatent* early = nullptr,
                                    bool null_grad = true);

struct DraftOptions {
  int steps = 20;  // the rollout: spotlight-eval's Euler ODE
  double shift = 3.0;
  double guidance = 1.0;
  int grad_steps = 2;  // K: the last steps whose graph is kept
  // False (--freeze-null): the null-prompt branch of the guided velocity
  // moves no weights; its path back to the latent stays. Why it was tried:
  // the branch enters with weight 1 - w (-4 at guidance 5) and is shared by
  // every prompt, and DRaFT's kept weights had drawn, given the null prompt,
  // 6 squares in 558 blobs and no yellow or purple (the base: 29 in 917, every
  // colour). Measured worse (forty-sixth session, docs/benchmarks.md): 0.454
  // and 0.343 on seeds 3-4 and 5-6, against 0.455-0.523 and 0.530-0.532
  // with both branches trained.
  bool null_grad = true;
  ShapeLossOptions loss;
  double max_grad_norm = 1.0;
  // The anchor. The gradient reaches only the last K steps, but the weights
  // it moves also run the earlier ones, which lay out the scene (where the
  // objects are, how many, which colours); left alone they drift, and the
  // reward the shapes gain is lost again to counts and colours. With a
  // reference (the starting checkpoint), reference_weight * |v - v_ref|^2 at
  // one of the earlier steps, drawn per iteration, holds them where they were.
  double reference_weight = 0;
  // Where the blobs the loss compares come from.
  // own: the hard detector on the trained model's own rollout. A blob that
  // fades out then costs nothing the iteration it is no longer found, and
  // under bce, which teaches shapes fastest, blobs were erased (2.0 to 0.7
  // per image).
  // reference (needs `reference`): the blobs and wanted shapes of the
  // starting checkpoint's rollout of the same (prompt, seed), made without a
  // graph, so a dropped blob keeps its template and the layout is held at
  // the reference's. Measured worse (thirty-third session,
  // docs/benchmarks.md): the blobs stay (about 2 an image) but the share
  // called right did not rise, and the kept weights scored below the base
  // (0.281 under bce, 0.336 under mse). Once the two rollouts differ on a
  // seed, the reference's blobs the trained model draws elsewhere pull it
  // back to the base's layout instead of shaping the blobs it has.
  // own_and_lost (needs `reference`): the own blobs, plus each of the
  // reference's that no own blob of its colour overlaps (lost_blobs): the
  // own targets shape what is drawn, the lost ones make erasing cost. Also
  // measured worse (thirty-third session): under bce 0.342 (ring 1) and
  // 0.264 (ring 0), with no rise in the share called right; the lost blobs'
  // lit pixels at m ~ 0 seem to outweigh the reshaping in the clipped step.
  enum class Targets { own, reference, own_and_lost };
  Targets targets = Targets::own;
  // The pre-training mix (PPO-ptx, Ouyang et al. 2022): ptx_weight times the
  // flow-matching loss on a batch of freshly rendered scenes (PtxBatch) is
  // added to the step's loss. Why: every DRaFT run peaks and then loses its
  // counts and colours, and the anchor to the starting weights held the
  // shapes back with them (the shapes are learnt through the layout steps
  // too). The rendered scenes hold the model to the data instead, whose
  // shapes are the renderer's own, so the mix pulls the same way as the
  // shape loss where they meet. The prompt dropout of the batch keeps the
  // unconditional branch, which guidance leans on, trained as well.
  double ptx_weight = 0;
  // Weight of background_loss, added to the step's loss (0: off). Measured
  // (thirty-eighth session, docs/benchmarks.md): with the ring at 0 a weight
  // of 2 kept the unwanted blobs to 1.25 an image at most on one seed (3.5
  // without) but not on another (3.1), and the peaks were lower than
  // without it (0.399 and 0.410 on the 512 images); with the ring at 1, 5
  // dimmed the blobs (1.9 to 1.5 an image) and the run fell.
  double background_weight = 0;
  // Add missing_objects's targets to the loss's, weighted loss.missing_weight.
  // Measured (fortieth session, docs/benchmarks.md): alone at lr 5e-5 it
  // changed nothing (0.423 against 0.435); with early_weight and a cosine
  // schedule from 2e-4 no run collapsed its colours (0.515, 0.463, 0.469 on
  // seeds 1-3), where the schedule alone once did.
  bool add_missing = false;
  // Before the missing objects are placed, mark_misplaced the blobs whose
  // relation fails, so that they are erased and drawn again where it holds
  // (needs add_missing and loss.erase_extras, without which the blob would
  // only be lost or shaped into a shape nobody asked for). Measured
  // (forty-second session, docs/benchmarks.md): about 1.2 blobs marked a
  // batch of 32 images; on seeds 5 and 6 with README's command the position
  // tag rose (0.29 against 0.24) but the reward did not (0.443 against 0.447).
  bool relocate_misplaced = false;
  // Before the missing objects are placed, recolour_blobs; the recoloured
  // blobs weigh loss.recolour_weight.
  bool recolour_blobs = false;
  // The early prediction: early_weight times the shape loss (the same
  // targets, found on the final image) of the clean image the model predicts
  // at one step without the graph, x_s - sigma_s v(x_s), drawn per iteration
  // as the anchor's is (0: off). Why: the gradient of the last K steps
  // reaches only what the weights do at low noise, while where the objects
  // are, how large and how many is laid out at high noise (every step
  // before the last 6 of 20 has sigma above 0.6 at shift 3); a missing
  // object's target changed nothing through the last steps alone (fortieth
  // session, docs/benchmarks.md). One more guided evaluation with its graph.
  double early_weight = 0;
  // Each target that is not extra (blobs, missing objects, recoloured ones)
  // weighted by its prompt's tag and its wanted shape: shape_weights[tag][shape]
  // multiplies its term (ShapeTarget::weight). The trainer's shape focus
  // (tools/train/shape_focus.h) sets it each iteration from the shape calls
  // of the rollouts before. Unset: every target weighs 1.
  std::optional<scene::PerTagShape<double>> shape_weights;
};

// Rendered scenes for the pre-training mix: x0 [B, 3, S, S] with their
// prompts' tokens (a cond_drop share of them the null prompt, as in
// pre-training), noise and noise levels.
struct PtxBatch {
  torch::Tensor x0, tokens, eps, sigmas;
};
PtxBatch make_ptx_batch(const DiTConfig& config, scene::PromptGenerator& prompts, uint64_t& image_seed, int batch,
                        double cond_drop, torch::Generator gen);

// The flow-matching loss of the model on the batch (spotlight-pretrain's).
torch::Tensor ptx_loss(DiT& model, const PtxBatch& batch);

// The blobs of `reference` that `own` no longer draws: those with no blob of
// the same image and colour whose box overlaps theirs.
std::vector<ShapeTarget> lost_blobs(const std::vector<ShapeTarget>& own, const std::vector<ShapeTarget>& reference);

struct DraftStepStats {
  std::vector<scene::Score> scores;  // mini-GenEval's, of the rolled-out images
  ShapeLossStats loss;
  double reference_mse = 0;  // |v - v_ref|^2 at the anchored step (0 without an anchor)
  int anchored_step = -1;  // the early step drawn, for the anchor or the early prediction (-1: none)
  double early_loss = 0;   // the early prediction's shape loss (0 without it)
  double grad_norm = 0;  // before clipping
  double ptx_loss = 0;   // the pre-training mix's flow-matching loss (0 without it)
  double background_loss = 0;  // background_loss's value (0 without it)
  int background_images = 0;   // the images it held dark
  scene::ShapeConfusion calls;  // the rolled-out images' shape calls
};

// One DRaFT-K step: roll out (prompt, seed) rows with the graph of the last K
// steps, score the images, and take one optimiser step on shape_loss (plus,
// with `reference` and opts.reference_weight > 0, the anchor at an earlier
// step, drawn from the rows' seeds so that a run replays exactly). With
// opts.targets other than own, the loss's blobs come (in part) from the
// reference's rollout (throws std::invalid_argument without a reference);
// the stats' blob counts stay the trained images' own, so that a log shows
// blobs lost. With opts.ptx_weight > 0, `ptx` is the pre-training mix's batch
// (throws std::invalid_argument without one).
DraftStepStats draft_step(DiT& model, torch::optim::Optimizer& opt, const std::vector<scene::Prompt>& prompts,
                          const torch::Tensor& tokens, const std::vector<uint64_t>& seeds, const DraftOptions& opts,
                          DiT* reference = nullptr, const PtxBatch* ptx = nullptr);

}  // namespace spotlight::models

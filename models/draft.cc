#include "models/draft.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/evaluate.h"
#include "models/flow.h"
#include "models/sampler.h"
#include "models/scene/geometry.h"
#include "models/scene/palette.h"
#include "models/scene/render.h"
#include "models/scene/soft.h"

namespace spotlight::models {

std::vector<ShapeTarget> shape_targets(const std::vector<scene::Prompt>& prompts,
                                       const torch::Tensor& images,
                                       std::vector<scene::Score>* scores,
                                       scene::ShapeConfusion* calls) {
  std::vector<ShapeTarget> out;
  if (scores) scores->clear();
  for_each_image(prompts, images, "shape_targets", [&](size_t i, const float* chw, int size) {
    const auto found = scene::detect(chw, size);
    if (scores) scores->push_back(scene::score(prompts[i], found));
    const auto best = scene::best_shapes(prompts[i], found);
    const auto extras = scene::extra_blobs(prompts[i], best);
    if (calls) calls->add(prompts[i], found, best, extras);
    for (size_t k = 0; k < std::min(found.size(), scene::kMaxAssignedBlobs); ++k) {
      const auto& d = found[k];
      const bool extra = std::binary_search(extras.begin(), extras.end(), int(k));
      out.push_back({int64_t(i), d.color, d.x0, d.y0, d.x1, d.y1, best[k].shape, best[k].shape == d.shape, extra});
    }
  });
  return out;
}

std::vector<ShapeTarget> lost_blobs(const std::vector<ShapeTarget>& own, const std::vector<ShapeTarget>& reference) {
  std::vector<ShapeTarget> lost;
  for (const auto& r : reference) {
    const bool drawn = std::any_of(own.begin(), own.end(), [&](const ShapeTarget& o) {
      return o.image == r.image && o.color == r.color && o.x0 < r.x1 && r.x0 < o.x1 && o.y0 < r.y1 && r.y0 < o.y1;
    });
    if (!drawn) lost.push_back(r);
  }
  return lost;
}

scene::Box box_of(const ShapeTarget& t) { return {double(t.x0), double(t.y0), double(t.x1), double(t.y1)}; }

namespace {

// Whether a target stands for clause c: a blob kept (not extra) whose wanted
// shape is the clause's, of its colour where it asks one.
bool serves(const ShapeTarget& t, const scene::Clause& c) {
  return !t.extra && t.shape == c.shape && (!c.color || t.color == *c.color);
}

// A relation a box for some clause must hold against a box already there.
struct Against {
  scene::Box other;
  scene::Relation relation;
  bool box_first;  // relative_position(box, other), else (other, box)
};

// The relations a box for clause k of p (image i's prompt) must hold,
// against the boxes of image i's `targets` that stand for the clauses it is
// related to.
std::vector<Against> relations_of(const scene::Prompt& p, size_t k,
                                  const std::vector<ShapeTarget>& targets, int64_t i) {
  auto of_clause = [&](size_t j) {
    std::vector<scene::Box> boxes;
    for (const auto& t : targets)
      if (t.image == i && serves(t, p.include[j])) boxes.push_back(box_of(t));
    return boxes;
  };
  std::vector<Against> against;
  const auto& c = p.include[k];
  if (c.relation)
    for (const auto& other : of_clause(size_t(c.relation_target)))
      against.push_back({other, *c.relation, true});
  for (size_t j = 0; j < p.include.size(); ++j)
    if (p.include[j].relation && size_t(p.include[j].relation_target) == k)
      for (const auto& other : of_clause(j))
        against.push_back({other, *p.include[j].relation, false});
  return against;
}

bool holds(const std::vector<Against>& against, const scene::Box& b) {
  return std::all_of(against.begin(), against.end(), [&](const Against& a) {
    return (a.box_first ? scene::relative_position(b, a.other)
                        : scene::relative_position(a.other, b))
        .contains(a.relation);
  });
}

// The blobs of image i that stand for clause c.
int serving(const std::vector<ShapeTarget>& targets, int64_t i, const scene::Clause& c) {
  return int(std::count_if(targets.begin(), targets.end(),
                           [&](const ShapeTarget& t) { return t.image == i && serves(t, c); }));
}

bool stands_for_a_clause(const ShapeTarget& t, const scene::Prompt& p) {
  return std::any_of(p.include.begin(), p.include.end(),
                     [&](const scene::Clause& c) { return serves(t, c); });
}

// The soft snap to every palette colour [B, 6, S, S], without the graph, on the CPU.
torch::Tensor snap_masks(const torch::Tensor& images, double temperature) {
  torch::NoGradGuard no_grad;
  return soft_color_masks(images.detach(), temperature).to(torch::kCPU).contiguous();
}

// `images` is a batch [B, 3, S, S] with one prompt per image.
void check_batch(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                 const char* who) {
  if (images.dim() != 4 || int64_t(prompts.size()) != images.size(0))
    throw std::invalid_argument(std::string(who) + ": one prompt per image [B, 3, S, S] is needed");
}

}  // namespace

int recolour_blobs(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                    std::vector<ShapeTarget>& targets, double temperature) {
  check_batch(prompts, images, "recolour_blobs");
  const auto masks = snap_masks(images, temperature);
  const auto snap = masks.accessor<float, 4>();
  int recoloured = 0;
  for (int64_t i = 0; i < images.size(0); ++i) {
    const auto& p = prompts[size_t(i)];
    for (size_t k = 0; k < p.include.size(); ++k) {
      const auto& c = p.include[k];
      if (!c.color) continue;  // an uncoloured clause takes any blob already
      for (int missing = c.count - serving(targets, i, c); missing > 0; --missing) {
        const auto against = relations_of(p, k, targets, i);
        ShapeTarget* pick = nullptr;
        double best = -1;
        for (auto& t : targets) {
          if (t.image != i || t.misplaced || t.missing || stands_for_a_clause(t, p) ||
              !holds(against, box_of(t)))
            continue;
          double sum = 0;
          for (int y = t.y0; y < t.y1; ++y)
            for (int x = t.x0; x < t.x1; ++x) sum += snap[i][int(*c.color)][y][x];
          const double mean = sum / double((t.y1 - t.y0) * (t.x1 - t.x0));
          if (mean > best) best = mean, pick = &t;
        }
        if (!pick) break;
        pick->color = *c.color, pick->shape = c.shape;
        pick->extra = pick->called_right = false, pick->recoloured = true;
        ++recoloured;
      }
    }
  }
  return recoloured;
}

std::vector<ShapeTarget> missing_objects(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                                         const std::vector<ShapeTarget>& targets, double temperature) {
  check_batch(prompts, images, "missing_objects");
  const int S = int(images.size(2)), side = (scene::min_side(S) + scene::max_side(S)) / 2, span = S - side + 1;
  // [B, 6, span, span]: the soft snap averaged over each side x side window
  const auto sums = torch::avg_pool2d(snap_masks(images, temperature), side, 1).contiguous();
  const auto sum = sums.accessor<float, 4>();
  std::vector<ShapeTarget> out;
  for (int64_t i = 0; i < images.size(0); ++i) {
    const auto& p = prompts[size_t(i)];
    // This image's blobs, then the boxes placed for it: what a new box keeps off.
    std::vector<ShapeTarget> here;
    for (const auto& t : targets)
      if (t.image == i) here.push_back(t);
    auto free_at = [&](int x, int y) {
      return std::none_of(here.begin(), here.end(), [&](const ShapeTarget& t) {
        return x - 1 < t.x1 + 1 && t.x0 - 1 < x + side + 1 && y - 1 < t.y1 + 1 && t.y0 - 1 < y + side + 1;
      });
    };
    for (size_t k = 0; k < p.include.size(); ++k) {
      const auto& c = p.include[k];
      int missing = c.count - serving(here, i, c);
      // The colours it may take: its own, or its blobs', or any.
      std::vector<scene::Color> colours;
      if (c.color) colours = {*c.color};
      for (const auto& t : here)
        if (colours.empty() && serves(t, c)) colours = {t.color};
      if (colours.empty()) colours.assign(scene::kColors.begin(), scene::kColors.end());
      for (; missing > 0; --missing) {
        // The relations a box for clause k must hold, against the boxes there
        // are: found once per object, not per candidate position.
        const auto against = relations_of(p, k, here, i);
        float best = -1;
        ShapeTarget t;
        for (const auto colour : colours)
          for (int y = 0; y < span; ++y)
            for (int x = 0; x < span; ++x) {
              const float v = sum[i][int(colour)][y][x];
              if (v <= best || !free_at(x, y)) continue;
              const scene::Box b{double(x), double(y), double(x + side), double(y + side)};
              if (!holds(against, b)) continue;
              best = v;
              t = {i, colour, x, y, x + side, y + side, c.shape, false, false, x, y, x + side, y + side, true};
            }
        if (best < 0) break;
        here.push_back(t);
        out.push_back(t);
      }
    }
  }
  return out;
}

int mark_misplaced(const std::vector<scene::Prompt>& prompts, std::vector<ShapeTarget>& targets) {
  int marked = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    for (const auto& c : p.include) {
      if (!c.relation) continue;
      if (c.relation_target < 0 || size_t(c.relation_target) >= p.include.size())
        throw std::invalid_argument("mark_misplaced: a relation's target is not one of the prompt's clauses");
      const auto& target_clause = p.include[size_t(c.relation_target)];
      // The anchors are the target clause's blobs as drawn; a blob serving
      // both clauses (the same shape and colour) is not compared with itself.
      std::vector<const ShapeTarget*> anchors;
      std::vector<ShapeTarget*> movers;
      for (auto& t : targets) {
        if (t.image != int64_t(i)) continue;
        if (serves(t, target_clause)) anchors.push_back(&t);
        if (serves(t, c)) movers.push_back(&t);
      }
      for (auto* t : movers)
        if (std::any_of(anchors.begin(), anchors.end(), [&](const ShapeTarget* a) {
              return a != t && !scene::relative_position(box_of(*t), box_of(*a)).contains(*c.relation);
            }))
          t->extra = t->misplaced = true, ++marked;
    }
  }
  return marked;
}

ShapeTarget at_object_size(const ShapeTarget& t, int size) {
  if (t.x1 <= t.x0 || t.y1 <= t.y0 || t.x0 < 0 || t.y0 < 0 || t.x1 > size || t.y1 > size)
    throw std::invalid_argument("at_object_size: the target's box lies outside the image");
  const int side = std::clamp(std::max(t.x1 - t.x0, t.y1 - t.y0), scene::min_side(size), scene::max_side(size));
  // Centred on the box (rounding down), then moved inside the image.
  auto start = [&](int lo, int hi) { return std::clamp((lo + hi - side) / 2, 0, size - side); };
  ShapeTarget out = t;
  out.tx0 = start(t.x0, t.x1), out.tx1 = out.tx0 + side;
  out.ty0 = start(t.y0, t.y1), out.ty1 = out.ty0 + side;
  out.x0 = std::min(t.x0, out.tx0), out.x1 = std::max(t.x1, out.tx1);
  out.y0 = std::min(t.y0, out.ty0), out.y1 = std::max(t.y1, out.ty1);
  return out;
}

namespace {

// The blob counts of a target list, as ShapeLossStats reports them.
void count_targets(const std::vector<ShapeTarget>& targets, ShapeLossStats& stats) {
  stats.targets = stats.called_right = stats.extras = stats.missing = stats.misplaced =
      stats.recoloured = 0;
  for (const auto& t : targets) {
    stats.targets += !t.missing, stats.missing += t.missing;
    stats.called_right += t.called_right, stats.extras += t.extra, stats.misplaced += t.misplaced;
    stats.recoloured += t.recoloured;
  }
}

// A blob's box and its one-pixel ring, clipped to an H x W image: rows
// [y0, y1), columns [x0, x1).
struct RingBox {
  int64_t y0, y1, x0, x1;
};
RingBox ring_box(const ShapeTarget& t, int64_t H, int64_t W) {
  return {std::max<int64_t>(t.y0 - 1, 0), std::min<int64_t>(t.y1 + 1, H), std::max<int64_t>(t.x0 - 1, 0),
          std::min<int64_t>(t.x1 + 1, W)};
}

// The pixels as the detector sees them: clamped to [-1, 1], with the clamp's
// gradient, or straight through it.
torch::Tensor clamped_pixels(const torch::Tensor& images, bool straight_through) {
  auto x = images.to(torch::kFloat32);
  return straight_through ? x + (x.clamp(-1, 1) - x).detach() : x.clamp(-1, 1);
}

// Per pixel of a box [3, h, w], in [0, 1] as mse's: the squared error over
// the three channels against the template painted in the blob's colour
// where it is 1, black (-1) where it is 0.
torch::Tensor pixel_error(const torch::Tensor& x, const torch::Tensor& tpl, scene::Color color) {
  const auto rgb = scene::color_rgb(color);
  auto colour = torch::tensor({rgb[0], rgb[1], rgb[2]}, x.options()).view({3, 1, 1});
  auto target = tpl.unsqueeze(0) * (colour + 1) - 1;
  return (x - target).pow(2).mean(0) / 4;
}

}  // namespace

torch::Tensor soft_color_masks(const torch::Tensor& images, double temperature, bool straight_through) {
  if (images.dim() != 4 || images.size(1) != 3) throw std::invalid_argument("soft_color_masks: images must be [B, 3, S, S]");
  // detect.cc's snap: p + 1 = alpha (c + 1) + residual, in the lifted space
  // where black is the origin.
  auto p = clamped_pixels(images, straight_through) + 1;  // [B, 3, S, S]
  auto lifted = torch::empty({scene::kNumColors, 3}, torch::kFloat32);
  for (int c = 0; c < scene::kNumColors; ++c) {
    const auto rgb = scene::color_rgb(scene::kColors[c]);
    for (int k = 0; k < 3; ++k) lifted[c][k] = rgb[k] + 1;
  }
  lifted = lifted.to(images.device());
  auto dot = torch::einsum("bkhw,ck->bchw", {p, lifted});          // [B, 6, S, S]
  auto norm2 = lifted.pow(2).sum(1).view({1, scene::kNumColors, 1, 1});
  auto alpha = dot / norm2;
  auto res2 = p.pow(2).sum(1, /*keepdim=*/true) - dot * dot / norm2;
  const double r2max = double(scene::kMaxResidual) * scene::kMaxResidual;
  return torch::sigmoid((alpha - double(scene::kMinAlpha)) / temperature) *
         torch::sigmoid((r2max - res2) / temperature);
}

torch::Tensor shape_template(scene::Shape shape, int w, int h) {
  if (w < 1 || h < 1) throw std::invalid_argument("shape_template: an empty box");
  auto t = torch::zeros({h + 2, w + 2}, torch::kFloat32);
  auto a = t.accessor<float, 2>();
  for (int j = 0; j < h; ++j)
    for (int i = 0; i < w; ++i) {
      // Pixel centres in [-1, 1] across the box (render.cc's shape_covers, for w x h).
      const double u = (2.0 * i + 1 - w) / w, v = (2.0 * j + 1 - h) / h;
      bool in = true;
      if (shape == scene::Shape::circle) in = u * u + v * v <= 1;
      if (shape == scene::Shape::triangle) in = std::abs(u) <= double(j + 1) / h;
      a[j + 1][i + 1] = in ? 1.f : 0.f;
    }
  return t;
}

torch::Tensor shape_loss(const torch::Tensor& images, const std::vector<ShapeTarget>& targets,
                         const ShapeLossOptions& opts, ShapeLossStats* stats) {
  const double batch = double(std::max<int64_t>(1, images.size(0)));
  if (stats) *stats = {};
  if (!(opts.ring_weight >= 0)) throw std::invalid_argument("shape_loss: the ring's weight must be 0 or more");
  if (!(opts.missing_weight >= 0))
    throw std::invalid_argument("shape_loss: the missing objects' weight must be 0 or more");
  if (!(opts.recolour_weight >= 0))
    throw std::invalid_argument("shape_loss: the recoloured blobs' weight must be 0 or more");
  if (!(opts.extras_bce_weight >= 0))
    throw std::invalid_argument("shape_loss: the extra blobs' bce weight must be 0 or more");
  if (std::any_of(targets.begin(), targets.end(),
                  [](const ShapeTarget& t) { return !(t.weight >= 0 && std::isfinite(t.weight)); }))
    throw std::invalid_argument("shape_loss: a target's weight must be finite and 0 or more");
  if (targets.empty()) return (images * 0).sum();
  // The pixel loss compares the pixels themselves; the others, their soft snap.
  const bool on_pixels = opts.kind == ShapeLossOptions::Kind::pixel;
  if (!(opts.hold_weight >= 0)) throw std::invalid_argument("shape_loss: the hold's weight must be 0 or more");
  if (!(opts.bce_weight >= 0) || (opts.bce_weight > 0 && opts.kind != ShapeLossOptions::Kind::mse))
    throw std::invalid_argument(
        "shape_loss: the bce weight must be 0 or more, and is added to mse only");
  if (opts.missing_bce && on_pixels)
    throw std::invalid_argument(
        "shape_loss: the missing objects' bce compares the soft snap, which the pixel loss has not");
  const bool extras_bce = opts.extras_bce_weight > 0;
  if (extras_bce && (on_pixels || !opts.erase_extras))
    throw std::invalid_argument(
        "shape_loss: the extra blobs' bce compares the soft snap of erased blobs: it needs "
        "erase_extras and not the pixel loss");
  const auto compared = on_pixels ? clamped_pixels(images, opts.straight_through)
                                  : soft_color_masks(images, opts.temperature, opts.straight_through);
  // The hold compares the pixels themselves, whatever the kind.
  const bool held = opts.hold_weight > 0;
  const auto pixels = on_pixels ? compared : held ? clamped_pixels(images, opts.straight_through) : torch::Tensor();
  const int64_t H = compared.size(2), W = compared.size(3);
  std::vector<torch::Tensor> terms;
  terms.reserve(targets.size());
  for (const auto& given : targets) {
    if (given.x1 <= given.x0 || given.y1 <= given.y0 || given.x0 < 0 || given.y0 < 0 || given.x1 > W ||
        given.y1 > H || given.image < 0 || given.image >= compared.size(0))
      throw std::invalid_argument("shape_loss: a target's box lies outside the image");
    const ShapeTarget t = opts.object_size ? at_object_size(given, int(W)) : given;
    const bool erased_under_bce = extras_bce && t.extra;
    torch::Tensor tpl;
    if (opts.erase_extras && t.extra) {
      tpl = torch::zeros({t.y1 - t.y0 + 2, t.x1 - t.x0 + 2});
    } else if (t.tx1 > t.tx0) {
      // The shape in its own box, dark elsewhere in the compared box.
      if (t.tx0 < t.x0 || t.ty0 < t.y0 || t.tx1 > t.x1 || t.ty1 > t.y1 || t.ty1 <= t.ty0)
        throw std::invalid_argument("shape_loss: a target's shape box lies outside its box");
      tpl = torch::zeros({t.y1 - t.y0 + 2, t.x1 - t.x0 + 2});
      tpl.slice(0, t.ty0 - t.y0, t.ty1 - t.y0 + 2)
          .slice(1, t.tx0 - t.x0, t.tx1 - t.x0 + 2)
          .copy_(shape_template(t.shape, t.tx1 - t.tx0, t.ty1 - t.ty0));
    } else {
      tpl = shape_template(t.shape, t.x1 - t.x0, t.y1 - t.y0);
    }
    tpl = tpl.to(compared.device());
    // The box and its ring, clipped to the image.
    const auto [y0, y1, x0, x1] = ring_box(t, H, W);
    tpl = tpl.slice(0, y0 - (t.y0 - 1), y1 - (t.y0 - 1)).slice(1, x0 - (t.x0 - 1), x1 - (t.x0 - 1));
    // The pixel loss of the box, for Kind::pixel and the hold alike.
    const auto box_error = on_pixels || held
                               ? pixel_error(pixels[t.image].slice(1, y0, y1).slice(2, x0, x1), tpl, t.color)
                               : torch::Tensor();
    torch::Tensor per_pixel;
    if (on_pixels) {
      per_pixel = box_error;
    } else {
      const auto m = compared[t.image][static_cast<int>(t.color)].slice(0, y0, y1).slice(1, x0, x1);
      auto bce = [&] {
        // Clamped so that log(1 - m) stays finite where float rounds m to 1
        // (the clamp bites only past logits of about 14), and log m where m
        // underflows. A recoloured blob's floor is far below 1e-6: its pixels,
        // lit in a neighbouring hue, have m ~ 1e-7 (blue under cyan), and a
        // clamp there would cut the pull that should recolour them.
        const auto mc = m.clamp(t.recoloured ? 1e-30 : 1e-6, 1 - 1e-6);
        return -(tpl * mc.log() + (1 - tpl) * (1 - mc).log());
      };
      if (opts.kind == ShapeLossOptions::Kind::bce || (t.missing && opts.missing_bce) ||
          t.recoloured || erased_under_bce) {
        per_pixel = bce();
      } else {
        per_pixel = (m - tpl).pow(2);
        if (opts.bce_weight > 0) per_pixel = per_pixel + opts.bce_weight * bce();
      }
    }
    if (held) per_pixel = per_pixel + opts.hold_weight * tpl * box_error;
    const double weight = t.weight * (t.missing          ? opts.missing_weight
                                      : t.recoloured     ? opts.recolour_weight
                                      : erased_under_bce ? opts.extras_bce_weight
                                                         : 1.0);
    if (opts.ring_weight == 1.0) {
      terms.push_back(weight * per_pixel.mean());
    } else {
      auto w = torch::full_like(per_pixel, opts.ring_weight);
      w.slice(0, t.y0 - y0, t.y1 - y0).slice(1, t.x0 - x0, t.x1 - x0).fill_(1.0);
      terms.push_back(weight * (w * per_pixel).sum() / w.sum());
    }
  }
  auto loss = torch::stack(terms).sum() / batch;
  if (stats) {
    stats->loss = loss.item<double>();
    count_targets(targets, *stats);
  }
  return loss;
}

torch::Tensor background_loss(const std::vector<scene::Prompt>& prompts, const torch::Tensor& images,
                              const std::vector<ShapeTarget>& targets, double temperature, bool straight_through,
                              int* held_images) {
  check_batch(prompts, images, "background_loss");
  const int64_t B = images.size(0), H = images.size(2), W = images.size(3);
  std::vector<int> blobs(size_t(B), 0);
  for (const auto& t : targets) {
    if (t.image < 0 || t.image >= B) throw std::invalid_argument("background_loss: a target's image is out of range");
    ++blobs[size_t(t.image)];
  }
  // 1 on the background of the images held, 0 elsewhere.
  auto mask = torch::zeros({B, H, W}, torch::kFloat32);
  int held = 0;
  for (int64_t i = 0; i < B; ++i) {
    int asked = 0;
    for (const auto& c : prompts[size_t(i)].include) asked += c.count;
    if (blobs[size_t(i)] < asked) continue;
    mask[i].fill_(1.0);
    ++held;
  }
  for (const auto& t : targets) {
    const auto r = ring_box(t, H, W);
    mask[t.image].slice(0, r.y0, r.y1).slice(1, r.x0, r.x1).fill_(0.0);
  }
  if (held_images) *held_images = held;
  const auto m = soft_color_masks(images, temperature, straight_through);  // [B, 6, S, S]
  mask = mask.to(m.device());
  const auto per_pixel = m.pow(2).sum(1) * mask;                               // [B, S, S]
  const auto pixels = mask.sum({1, 2}).clamp_min(1.0);
  return (per_pixel.sum({1, 2}) / pixels).sum() / double(std::max<int64_t>(1, B));
}

torch::Tensor sample_with_grad_tail(DiT& model, const torch::Tensor& tokens,
                                    const std::vector<uint64_t>& seeds, int steps, double shift,
                                    double guidance, int grad_steps, EarlyLatent* early,
                                    bool null_grad) {
  if (grad_steps < 1 || grad_steps > steps)
    throw std::invalid_argument("sample_with_grad_tail: grad_steps must lie in [1, steps]");
  if (early && (early->step < 0 || early->step >= steps - grad_steps))
    throw std::invalid_argument("sample_with_grad_tail: the early latent must be one of the steps without the graph");
  if (int64_t(seeds.size()) != tokens.size(0))
    throw std::invalid_argument("sample_with_grad_tail: one seed per prompt row is needed");
  SamplerOptions opts;
  opts.steps = steps;
  opts.shift = shift;
  opts.noise_level = 0;
  opts.guidance = guidance;
  opts.validate();
  const auto sigmas = shifted_sigmas(steps, shift);
  torch::Tensor x;
  {
    torch::NoGradGuard no_grad;
    x = initial_latent(model->config(), seeds, tokens.device());
    for (int i = 0; i < steps - grad_steps; ++i) {
      if (early && i == early->step) {
        early->x = x;
        early->sigma = sigmas[size_t(i)];
      }
      x = denoise_step(model, x, tokens, seeds, sigmas, i, opts);
    }
  }
  for (int i = steps - grad_steps; i < steps; ++i)
    x = x + (sigmas[size_t(i) + 1] - sigmas[size_t(i)]) *
                guided_velocity(model, x, sigmas[size_t(i)], tokens, guidance, nullptr, null_grad);
  return x;
}

PtxBatch make_ptx_batch(const DiTConfig& config, scene::PromptGenerator& prompts, uint64_t& image_seed, int batch,
                        double cond_drop, torch::Generator gen) {
  if (batch < 1) throw std::invalid_argument("make_ptx_batch: the batch must hold at least one scene");
  if (!(cond_drop >= 0 && cond_drop < 1)) throw std::invalid_argument("make_ptx_batch: cond_drop must lie in [0, 1)");
  std::vector<scene::Prompt> ps;
  std::vector<uint64_t> seeds;
  for (int i = 0; i < batch; ++i) {
    ps.push_back(prompts.next());
    seeds.push_back(image_seed++);
  }
  PtxBatch b;
  b.x0 = render_batch(ps, seeds, int(config.image_size));
  b.tokens = encode_prompts(ps, config.text_len);
  if (cond_drop > 0) b.tokens = b.tokens * torch::rand({batch, 1}, gen).ge(cond_drop).to(torch::kInt64);
  b.eps = torch::randn(b.x0.sizes(), gen);
  b.sigmas = sample_training_sigmas(batch, 1.0, gen);
  return b;
}

torch::Tensor ptx_loss(DiT& model, const PtxBatch& b) {
  const auto dev = model->parameters().front().device();
  const auto x0 = b.x0.to(dev), eps = b.eps.to(dev), s = b.sigmas.to(dev);
  return flow_matching_loss(model->forward(interpolate(x0, eps, s), s, b.tokens.to(dev)), x0, eps);
}

DraftStepStats draft_step(DiT& model, torch::optim::Optimizer& opt, const std::vector<scene::Prompt>& prompts,
                          const torch::Tensor& tokens, const std::vector<uint64_t>& seeds, const DraftOptions& opts,
                          DiT* reference, const PtxBatch* ptx) {
  DraftStepStats out;
  if (opts.targets != DraftOptions::Targets::own && !reference)
    throw std::invalid_argument("draft_step: reference targets need the reference model");
  if (opts.ptx_weight > 0 && !ptx) throw std::invalid_argument("draft_step: the pre-training mix needs its batch");
  if (!(opts.early_weight >= 0)) throw std::invalid_argument("draft_step: the early prediction's weight must be 0 or more");
  if (opts.relocate_misplaced && !(opts.add_missing && opts.loss.erase_extras))
    throw std::invalid_argument("draft_step: relocating misplaced blobs needs the missing objects and erase_extras");
  const bool anchored = reference && opts.reference_weight > 0 && opts.grad_steps < opts.steps;
  const bool predicted = opts.early_weight > 0 && opts.grad_steps < opts.steps;
  EarlyLatent early;
  if (anchored || predicted) {
    // A step drawn uniformly from those without the graph, keyed by the
    // iteration's seeds (fresh each iteration, fixed by the run's --seed).
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (uint64_t s : seeds) h = (h ^ s) * 0x100000001b3ULL;
    early.step = int((h >> 17) % uint64_t(opts.steps - opts.grad_steps));
  }
  auto images = sample_with_grad_tail(model, tokens, seeds, opts.steps, opts.shift, opts.guidance,
                                      opts.grad_steps, anchored || predicted ? &early : nullptr,
                                      opts.null_grad);
  if (anchored || predicted) out.anchored_step = early.step;
  auto targets = shape_targets(prompts, images, &out.scores, &out.calls);
  if (opts.relocate_misplaced) mark_misplaced(prompts, targets);
  if (opts.recolour_blobs) recolour_blobs(prompts, images, targets, opts.loss.temperature);
  // Placed around the own blobs, whatever else the loss compares.
  const auto missing = opts.add_missing ? missing_objects(prompts, images, targets, opts.loss.temperature)
                                        : std::vector<ShapeTarget>{};
  // The trained images' blobs, which the log reports whatever the loss compares.
  ShapeLossStats own;
  count_targets(targets, own);
  // The background around the trained images' own blobs, whatever the shape loss compares.
  torch::Tensor background;
  if (opts.background_weight > 0)
    background = background_loss(prompts, images, targets, opts.loss.temperature, opts.loss.straight_through,
                                 &out.background_images);
  if (opts.targets != DraftOptions::Targets::own) {
    torch::NoGradGuard no_grad;
    const auto ref_images =
        sample_with_grad_tail(*reference, tokens, seeds, opts.steps, opts.shift, opts.guidance, 1);
    auto theirs = shape_targets(prompts, ref_images);
    if (opts.targets == DraftOptions::Targets::reference) {
      targets = std::move(theirs);
    } else {
      const auto lost = lost_blobs(targets, theirs);
      targets.insert(targets.end(), lost.begin(), lost.end());
    }
  }
  targets.insert(targets.end(), missing.begin(), missing.end());
  own.missing = int(missing.size());
  if (opts.shape_weights)
    for (auto& t : targets)
      if (!t.extra)
        t.weight = (*opts.shape_weights)[size_t(prompts[size_t(t.image)].tag)][size_t(t.shape)];
  opt.zero_grad();
  auto loss = shape_loss(images, targets, opts.loss, &out.loss);
  own.loss = out.loss.loss;
  out.loss = own;
  if (anchored) {
    const auto s = torch::full({early.x.size(0)}, early.sigma, early.x.options());
    const auto mse = reference_mse(
        guided_velocity(model, early.x, s, tokens, opts.guidance, nullptr, opts.null_grad),
        *reference, early.x, s, tokens, opts.guidance);
    out.reference_mse = mse.item<double>();
    loss = loss + opts.reference_weight * mse;
  }
  if (predicted) {
    const auto s = torch::full({early.x.size(0)}, early.sigma, early.x.options());
    const auto x0 = early.x - early.sigma * guided_velocity(model, early.x, s, tokens,
                                                            opts.guidance, nullptr, opts.null_grad);
    const auto e = shape_loss(x0, targets, opts.loss);
    out.early_loss = e.item<double>();
    loss = loss + opts.early_weight * e;
  }
  if (opts.background_weight > 0) {
    out.background_loss = background.item<double>();
    loss = loss + opts.background_weight * background;
  }
  if (opts.ptx_weight > 0) {
    const auto fm = ptx_loss(model, *ptx);
    out.ptx_loss = fm.item<double>();
    loss = loss + opts.ptx_weight * fm;
  }
  loss.backward();
  out.grad_norm = double(torch::nn::utils::clip_grad_norm_(model->parameters(), opts.max_grad_norm));
  opt.step();
  return out;
}

}  // namespace spotlight::models

#include "models/scene/detect.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace spotlight::scene {

namespace {

// Palette colours lifted by +1, so black is the origin and every colour a
// vector of 0s and 2s.
struct Lifted {
  std::array<float, 3> v;
  float norm2;
  float inv_norm2;
};

constexpr std::array<Lifted, kNumColors> lifted_palette() {
  std::array<Lifted, kNumColors> out{};
  for (int c = 0; c < kNumColors; ++c) {
    const auto rgb = color_rgb(kColors[c]);
    float n2 = 0;
    for (int k = 0; k < 3; ++k) {
      out[c].v[k] = rgb[k] + 1;
      n2 += out[c].v[k] * out[c].v[k];
    }
    out[c].norm2 = n2;
    out[c].inv_norm2 = 1 / n2;
  }
  return out;
}
constexpr std::array<Lifted, kNumColors> kLifted = lifted_palette();

constexpr int8_t kBackground = -1;

// Label maps carry a one-pixel border of kOutside (stride size + 2), so no
// neighbour lookup needs a bounds check. kOutside is neither a colour nor
// background: it does not vote.
constexpr int8_t kOutside = -3;

// Step 2 of detect.h: the colour held by more than half of the image pixels
// of the 3x3 neighbourhood (5 of 9 inside, 4 of 6 along the image's edge,
// 3 of 4 in a corner), else background. Counting only pixels inside the image
// keeps a shape that touches the edge from being eaten there. Lit pixels are
// counted first (two separable 3-sums), so the colour vote runs only where
// a majority is lit at all: a small part of a mostly black image.
void majority_filter(const std::vector<int8_t>& in, std::vector<int8_t>& out, int size) {
  const int stride = size + 2;
  std::vector<uint8_t> row_lit(in.size(), 0);
  for (int y = 1; y <= size; ++y)
    for (int x = 1; x <= size; ++x) {
      const int at = y * stride + x;
      row_lit[at] = (in[at - 1] >= 0) + (in[at] >= 0) + (in[at + 1] >= 0);
    }
  auto span = [size](int v) { return std::min(v + 1, size) - std::max(v - 1, 1) + 1; };
  for (int y = 1; y <= size; ++y)
    for (int x = 1; x <= size; ++x) {
      const int at = y * stride + x;
      const int inside = span(x) * span(y);
      int8_t label = kBackground;
      if (2 * (row_lit[at - stride] + row_lit[at] + row_lit[at + stride]) > inside) {
        std::array<int8_t, kNumColors> votes{};
        for (int dy = -stride; dy <= stride; dy += stride)
          for (int dx = -1; dx <= 1; ++dx)
            if (const int8_t l = in[at + dy + dx]; l >= 0) ++votes[l];
        for (int c = 0; c < kNumColors; ++c)
          if (2 * votes[c] > inside) label = static_cast<int8_t>(c);
      }
      out[at] = label;
    }
}

Shape classify(float fill, float centroid_height) {
  if (centroid_height >= kTriangleCentroid || fill < kTriangleFill) return Shape::triangle;
  return fill >= kSquareFill ? Shape::square : Shape::circle;
}

}  // namespace

int min_area(int size) {
  return std::max(4, 12 * size * size / (32 * 32));
}

int max_object_side(int size) {
  return size / 2;
}

int snap_pixel(float r, float g, float b) {
  // min/max rather than std::clamp: they compile to branch-free minss/maxss.
  const float p[3] = {std::min(std::max(r, -1.f), 1.f) + 1, std::min(std::max(g, -1.f), 1.f) + 1,
                      std::min(std::max(b, -1.f), 1.f) + 1};
  // Every colour needs alpha >= 1/2, which takes at least 1 of channel sum;
  // most pixels are background and leave here.
  if (p[0] + p[1] + p[2] < 1) return kBackground;
  const float p2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
  int best = kBackground;
  float best_res2 = kMaxResidual * kMaxResidual;
  for (int c = 0; c < kNumColors; ++c) {
    const Lifted& l = kLifted[c];
    const float dot = p[0] * l.v[0] + p[1] * l.v[1] + p[2] * l.v[2];
    if (dot < kMinAlpha * l.norm2) continue;          // alpha = dot / norm2 below the cut
    const float res2 = p2 - dot * dot * l.inv_norm2;  // |p - alpha v|^2
    if (res2 < best_res2) {
      best_res2 = res2;
      best = c;
    }
  }
  return best;
}

std::vector<Detection> detect(const float* chw, int size) {
  const int n = size * size;
  const int stride = size + 2;
  std::vector<int8_t> raw(static_cast<size_t>(stride) * stride, kOutside);
  std::vector<int8_t> label(raw.size(), kOutside);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const int i = y * size + x;
      raw[(y + 1) * stride + x + 1] =
          static_cast<int8_t>(snap_pixel(chw[i], chw[n + i], chw[2 * n + i]));
    }
  majority_filter(raw, label, size);

  std::vector<Detection> out;
  std::vector<int> stack;
  const int min_px = min_area(size);
  const int max_side = max_object_side(size);
  constexpr int8_t kVisited = -2;
  for (int start = 0; start < static_cast<int>(label.size()); ++start) {
    const int8_t colour = label[start];
    if (colour < 0) continue;
    // Flood fill; a pixel is marked when pushed, so each is pushed once.
    Detection d;
    d.color = kColors[colour];
    d.x0 = size, d.y0 = size, d.x1 = 0, d.y1 = 0;
    long sum_x = 0, sum_y = 0;
    label[start] = kVisited;
    stack.push_back(start);
    while (!stack.empty()) {
      const int at = stack.back();
      stack.pop_back();
      const int x = at % stride - 1, y = at / stride - 1;  // image coordinates
      ++d.area;
      sum_x += x;
      sum_y += y;
      d.x0 = std::min(d.x0, x), d.x1 = std::max(d.x1, x + 1);
      d.y0 = std::min(d.y0, y), d.y1 = std::max(d.y1, y + 1);
      for (int dy = -stride; dy <= stride; dy += stride)
        for (int dx = -1; dx <= 1; ++dx) {
          const int nb = at + dy + dx;
          if (label[nb] != colour) continue;
          label[nb] = kVisited;
          stack.push_back(nb);
        }
    }
    if (d.area < min_px) continue;
    const int w = d.x1 - d.x0, h = d.y1 - d.y0;
    if (w > kMaxAspect * h || h > kMaxAspect * w) continue;
    if (w > max_side || h > max_side) continue;
    d.cx = static_cast<float>(sum_x) / d.area + 0.5f;
    d.cy = static_cast<float>(sum_y) / d.area + 0.5f;
    d.fill = static_cast<float>(d.area) / static_cast<float>(w * h);
    d.centroid_height = (d.cy - d.y0) / h;
    d.shape = classify(d.fill, d.centroid_height);
    out.push_back(d);
  }
  return out;
}

}  // namespace spotlight::scene

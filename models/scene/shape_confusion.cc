#include "models/scene/shape_confusion.h"

#include <algorithm>

#include "models/scene/soft.h"

namespace spotlight::scene {

void ShapeConfusion::add(const Prompt& p, const std::vector<Detection>& found) {
  const auto wanted = best_shapes(p, found);
  add(p, found, wanted, extra_blobs(p, wanted));
}

void ShapeConfusion::add(const Prompt& p, const std::vector<Detection>& found,
                         const std::vector<Detection>& wanted, const std::vector<int>& extra) {
  const size_t assigned = std::min(found.size(), kMaxAssignedBlobs);
  for (size_t i = 0; i < assigned; ++i) {
    if (std::binary_search(extra.begin(), extra.end(), int(i))) continue;
    ++calls[size_t(p.tag)][size_t(wanted[i].shape)][size_t(found[i].shape)];
  }
}

int ShapeConfusion::total(Shape wanted, Shape called) const {
  int n = 0;
  for (const auto& tag : calls) n += tag[size_t(wanted)][size_t(called)];
  return n;
}

namespace {

double share(const std::array<int, kNumShapes>& row, Shape wanted) {
  int n = 0;
  for (int c : row) n += c;
  return n > 0 ? double(row[size_t(wanted)]) / n : 0.0;
}

}  // namespace

double ShapeConfusion::right_share(Shape wanted) const {
  std::array<int, kNumShapes> row{};
  for (const auto called : kShapes) row[size_t(called)] = total(wanted, called);
  return share(row, wanted);
}

double ShapeConfusion::right_share(Tag tag, Shape wanted) const {
  return share(calls[size_t(tag)][size_t(wanted)], wanted);
}

}  // namespace spotlight::scene

#include "models/scene/colour_tally.h"

#include <algorithm>

namespace spotlight::scene {

void ColourTally::add(const Prompt& p, const std::vector<Detection>& found) {
  ++images;
  for (const auto& d : found) ++blobs[size_t(d.color)];
  for (const auto& c : p.include) {
    if (!c.color) continue;
    const auto colour = *c.color;
    ++asked[size_t(colour)];
    if (std::any_of(found.begin(), found.end(), [&](const Detection& d) { return d.color == colour; }))
      ++drawn[size_t(colour)];
  }
}

double ColourTally::blobs_per_image(Color c) const {
  return images > 0 ? double(blobs[size_t(c)]) / images : 0.0;
}

double ColourTally::drawn_share(Color c) const {
  return asked[size_t(c)] > 0 ? double(drawn[size_t(c)]) / asked[size_t(c)] : 0.0;
}

}  // namespace spotlight::scene

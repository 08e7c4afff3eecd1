// spotlight-train --lr-scale PREFIX=S: per-parameter learning-rate factors,
// chosen by the parameter's name (LibTorch's dotted module path, as
// DiT::named_parameters gives it). Kept free of LibTorch so that the rules
// are unit-tested alone.
//
// Why: DRaFT's runs peak and then drift in layout (objects missing, objects
// nobody asked for) while the share of blobs called the wanted shape rises
// little. The layout and the shapes are run by the same weights; the text
// encoder is where the prompt's shape words become conditioning. Training
// it faster than the rest, or alone (every other prefix at 0, frozen), is
// textual inversion's way of moving what a word means without moving how
// the scene is drawn.
#pragma once

#include <string>
#include <vector>

namespace spotlight::tools {

struct LrScaleRule {
  std::string prefix;  // "*" matches every name
  double scale = 1;    // 0 freezes the matching parameters
};

// Parses "PREFIX=S" with S a finite number >= 0 and a non-empty prefix;
// throws std::invalid_argument with the offending text otherwise.
LrScaleRule parse_lr_scale(const std::string& text);

// The factor of the first rule whose prefix begins `name` (a rule "text"
// matches "text.embed.weight" and "text_pool.weight" alike: name the dot,
// "text.", to take the encoder alone); 1 where none does.
double lr_scale_for(const std::string& name, const std::vector<LrScaleRule>& rules);

// The parameters `names` sorted by their factor: one group per factor other
// than 0, in the order each first appears, holding indices into `names`;
// those at 0 are frozen.
struct LrGroups {
  std::vector<double> scales;               // one per group
  std::vector<std::vector<size_t>> members;  // one per group
  std::vector<size_t> frozen;
};
LrGroups group_by_lr_scale(const std::vector<std::string>& names, const std::vector<LrScaleRule>& rules);

}  // namespace spotlight::tools

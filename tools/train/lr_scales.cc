#include "tools/train/lr_scales.h"

#include <cmath>
#include <stdexcept>

namespace spotlight::tools {

LrScaleRule parse_lr_scale(const std::string& text) {
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw std::invalid_argument("--lr-scale: expected PREFIX=SCALE, got '" + text + "'");
  LrScaleRule rule{text.substr(0, eq), 0};
  const auto number = text.substr(eq + 1);
  size_t used = 0;
  try {
    rule.scale = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != number.size() || !std::isfinite(rule.scale) || rule.scale < 0)
    throw std::invalid_argument("--lr-scale: the scale in '" + text + "' must be a finite number >= 0");
  return rule;
}

double lr_scale_for(const std::string& name, const std::vector<LrScaleRule>& rules) {
  for (const auto& r : rules)
    if (r.prefix == "*" || name.compare(0, r.prefix.size(), r.prefix) == 0) return r.scale;
  return 1;
}

}  // namespace spotlight::tools

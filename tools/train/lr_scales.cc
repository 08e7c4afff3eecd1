#include "tools/train/lr_scales.h"

#include <algorithm>
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

LrGroups group_by_lr_scale(const std::vector<std::string>& names, const std::vector<LrScaleRule>& rules) {
  LrGroups g;
  for (size_t i = 0; i < names.size(); ++i) {
    const double s = lr_scale_for(names[i], rules);
    if (s == 0) {
      g.frozen.push_back(i);
      continue;
    }
    const auto at = size_t(std::find(g.scales.begin(), g.scales.end(), s) - g.scales.begin());
    if (at == g.scales.size()) {
      g.scales.push_back(s);
      g.members.emplace_back();
    }
    g.members[at].push_back(i);
  }
  return g;
}

}  // namespace spotlight::tools

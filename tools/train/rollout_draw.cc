#include "tools/train/rollout_draw.h"

#include <stdexcept>

namespace spotlight::tools {

RolloutDraw draw_rollouts(int prompts, int rolled, bool shape_twins,
                          const std::function<scene::Prompt()>& next_prompt,
                          const std::function<uint64_t()>& next_seed) {
  if (prompts < 1 || rolled < 1)
    throw std::invalid_argument("draw_rollouts: prompts and rollouts a prompt must be positive");
  if (shape_twins && prompts % 2 != 0) throw std::invalid_argument(kTwinsNeedEvenPrompts);
  RolloutDraw d;
  d.prompts.reserve(size_t(prompts) * size_t(rolled));
  d.seeds.reserve(d.prompts.capacity());
  for (int p = 0; p < prompts; ++p) {
    const bool twin = shape_twins && p % 2 == 1;
    const size_t first = d.prompts.size() - (twin ? size_t(rolled) : 0);  // the original's group
    const scene::Prompt pr = twin ? scene::shape_twin(d.prompts[first]) : next_prompt();
    for (int g = 0; g < rolled; ++g) {
      d.prompts.push_back(pr);
      d.seeds.push_back(twin ? d.seeds[first + size_t(g)] : next_seed());
    }
  }
  return d;
}

}  // namespace spotlight::tools

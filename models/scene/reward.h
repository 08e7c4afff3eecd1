// GenEval's reward: the partial-credit rule of its evaluate_reward, over the
// detections of the shape world.
//
// Detections are grouped by shape ("objects[class]"). For each include clause
// in order, with found = objects of its shape and n = found.size():
//   append 1 - |count - n| / count                      (may be negative: GenEval's rule)
//   n != count: not strict, clause unmatched; append 0 if it asks a colour or a position
//   else, colour asked: m = found of that colour; append 1 - |count - m| / count;
//         m != count: not strict, unmatched
//   then, position asked and still matched: the target clause unmatched -> append 0,
//         unmatched; else every found object must hold the relation against every
//         target object (relative_position), append 1 if so, else 0 and unmatched.
// Exclude clauses {shape, k}: k or more of that shape -> not strict (the
// reward is untouched, as in GenEval). reward = mean of the appended terms,
// 0 if none. strict is GenEval's per-image accuracy.
#pragma once

#include <vector>

#include "models/scene/detect.h"
#include "models/scene/geometry.h"
#include "models/scene/prompt.h"

namespace spotlight::scene {

struct Score {
  double reward = 0;
  bool strict = false;
};

Score score(const Prompt& p, const std::vector<Detection>& found);

// score(p, detect(chw, size)): the reward of a [-1, 1] CHW image.
Score score_image(const Prompt& p, const float* chw, int size = 32);

// relative_position on the detections' boxes.
Relations relative_position(const Detection& a, const Detection& b);

}  // namespace spotlight::scene

// The rule-based object detector of the shape world: GenEval's Mask2Former,
// replaced by something exact on rendered scenes and tolerant of the blur
// and noise of generated ones.
//
// 1. Snap: each pixel (clamped to [-1, 1]) is explained as a palette colour
//    faded towards the black background, p + 1 = alpha * (c + 1): alpha is
//    the least-squares fade for colour c, the residual what it leaves
//    unexplained. The pixel takes the colour with the smallest residual if
//    alpha >= kMinAlpha (at least half lit) and the residual is under
//    kMaxResidual; otherwise it is background. Fading rather than nearest
//    colour matters at blurred edges: yellow half-faded to (0, 0, -1) is as
//    near to red and to green as to yellow, but it is exactly yellow faded.
// 2. Clean: a 3x3 majority (median) filter on the labels drops the specks and
//    one-pixel spurs noise leaves at edges, each of which would widen a
//    bounding box by a pixel and skew the fill ratio, and fills pinholes.
// 3. Group: 8-connected components of one colour; components under
//    min_area(size) (12 px at 32) are specks, and components more than
//    kMaxAspect times wider than tall (or the reverse) are no shape: dropped.
//    So are components wider or taller than max_object_side(size), half the
//    image: the renderer draws objects of at most 3/8 of it, and a field of
//    colour across the frame is a background, not an object. Without this
//    rule post-training learnt to paint the whole frame in the prompt's
//    colours, each field read as a square, and scored 0.47 against the base
//    model's 0.32 while drawing no objects (docs/benchmarks.md, thirty-ninth
//    session).
// 4. Classify: an upward triangle keeps two thirds of its pixels in its lower
//    half, so its centroid sits at ~0.6 of its box's height where the
//    symmetric shapes sit at 0.5; at least kTriangleCentroid is a triangle
//    (this survives blur, which eats the apex and so the fill ratio). The
//    rest by fill ratio, area / box area: a square fills ~0.94-1, a disc
//    ~0.78 (pi / 4); at least kSquareFill is a square, below it a circle. A
//    fill under kTriangleFill is a triangle whatever its centroid (one
//    pointing down, say).
//
// One pass over the pixels, one filter pass, one visit per component pixel:
// O(HW), 20-30 microseconds at 32 x 32 on a small cloud VM core.
#pragma once

#include <vector>

#include "models/scene/geometry.h"
#include "models/scene/palette.h"
#include "models/scene/prompt.h"

namespace spotlight::scene {

struct Detection {
  Shape shape = Shape::square;
  Color color = Color::red;
  float cx = 0, cy = 0;                // centroid of the pixels; pixel (x, y) is centred at x + 0.5
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // bounding box, x1 and y1 one past the last pixel
  int area = 0;                        // pixels
  float fill = 0;                      // area / box area (step 4's feature)
  float centroid_height = 0;           // (cy - y0) / box height (step 4's feature)
  Box box() const { return {double(x0), double(y0), double(x1), double(y1)}; }
};

inline constexpr float kMinAlpha = 0.5f;
inline constexpr float kMaxResidual = 0.75f;
inline constexpr float kMaxAspect = 2.0f;
// Measured on 3000 rendered scenes at 32 px under a 3x3 box blur plus
// Gaussian noise of sigma 0.15 (the tests' "generated-looking" images):
// triangle centroids at 0.54-0.64 of the box height, squares' and circles'
// at 0.46-0.55; square fills 0.85-0.98 (0.94-0.97 clean), circle fills
// 0.70-0.85. Without blur or noise every class has a wide margin except
// circle against square: a 9-px circle fills 69 / 81 = 0.852.
inline constexpr float kTriangleCentroid = 0.54f;
inline constexpr float kTriangleFill = 0.6f;
inline constexpr float kSquareFill = 0.86f;

int min_area(int size);  // 12 px at 32, scaled with the image area, at least 4
int max_object_side(int size);  // 16 px at 32: size / 2

// Detections in scan order of their first pixel. `chw` holds 3 * size * size
// floats, nominally in [-1, 1].
std::vector<Detection> detect(const float* chw, int size);

// The palette index a pixel snaps to, or -1 for background (step 1).
int snap_pixel(float r, float g, float b);

}  // namespace spotlight::scene

// The renderer: a scene that satisfies a prompt exactly, as the diffusion
// model's pre-training data.
//
// Images are size x size RGB, CHW floats in [-1, 1], black (-1) background.
// Each include clause becomes `count` filled shapes of its colour (a random
// palette colour where the clause names none), each shape with its own random
// side in [min_side(size), max_side(size)] (8-12 px at 32), at random
// positions at least gap(size) pixels from each other and from the canvas's
// edge: then neither the detector nor a 3x3 blur ever merges two shapes, and
// a blur that treats the edge specially (zero or reflect padding) changes no
// shape's outline.
// A positioned object satisfies GenEval's relative-position rule with a
// margin (see kRelationMargin in render.cc), so the relation still holds
// after a pixel of blur. Triangles point up. Deterministic given
// (prompt text and clauses, seed, size).
#pragma once

#include <cstdint>
#include <vector>

#include "models/scene/geometry.h"
#include "models/scene/palette.h"
#include "models/scene/prompt.h"

namespace spotlight::scene {

inline constexpr int kMinRenderSize = 16;

int min_side(int size);  // size / 4
int max_side(int size);  // 3 * size / 8
int gap(int size);       // max(2, size / 16)

// One shape of a scene: its bounding box is [x0, x0 + side) x [y0, y0 + side).
struct PlacedShape {
  Shape shape = Shape::square;
  Color color = Color::red;
  int x0 = 0, y0 = 0, side = 0;
  int clause = 0;  // the include clause it stands for
  Box box() const { return {double(x0), double(y0), double(x0 + side), double(y0 + side)}; }
};

// Whether pixel (i, j) of a side x side box belongs to the shape: a square
// fills it; a circle holds the pixels whose centres lie in the inscribed
// disc; an upward triangle has rows 1, 2, ..., side pixels wide (rounded to
// the parity of side so every row is centred) from apex to base.
bool shape_covers(Shape shape, int side, int i, int j);

// The shapes of a scene for `p`: rejection sampling with bounded retries that
// shrinks the largest side when a crowded scene keeps failing. Throws
// std::invalid_argument for size < kMinRenderSize or a clause whose relation
// target is not an earlier clause, std::runtime_error if no layout is found
// (never seen for the grammar's prompts at size >= 16).
std::vector<PlacedShape> layout(const Prompt& p, uint64_t seed, int size = 32);

// Paints `s` into a CHW image of size x size.
void paint(std::vector<float>& chw, int size, const PlacedShape& s);

// A black canvas with `shapes` painted on it.
std::vector<float> draw(const std::vector<PlacedShape>& shapes, int size = 32);

// draw(layout(p, seed, size), size).
std::vector<float> render(const Prompt& p, uint64_t seed, int size = 32);

}  // namespace spotlight::scene

// The colours of the shape world and their pixel values.
//
// Pixels live in the diffusion model's space, [-1, 1] per channel, with black
// (-1, -1, -1) as the background. Every colour is a corner of the RGB cube:
// the corners are as far apart as colours can be (any two differ by 2 in at
// least one channel), and a corner blended with black moves along a line
// that passes no other corner, which is what lets the detector tell a
// blurred yellow edge from red or green (see detect.cc).
#pragma once

#include <array>
#include <string_view>

namespace spotlight::scene {

enum class Color { red, green, blue, yellow, purple, cyan };
inline constexpr int kNumColors = 6;
inline constexpr std::array<Color, kNumColors> kColors = {
    Color::red, Color::green, Color::blue, Color::yellow, Color::purple, Color::cyan};

// The word the prompts use ("purple" is magenta; GenEval's name for it).
constexpr std::string_view color_name(Color c) {
  constexpr std::array<std::string_view, kNumColors> kNames = {"red",    "green",  "blue",
                                                               "yellow", "purple", "cyan"};
  return kNames[static_cast<int>(c)];
}

// RGB in [-1, 1].
constexpr std::array<float, 3> color_rgb(Color c) {
  constexpr std::array<std::array<float, 3>, kNumColors> kRgb = {{
      {1, -1, -1},  // red
      {-1, 1, -1},  // green
      {-1, -1, 1},  // blue
      {1, 1, -1},   // yellow
      {1, -1, 1},   // purple
      {-1, 1, 1},   // cyan
  }};
  return kRgb[static_cast<int>(c)];
}

}  // namespace spotlight::scene

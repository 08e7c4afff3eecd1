#include "models/scene/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "models/scene/palette.h"
#include "models/scene/prompt.h"

namespace spotlight::scene {

Tokenizer::Tokenizer() {
  // Order fixes the ids; append new words at the end so old ids stay valid.
  words_ = {"<pad>", "<unk>", "a",  "an",   "one",   "two",   "three",
            "four",  "and",   "of", "left", "right", "above", "below"};
  for (Color c : kColors) words_.emplace_back(color_name(c));
  for (Shape s : kShapes) words_.emplace_back(shape_name(s));
  for (Shape s : kShapes) words_.emplace_back(shape_plural(s));
  for (size_t i = 0; i < words_.size(); ++i)
    index_.emplace_back(words_[i], static_cast<int64_t>(i));
  std::sort(index_.begin(), index_.end());
}

int64_t Tokenizer::id(std::string_view word) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), word,
                             [](const auto& entry, std::string_view w) { return entry.first < w; });
  return (it != index_.end() && it->first == word) ? it->second : kUnk;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, int max_len) const {
  std::vector<int64_t> ids;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    ids.push_back(id(word));
  }
  if (static_cast<int>(ids.size()) > max_len)
    throw std::invalid_argument("prompt of " + std::to_string(ids.size()) + " words exceeds " +
                                std::to_string(max_len) + ": " + text);
  ids.resize(max_len, kPad);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id == kPad) continue;
    if (!out.empty()) out += ' ';
    out += (id >= 0 && id < vocab_size()) ? words_[id] : words_[kUnk];
  }
  return out;
}

}  // namespace spotlight::scene

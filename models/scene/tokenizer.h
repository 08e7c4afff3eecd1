// Word-level tokenizer over the closed vocabulary of the prompt grammar.
//
// The grammar emits a few dozen words, so a fixed word list is the whole
// tokenizer: ids are stable (they index the text encoder's embedding table)
// and a word outside the grammar is <unk>, never an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spotlight::scene {

class Tokenizer {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kUnk = 1;
  // Longest prompt: "a purple triangle right of a yellow square" is 8 words.
  static constexpr int kMaxLen = 12;

  Tokenizer();

  // Ids of the whitespace-separated, lowercased words of `text`, padded with
  // kPad to max_len. Throws std::invalid_argument if there are more than
  // max_len words.
  std::vector<int64_t> encode(const std::string& text, int max_len = kMaxLen) const;

  // The words of `ids` joined by spaces, padding dropped.
  std::string decode(const std::vector<int64_t>& ids) const;

  int vocab_size() const { return static_cast<int>(words_.size()); }
  int64_t id(std::string_view word) const;  // kUnk for a word outside the vocabulary
  const std::vector<std::string>& words() const { return words_; }

 private:
  std::vector<std::string> words_;  // words_[id]; sorted lookup below
  std::vector<std::pair<std::string, int64_t>> index_;
};

}  // namespace spotlight::scene

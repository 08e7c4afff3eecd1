// The prompt grammar of the shape world: GenEval's six task tags over three
// shapes, six colours, counts 1-4 and four relations, with GenEval's metadata
// (include / exclude clauses) next to the text so a scene can be scored
// against what the prompt asked for.
//
//   single_object  "a circle"
//   two_object     "a circle and a square"                 (two different shapes)
//   counting       "three triangles"                       (counts 2-4)
//   colors         "a red circle"
//   position       "a red square left of a green triangle" (colours optional)
//   color_attr     "a yellow circle and a blue square"     (different shapes, different colours)
//
// Metadata follows GenEval's: position lists the reference object first and
// the positioned one second, pointing back at clause 0 ("A left of B" gives
// include = [B, A{relation: left_of, target: 0}]); counting adds an exclude
// clause {shape, count + 1}. Positioned objects are always single, and the
// two shapes of a two-object prompt always differ, so each shape class of the
// detector maps to exactly one clause.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/scene/palette.h"
#include "models/scene/rng.h"

namespace spotlight::scene {

enum class Shape { square, circle, triangle };
inline constexpr int kNumShapes = 3;
inline constexpr std::array<Shape, kNumShapes> kShapes = {Shape::square, Shape::circle,
                                                          Shape::triangle};
std::string_view shape_name(Shape s);    // "circle"
std::string_view shape_plural(Shape s);  // "circles"

// Where the clause's objects must be relative to the target clause's objects;
// image coordinates, so "above" is smaller y.
enum class Relation { left_of, right_of, above, below };
inline constexpr int kNumRelations = 4;
inline constexpr std::array<Relation, kNumRelations> kRelations = {
    Relation::left_of, Relation::right_of, Relation::above, Relation::below};
std::string_view relation_text(Relation r);  // "left of"

enum class Tag { single_object, two_object, counting, colors, position, color_attr };
inline constexpr int kNumTags = 6;
inline constexpr std::array<Tag, kNumTags> kTags = {Tag::single_object, Tag::two_object,
                                                    Tag::counting,      Tag::colors,
                                                    Tag::position,      Tag::color_attr};
std::string_view tag_name(Tag t);  // "single_object", as GenEval spells it

inline constexpr int kMaxCount = 4;

struct Clause {
  Shape shape = Shape::square;
  int count = 1;
  std::optional<Color> color;
  std::optional<Relation> relation;
  int relation_target = 0;  // index into Prompt::include; meaningful with a relation
  bool operator==(const Clause&) const = default;
};

struct Prompt {
  Tag tag = Tag::single_object;
  std::vector<Clause> include;  // what the image must show
  std::vector<Clause> exclude;  // {shape, n}: at most n - 1 of that shape (strict score only)
  std::string text;             // lowercase words separated by single spaces
  bool operator==(const Prompt&) const = default;
};

// The text of a prompt with this tag and these include clauses, in the
// grammar above. The generator uses it; tests and tools can build prompts
// by hand with it.
std::string prompt_text(Tag tag, const std::vector<Clause>& include);

// The same prompt with its shape words exchanged, text and exclude clauses
// to match: a prompt of two clauses (always two different shapes) gets them
// swapped ("a red square left of a blue circle" -> "a red circle left of a
// blue square"), a prompt of one shape gets the next shape in kShapes's order
// ("three triangles" -> "three squares"). Rolled out on the same seed as the
// original, the blobs at the same places are wanted in other shapes, so only
// what the words change tells the pair apart (spotlight-train --shape-twins).
// The twin of a two-clause prompt's twin is the prompt itself.
Prompt shape_twin(const Prompt& p);

// Draws prompts; the same seed gives the same sequence on every platform.
class PromptGenerator {
 public:
  explicit PromptGenerator(uint64_t seed);
  Prompt next();         // a tag drawn uniformly, then its prompt
  Prompt next(Tag tag);  // a prompt of this tag
 private:
  Rng rng_;
};

// The fixed evaluation set: tags in turn (balanced), from a fixed seed, with
// repeats avoided where a tag has enough distinct prompts. Same n, same set.
// generator_seed: another seed gives another balanced set of the same kind
// (the trainer's validation set, kept apart from the reported one).
constexpr uint64_t kEvaluationPromptSeed = 0x5EED0E7A1ull;
constexpr uint64_t kValidationPromptSeed = 0x7A11DA7Eull;
std::vector<Prompt> evaluation_prompts(int n = 64, uint64_t generator_seed = kEvaluationPromptSeed);

// n prompts of PromptGenerator(seed).
std::vector<Prompt> training_prompts(int n, uint64_t seed);

}  // namespace spotlight::scene

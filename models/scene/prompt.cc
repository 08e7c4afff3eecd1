#include "models/scene/prompt.h"

#include <algorithm>
#include <stdexcept>

namespace spotlight::scene {

std::string_view shape_name(Shape s) {
  constexpr std::array<std::string_view, kNumShapes> kNames = {"square", "circle", "triangle"};
  return kNames[static_cast<int>(s)];
}

std::string_view shape_plural(Shape s) {
  constexpr std::array<std::string_view, kNumShapes> kNames = {"squares", "circles", "triangles"};
  return kNames[static_cast<int>(s)];
}

std::string_view relation_text(Relation r) {
  constexpr std::array<std::string_view, kNumRelations> kText = {"left of", "right of", "above",
                                                                 "below"};
  return kText[static_cast<int>(r)];
}

std::string_view tag_name(Tag t) {
  constexpr std::array<std::string_view, kNumTags> kNames = {
      "single_object", "two_object", "counting", "colors", "position", "color_attr"};
  return kNames[static_cast<int>(t)];
}

namespace {

constexpr std::array<std::string_view, kMaxCount + 1> kNumberWords = {"zero", "one", "two", "three",
                                                                      "four"};

// "a red circle", "an ...", "three triangles".
std::string noun_phrase(const Clause& c) {
  if (c.count < 1 || c.count > kMaxCount) throw std::invalid_argument("clause count out of 1..4");
  std::string rest;
  if (c.color) rest += std::string(color_name(*c.color)) + " ";
  rest += c.count == 1 ? shape_name(c.shape) : shape_plural(c.shape);
  std::string_view det = kNumberWords[c.count];
  if (c.count == 1)
    det = std::string_view("aeiou").find(rest[0]) != std::string_view::npos ? "an" : "a";
  return std::string(det) + " " + rest;
}

Clause clause(Shape shape, int count = 1, std::optional<Color> color = std::nullopt) {
  Clause c;
  c.shape = shape;
  c.count = count;
  c.color = color;
  return c;
}

// Two different members of {0 .. n-1}.
std::pair<int, int> two_distinct(Rng& rng, int n) {
  int a = rng.uniform_int(0, n - 1);
  int b = rng.uniform_int(0, n - 2);
  if (b >= a) ++b;
  return {a, b};
}

}  // namespace

std::string prompt_text(Tag tag, const std::vector<Clause>& include) {
  const size_t need =
      (tag == Tag::two_object || tag == Tag::position || tag == Tag::color_attr) ? 2 : 1;
  if (include.size() != need) throw std::invalid_argument("wrong number of clauses for the tag");
  switch (tag) {
    case Tag::single_object:
    case Tag::counting:
    case Tag::colors:
      return noun_phrase(include[0]);
    case Tag::two_object:
    case Tag::color_attr:
      return noun_phrase(include[0]) + " and " + noun_phrase(include[1]);
    case Tag::position:
      if (!include[1].relation) throw std::invalid_argument("position prompt without a relation");
      // GenEval's order: clause 1 is the positioned object, clause 0 the reference.
      return noun_phrase(include[1]) + " " + std::string(relation_text(*include[1].relation)) +
             " " + noun_phrase(include[0]);
  }
  throw std::invalid_argument("unknown tag");
}

Prompt shape_twin(const Prompt& p) {
  if (p.include.empty()) throw std::invalid_argument("shape_twin: a prompt without clauses");
  const Shape a = p.include[0].shape;
  Shape b = kShapes[(size_t(a) + 1) % kNumShapes];
  if (p.include.size() == 2) {
    b = p.include[1].shape;
    if (a == b) throw std::invalid_argument("shape_twin: a prompt of two clauses of one shape");
  } else if (p.include.size() != 1) {
    throw std::invalid_argument("shape_twin: a prompt of more than two clauses");
  }
  auto swap = [&](Clause c) {
    c.shape = c.shape == a ? b : c.shape == b ? a : c.shape;
    return c;
  };
  Prompt twin = p;
  for (auto& c : twin.include) c = swap(c);
  for (auto& c : twin.exclude) c = swap(c);
  twin.text = prompt_text(twin.tag, twin.include);
  return twin;
}

PromptGenerator::PromptGenerator(uint64_t seed) : rng_(seed) {}

Prompt PromptGenerator::next() {
  return next(kTags[rng_.below(kNumTags)]);
}

Prompt PromptGenerator::next(Tag tag) {
  auto shape = [&] { return kShapes[rng_.below(kNumShapes)]; };
  auto color = [&] { return kColors[rng_.below(kNumColors)]; };
  Prompt p;
  p.tag = tag;
  switch (tag) {
    case Tag::single_object:
      p.include = {clause(shape())};
      break;
    case Tag::two_object: {
      auto [a, b] = two_distinct(rng_, kNumShapes);
      p.include = {clause(kShapes[a]), clause(kShapes[b])};
      break;
    }
    case Tag::counting: {
      Shape s = shape();
      int n = rng_.uniform_int(2, kMaxCount);
      p.include = {clause(s, n)};
      // GenEval: "three triangles" also means "not four".
      p.exclude = {clause(s, n + 1)};
      break;
    }
    case Tag::colors: {
      const Shape s = shape();  // own statement: argument order is unspecified in C++
      p.include = {clause(s, 1, color())};
      break;
    }
    case Tag::position: {
      auto [ref, moved] = two_distinct(rng_, kNumShapes);
      Relation rel = kRelations[rng_.below(kNumRelations)];
      Clause reference = clause(kShapes[ref]);
      Clause positioned = clause(kShapes[moved]);
      positioned.relation = rel;
      positioned.relation_target = 0;
      if (rng_.coin()) {  // half the position prompts name colours too
        reference.color = color();
        positioned.color = color();
      }
      p.include = {reference, positioned};
      break;
    }
    case Tag::color_attr: {
      auto [a, b] = two_distinct(rng_, kNumShapes);
      auto [ca, cb] = two_distinct(rng_, kNumColors);
      p.include = {clause(kShapes[a], 1, kColors[ca]), clause(kShapes[b], 1, kColors[cb])};
      break;
    }
  }
  p.text = prompt_text(tag, p.include);
  return p;
}

std::vector<Prompt> evaluation_prompts(int n, uint64_t generator_seed) {
  if (n < 0) throw std::invalid_argument("negative prompt count");
  PromptGenerator gen(generator_seed);
  std::vector<Prompt> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    const Tag tag = kTags[i % kNumTags];
    // Redraw repeats a bounded number of times: single_object has only three
    // prompts, so beyond that repeats are allowed (GenEval repeats too).
    Prompt p = gen.next(tag);
    for (int tries = 0; tries < 32; ++tries) {
      auto same = [&](const Prompt& q) { return q.text == p.text; };
      if (std::none_of(out.begin(), out.end(), same)) break;
      p = gen.next(tag);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<Prompt> training_prompts(int n, uint64_t seed) {
  if (n < 0) throw std::invalid_argument("negative prompt count");
  PromptGenerator gen(seed);
  std::vector<Prompt> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) out.push_back(gen.next());
  return out;
}

}  // namespace spotlight::scene

// The head's task table (head/sharded_map.h): behaves as an unordered map,
// keeps elements where they are, and never grows all of itself at once.
#include "head/sharded_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <unordered_map>

namespace spotlight::head {
namespace {

using Table = ShardedMap<uint64_t, std::string>;

std::map<uint64_t, std::string> contents(const Table& t) {
  std::map<uint64_t, std::string> out;
  for (const auto& [k, v] : t) {
    EXPECT_TRUE(out.emplace(k, v).second) << "key " << k << " visited twice";
  }
  return out;
}

TEST(ShardedMap, AgreesWithAnOrdinaryMapUnderRandomOperations) {
  Table t;
  std::map<uint64_t, std::string> model;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200000; ++step) {
    // Keys as the head makes them: a caller's number high, a sequence low.
    const uint64_t key = (uint64_t{rng() % 3} << 40) | (rng() % 5000);
    switch (rng() % 5) {
      case 0:
      case 1: {
        auto [it, fresh] = t.try_emplace(key, std::to_string(step));
        auto [mit, mfresh] = model.try_emplace(key, std::to_string(step));
        ASSERT_EQ(fresh, mfresh);
        ASSERT_EQ(it->first, key);
        ASSERT_EQ(it->second, mit->second);
        break;
      }
      case 2:
        ASSERT_EQ(t.erase(key), model.erase(key));
        break;
      case 3: {
        auto it = t.find(key);
        if (it != t.end()) {
          t.erase(it);
          ASSERT_EQ(model.erase(key), 1u);
        } else {
          ASSERT_EQ(model.count(key), 0u);
        }
        break;
      }
      default:
        ASSERT_EQ(t.count(key), model.count(key));
        if (model.count(key)) {
          ASSERT_EQ(t.at(key), model.at(key));
          ASSERT_EQ(&t[key], &t.at(key));
        }
    }
    ASSERT_EQ(t.size(), model.size());
  }
  EXPECT_EQ(contents(t), model);
  EXPECT_THROW(t.at(uint64_t{1} << 60), std::out_of_range);
  t.clear();
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.begin(), t.end());
}

TEST(ShardedMap, ErasingWhileWalkingGoesOnFromTheNext) {
  Table t;
  for (uint64_t k = 0; k < 10000; ++k) t.try_emplace(k, std::to_string(k));
  size_t visited = 0;
  for (auto it = t.begin(); it != t.end();) {
    ++visited;
    it = it->first % 2 == 0 ? t.erase(it) : std::next(it);
  }
  EXPECT_EQ(visited, 10000u);
  ASSERT_EQ(t.size(), 5000u);
  for (const auto& [k, v] : t) EXPECT_EQ(k % 2, 1u);
  const Table& ct = t;
  Table::const_iterator from_mutable = t.find(9999);  // iterator converts to const_iterator
  EXPECT_EQ(from_mutable, ct.find(9999));
  EXPECT_EQ(ct.find(9998), ct.end());
}

TEST(ShardedMap, ElementsStayWhereTheyAreAsItGrows) {
  Table t;
  std::string* first = &t.try_emplace(1, "one").first->second;
  for (uint64_t k = 2; k < 300000; ++k) t.try_emplace(k, "x");
  EXPECT_EQ(first, &t.at(1));
  EXPECT_EQ(*first, "one");
}

// The promise the head relies on: a flood of consecutive ids (one caller's
// calls) makes the table grow a part at a time. Each growth step adds at most
// a small share of all buckets, where one std::unordered_map doubles whole.
TEST(ShardedMap, AFloodOfConsecutiveKeysGrowsOnePartAtATime) {
  Table t;
  std::unordered_map<uint64_t, std::string> whole;
  const uint64_t caller = uint64_t{5} << 40;
  double largest_step = 0, whole_largest_step = 0;
  size_t steps = 0;
  for (uint64_t seq = 1; seq <= 400000; ++seq) {
    const size_t before = t.bucket_count(), whole_before = whole.bucket_count();
    t.try_emplace(caller | seq, "");
    whole.try_emplace(caller | seq, "");
    if (t.bucket_count() != before) {
      ++steps;
      // Once every part holds two runs of ids (runs of 1,024 go to one part).
      if (seq > 2 * 64 * 1024) {
        largest_step = std::max(largest_step, double(t.bucket_count() - before) / t.bucket_count());
      }
    }
    if (whole.bucket_count() != whole_before && whole_before > 4096) {
      whole_largest_step = std::max(
          whole_largest_step, double(whole.bucket_count() - whole_before) / whole.bucket_count());
    }
  }
  EXPECT_GT(whole_largest_step, 0.4);  // what the head had: half the table rebuilt in one insert
  EXPECT_LT(largest_step, 0.05) << "a growth step rebuilt more than one part";
  EXPECT_GE(steps, 64u * 5) << "every part grows on its own";
}

}  // namespace
}  // namespace spotlight::head

// A pool's mailbox (head/mailbox.h): higher priority leaves first, arrival
// order within a priority, re-queued calls at the front of theirs; with
// aging, the earliest accepted - priority × aging first.
#include "head/mailbox.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <unordered_map>

namespace spotlight::head {
namespace {

using Ids = std::vector<uint64_t>;

std::vector<uint64_t> drain(Mailbox& m) {
  std::vector<uint64_t> out;
  while (!m.empty()) out.push_back(m.pop_front());
  return out;
}

TEST(Mailbox, HigherPriorityFirstAndArrivalOrderWithin) {
  Mailbox m;
  m.push_back(0, 1);
  m.push_back(5, 2);
  m.push_back(-3, 3);
  m.push_back(0, 4);
  m.push_back(5, 5);
  m.push_back(7, 6);
  EXPECT_EQ(m.size(), 6u);
  EXPECT_EQ(m.ids(), (Ids{6, 2, 5, 1, 4, 3}));
  EXPECT_EQ(m.depths(),
            (std::vector<std::pair<int32_t, uint64_t>>{{7, 1}, {5, 2}, {0, 2}, {-3, 1}}));
  EXPECT_EQ(drain(m), (Ids{6, 2, 5, 1, 4, 3}));
  EXPECT_TRUE(m.empty());
  EXPECT_TRUE(m.depths().empty());
}

TEST(Mailbox, ARequeuedCallGoesToTheFrontOfItsPriorityOnly) {
  Mailbox m;
  m.push_back(1, 10);
  m.push_back(0, 20);
  m.push_back(0, 21);
  m.push_front(0, 19);  // a lease of priority 0 lost: before 20, still after 10
  m.push_front(2, 30);  // one of priority 2: before everything
  EXPECT_EQ(drain(m), (Ids{30, 10, 19, 20, 21}));
}

TEST(Mailbox, OnlyPriorityZeroIsKeptWhenEmpty) {
  Mailbox m;
  // A caller that uses a new priority for every call leaves no levels behind.
  for (int32_t p = 1; p <= 1000; ++p) m.push_back(p, static_cast<uint64_t>(p));
  m.push_back(0, 5000);
  EXPECT_EQ(m.depths().size(), 1001u);
  for (int i = 0; i < 1000; ++i) m.pop_front();
  EXPECT_EQ(m.depths(), (std::vector<std::pair<int32_t, uint64_t>>{{0, 1}}));
  EXPECT_EQ(m.pop_front(), 5000u);
  // Below the kept (empty) level 0, lower priorities are still found.
  m.push_back(-1, 7);
  m.push_back(-2, 8);
  EXPECT_EQ(drain(m), (Ids{7, 8}));
}

TEST(Mailbox, EraseIfKeepsTheOrderOfTheRest) {
  Mailbox m;
  for (uint64_t id = 1; id <= 9; ++id) m.push_back(static_cast<int32_t>(id % 3), id);
  m.erase_if([](uint64_t id) { return id % 2 == 0; });
  EXPECT_EQ(m.size(), 5u);
  EXPECT_EQ(m.ids(), (Ids{5, 1, 7, 3, 9}));  // priority 2, then 1, then 0
}

// A mailbox with the accept time of each call (ms), as the head keeps it.
struct Aged {
  Mailbox m;
  std::unordered_map<uint64_t, int64_t> accepted;
  void push(int32_t priority, uint64_t id, int64_t at_ms) {
    accepted[id] = at_ms;
    m.push_back(priority, id);
  }
  std::vector<uint64_t> drain(int64_t aging_ms) {
    std::vector<uint64_t> out;
    while (!m.empty())
      out.push_back(m.pop_front(aging_ms, [&](uint64_t id) { return accepted.at(id); }));
    return out;
  }
};

TEST(Mailbox, AgingLetsALongWaitingCallOvertakeLaterHigherOnes) {
  auto fill = [](Aged& a) {
    a.push(0, 1, 0);    // key 0
    a.push(3, 2, 100);  // key 100 - 3 x 100 = -200
    a.push(1, 3, 150);  // key 50
    a.push(1, 4, 160);  // key 60
    a.push(2, 5, 250);  // key 50: ties with 3, and the higher priority goes first
    a.push(0, 6, 10);   // key 10
  };
  Aged aged;
  fill(aged);
  EXPECT_EQ(aged.drain(100), (Ids{2, 1, 6, 5, 3, 4}));
  // Aging 0 is strict priority, however long a call waited.
  Aged strict;
  fill(strict);
  EXPECT_EQ(strict.drain(0), (Ids{2, 5, 3, 4, 1, 6}));
  // The extremes fit: priority x 30 days does not overflow.
  Aged extreme;
  const int64_t month = int64_t{30} * 24 * 3600 * 1000;
  extreme.push(INT32_MIN, 1, 0);
  extreme.push(INT32_MAX, 2, 1'000'000);
  extreme.push(0, 3, 500);
  EXPECT_EQ(extreme.drain(month), (Ids{2, 3, 1}));
}

TEST(Mailbox, AgedOrderIsTheVirtualStartOrderForAnyMix) {
  // Calls accepted in time order over five priorities: the leases come out
  // sorted by accepted - priority x aging, ties by priority, then arrival.
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    Aged a;
    const int64_t aging = 1 + static_cast<int64_t>(rng() % 200);
    struct Call {
      int64_t key;
      int32_t priority;
      int64_t at;
      uint64_t id;
    };
    std::vector<Call> calls;
    int64_t clock = 0;
    for (uint64_t id = 1; id <= 200; ++id) {
      clock += static_cast<int64_t>(rng() % 50);
      const int32_t p = static_cast<int32_t>(rng() % 5) - 2;
      a.push(p, id, clock);
      calls.push_back({clock - int64_t{p} * aging, p, clock, id});
    }
    std::stable_sort(calls.begin(), calls.end(), [](const Call& x, const Call& y) {
      return std::tie(x.key, y.priority, x.at) < std::tie(y.key, x.priority, y.at);
    });
    Ids want;
    for (const auto& c : calls) want.push_back(c.id);
    EXPECT_EQ(a.drain(aging), want) << "aging " << aging;
  }
}

}  // namespace
}  // namespace spotlight::head

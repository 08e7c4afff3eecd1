// A pool's mailbox (head/mailbox.h): higher priority leaves first, arrival
// order within a priority, re-queued calls at the front of theirs.
#include "head/mailbox.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace spotlight::head

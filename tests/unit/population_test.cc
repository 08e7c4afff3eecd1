// spotlight-train --population's meeting of real processes: each member
// learns who scored best at an iteration only once all live members have
// reported it; members that finished or died are not waited for; and member
// 0 gathers the best kept checkpoint of all. The forked member checks its
// own side and says how it went in its exit status.
#include "tools/train/population.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace spotlight::tools {
namespace {

std::string test_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("spotlight-population-" + name + "-" + std::to_string(::getpid())))
      .string();
}

TEST(Population, MembersMeetOnTheBestRewardAndTheBestKeptIsGathered) {
  const auto dir = test_dir("meet");
  Population pop(dir, 2);
  if (pop.member() == 1) {
    // Exit codes say which expectation failed (gtest does not run here).
    const auto a = pop.meet(10, 0.5);
    if (a.member != 1 || a.reward != 0.5) ::_exit(2);
    const auto b = pop.meet(20, 0.4);
    if (b.member != 0 || b.reward != 0.6) ::_exit(3);
    const auto c = pop.meet(30, 0.7);  // a tie keeps its own
    if (c.member != 1) ::_exit(4);
    pop.finish(0.7, "/kept/with a space.pt");
    ::_exit(0);
  }
  const auto a = pop.meet(10, 0.3);
  EXPECT_EQ(a.member, 1);
  EXPECT_DOUBLE_EQ(a.reward, 0.5);
  const auto b = pop.meet(20, 0.6);
  EXPECT_EQ(b.member, 0);
  EXPECT_DOUBLE_EQ(b.reward, 0.6);
  const auto c = pop.meet(30, 0.7);
  EXPECT_EQ(c.member, 0);
  pop.finish(0.6, "/kept/zero.pt");
  const auto out = pop.gather();  // fails if the member's checks did
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->member, 1);
  EXPECT_DOUBLE_EQ(out->reward, 0.7);
  EXPECT_EQ(out->kept_path, "/kept/with a space.pt");
  std::filesystem::remove_all(dir);
}

TEST(Population, AMemberThatFinishedIsNotWaitedFor) {
  const auto dir = test_dir("finished");
  Population pop(dir, 2);
  if (pop.member() == 1) {
    pop.finish(0.2, "/kept/one.pt");  // ends before the others' next meeting
    ::_exit(0);
  }
  const auto a = pop.meet(10, 0.1);  // returns: member 1 will never report 10
  EXPECT_EQ(a.member, 0);
  pop.finish(0.1, "/kept/zero.pt");
  const auto out = pop.gather();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->member, 1);
  std::filesystem::remove_all(dir);
}

TEST(Population, AMemberThatDiedIsNotWaitedForAndFailsTheGathering) {
  const auto dir = test_dir("died");
  Population pop(dir, 2);
  if (pop.member() == 1) ::_exit(7);  // no report, no marker
  const auto a = pop.meet(10, 0.1);
  EXPECT_EQ(a.member, 0);
  pop.finish(0.1, "/kept/zero.pt");
  EXPECT_FALSE(pop.gather().has_value());
  std::filesystem::remove_all(dir);
}

TEST(Population, StateFilesOlderThanTheLastMeetingAreRemoved) {
  const auto dir = test_dir("states");
  Population pop(dir, 1);
  for (int iter : {10, 20, 30}) {
    std::ofstream(pop.state_path(0, iter)) << "state";
    pop.meet(iter, 0.1);
  }
  EXPECT_FALSE(std::filesystem::exists(pop.state_path(0, 10)));
  EXPECT_FALSE(std::filesystem::exists(pop.state_path(0, 20)));
  EXPECT_TRUE(std::filesystem::exists(pop.state_path(0, 30)));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spotlight::tools

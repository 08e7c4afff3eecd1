// spotlight-train --keep-best through the real binaries: the run evaluates on
// the validation set, writes --out only when the validation reward beats every
// earlier one, and the file it leaves is the best evaluation's weights, as
// spotlight-eval --validation reads them back. The same run exercises nft's
// --positive-only, --reference-weight and --epochs. Seed exploration
// (--explore) and the shape-soft reward (--reward soft, spotlight-eval
// --shape-report) run through the same binaries.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/command.h"

namespace spotlight {
namespace {

using testing::run_command;

TEST(TrainKeepBest, WritesOnlyImprovementsAndLeavesTheBestWeights) {
  const auto out = (std::filesystem::temp_directory_path() / "spotlight-keep-best-test.pt").string();
  std::filesystem::remove(out);
  const std::string ck = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  // A high learning rate so that the evaluations differ from one iteration to the next.
  auto train = run_command(std::string(SPOTLIGHT_TRAIN_BIN) + " --checkpoint " + ck +
                           " --objective nft --noise-level 0 --positive-only --reference-weight 0.5 --epochs 2"
                           " --keep-best --iterations 5 --eval-every 1 --eval-seeds 1 --lr 1e-3 --prompts 2"
                           " --group 4 --steps 4 --eval-steps 4 --out " + out);
  ASSERT_EQ(train.code, 0) << train.out;

  double best = -1;
  int best_iter = -1, evals = 0, iters = 0, written = 0;
  std::istringstream lines(train.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "iter") {
      ++iters;
      // Every pass after the first update sees weights that left the reference.
      EXPECT_GT(j["reference_mse"].get<double>(), 0) << line;
    } else if (j["event"] == "eval") {
      ++evals;
      EXPECT_EQ(j["set"], "validation") << line;
      const double r = j["reward"].get<double>();
      EXPECT_EQ(j["written"].get<bool>(), r > best) << line;
      if (r > best) {
        best = r;
        best_iter = j["iter"].get<int>();
        ++written;
      }
    }
  }
  EXPECT_EQ(iters, 5);
  EXPECT_EQ(evals, 6);  // iteration 0 and after each of the 5
  EXPECT_GE(written, 1);

  // The file holds the best evaluation's weights: its step, and the same reward
  // when spotlight-eval samples the same validation set again.
  auto eval = run_command(std::string(SPOTLIGHT_EVAL_BIN) + " --checkpoint " + out +
                          " --validation --seeds 1 --steps 4");
  ASSERT_EQ(eval.code, 0) << eval.out;
  EXPECT_NE(eval.out.find("nft step " + std::to_string(best_iter) + ")"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("(validation set)"), std::string::npos) << eval.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(eval.out, m, std::regex("reward=([0-9.]+)"))) << eval.out;
  EXPECT_NEAR(std::stod(m[1]), best, 1e-4) << eval.out;
  std::filesystem::remove(out);
}

// --explore K: each iteration rolls out K seeds per prompt and trains on the
// --group of them that spread the most (the selection itself: select_test).
TEST(TrainExplore, RollsOutKSeedsPerPromptAndTrainsOnAGroupOfThem) {
  const auto out = (std::filesystem::temp_directory_path() / "spotlight-explore-test.pt").string();
  const std::string ck = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  const std::string base = std::string(SPOTLIGHT_TRAIN_BIN) + " --checkpoint " + ck;
  auto train = run_command(base + " --objective nft --noise-level 0 --explore 8 --group 4 --prompts 2"
                                  " --iterations 2 --steps 4 --eval-steps 4 --eval-seeds 1 --eval-every 10 --out " +
                           out);
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("2 prompts x 4 seeds per iteration (chosen from 8 explored)"), std::string::npos)
      << train.out;
  int iters = 0;
  std::istringstream lines(train.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line);
    if (j["event"] != "iter") continue;
    ++iters;
    EXPECT_EQ(j["explored"].get<int>(), 8) << line;
    EXPECT_GE(j["selected_std"].get<double>(), 0) << line;
  }
  EXPECT_EQ(iters, 2);
  std::filesystem::remove(out);

  // What it cannot do is refused up front, saying why.
  auto too_few = run_command(base + " --objective nft --explore 4 --group 4");
  EXPECT_NE(too_few.code, 0);
  EXPECT_NE(too_few.out.find("--explore must exceed --group"), std::string::npos) << too_few.out;
  auto grpo = run_command(base + " --objective grpo --explore 8 --group 4");
  EXPECT_NE(grpo.code, 0);
  EXPECT_NE(grpo.out.find("it needs --objective nft"), std::string::npos) << grpo.out;
}

// --reward soft trains on the shape-soft reward (the reward itself:
// soft_test) and logs the mini-GenEval mean it stands in for; evaluations
// stay mini-GenEval. spotlight-eval --shape-report prints both figures.
TEST(TrainSoftReward, TrainsOnTheShapedRewardAndEvaluatesOnMiniGenEval) {
  const auto out = (std::filesystem::temp_directory_path() / "spotlight-soft-test.pt").string();
  const std::string ck = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  const std::string base = std::string(SPOTLIGHT_TRAIN_BIN) + " --checkpoint " + ck;
  auto train = run_command(base + " --objective nft --noise-level 0 --reward soft --soft-width 3 --group 4"
                                  " --prompts 2 --iterations 2 --steps 4 --eval-steps 4 --eval-seeds 1"
                                  " --eval-every 2 --out " + out);
  ASSERT_EQ(train.code, 0) << train.out;
  int iters = 0, evals = 0;
  std::istringstream lines(train.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "eval") ++evals;
    if (j["event"] != "iter") continue;
    ++iters;
    // GenEval's partial credit can go below 0 (too many objects); the soft
    // reward is an expectation of it.
    EXPECT_GE(j["geneval_mean"].get<double>(), -4) << line;
    EXPECT_LE(j["geneval_mean"].get<double>(), 1) << line;
    EXPECT_LE(j["reward_mean"].get<double>(), 1) << line;
  }
  EXPECT_EQ(iters, 2);
  EXPECT_EQ(evals, 2);  // iterations 0 and 2

  auto eval = run_command(std::string(SPOTLIGHT_EVAL_BIN) + " --checkpoint " + out +
                          " --seeds 1 --steps 4 --shape-report");
  ASSERT_EQ(eval.code, 0) << eval.out;
  std::smatch m, r;
  ASSERT_TRUE(std::regex_search(eval.out, m,
                                std::regex("shape-soft reward (-?[0-9.]+), with every shape call favourable (-?[0-9.]+)")))
      << eval.out;
  ASSERT_TRUE(std::regex_search(eval.out, r, std::regex("reward=(-?[0-9.]+)"))) << eval.out;
  EXPECT_GE(std::stod(m[2]), std::stod(r[1])) << eval.out;  // favourable calls only add
  std::filesystem::remove(out);

  auto strict = run_command(base + " --objective nft --reward soft --select strict");
  EXPECT_NE(strict.code, 0);
  EXPECT_NE(strict.out.find("--select strict sets r from mini-GenEval"), std::string::npos) << strict.out;
}

}  // namespace
}  // namespace spotlight

// spotlight-train --keep-best through the real binaries: the run evaluates on
// the validation set, writes --out only when the validation reward beats every
// earlier one, and the file it leaves is the best evaluation's weights, as
// spotlight-eval --validation reads them back. The same run exercises nft's
// --positive-only, --reference-weight and --epochs. Seed exploration
// (--explore), the shape-soft reward (--reward soft, spotlight-eval
// --shape-report), the return to the best weights (--rollback) and a
// population of trainers (--population) run through the same binaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "support/command.h"

namespace spotlight {
namespace {

using testing::run_command;

// spotlight-train from the shipped checkpoint, with `args`.
std::string train_command(const std::string& args) {
  return std::string(SPOTLIGHT_TRAIN_BIN) + " --checkpoint " + SPOTLIGHT_SOURCE_DIR +
         "/models/checkpoints/tiny.pt" + args;
}

// A quick DRaFT run that evaluates on the validation set after every iteration.
constexpr const char* kQuickDraft =
    " --objective draft --draft-steps 2 --eval-steps 4 --prompts 2 --group 2 --eval-seeds 1 --eval-every 1"
    " --threads 1 --keep-best";

// The JSON lines of a tool's output.
std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// `command` exits non-zero and says `why`.
void expect_refused(const std::string& command, const std::string& why) {
  auto r = run_command(command);
  EXPECT_NE(r.code, 0) << command;
  EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
}

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

// --rollback N: after N validation evaluations in a row without a new best,
// the trained weights return to the best evaluation's and training goes on
// with the learning rate times --rollback-lr. A learning rate high enough to
// wreck the model makes the first evaluations worse; a vanishing factor then
// leaves the returned weights where they are, so every evaluation after a
// return scores the best's reward again.
TEST(TrainRollback, ReturnsToTheBestWeightsAfterEvaluationsWithoutANewBest) {
  const auto out = (std::filesystem::temp_directory_path() / "spotlight-rollback-test.pt").string();
  auto train = run_command(train_command(std::string(kQuickDraft) +
                                         " --iterations 6 --lr 1e-2 --rollback 2 --rollback-lr 1e-9 --out " + out));
  ASSERT_EQ(train.code, 0) << train.out;
  struct Eval {
    int iter;
    double reward;
  };
  std::vector<Eval> evals;
  std::vector<nlohmann::json> rollbacks;
  for (const auto& j : json_lines(train.out)) {
    if (j["event"] == "eval") evals.push_back({j["iter"].get<int>(), j["reward"].get<double>()});
    if (j["event"] == "rollback") rollbacks.push_back(j);
  }
  ASSERT_EQ(evals.size(), 7u) << train.out;  // iteration 0 and after each of the 6

  // The rule, replayed on the logged rewards: where the run must have returned, and to what.
  double best = -1;
  int best_iter = 0, stale = 0;
  size_t next = 0;
  double lr = 1e-2;
  bool returned = false;
  for (const auto& e : evals) {
    if (returned) {
      EXPECT_NEAR(e.reward, best, 1e-9) << "iteration " << e.iter << ": not the best's weights";
    }
    returned = false;
    if (e.reward > best) {
      best = e.reward;
      best_iter = e.iter;
      stale = 0;
    } else if (++stale >= 2 && e.iter < 6) {  // never after the last evaluation
      stale = 0;
      lr *= 1e-9;
      returned = true;
      ASSERT_LT(next, rollbacks.size()) << "no return after iteration " << e.iter << "\n" << train.out;
      EXPECT_EQ(rollbacks[next]["iter"].get<int>(), e.iter);
      EXPECT_EQ(rollbacks[next]["to_iter"].get<int>(), best_iter);
      EXPECT_DOUBLE_EQ(rollbacks[next]["best"].get<double>(), best);
      EXPECT_NEAR(rollbacks[next]["lr"].get<double>(), lr, lr * 1e-6);
      ++next;
    }
  }
  EXPECT_EQ(next, rollbacks.size()) << train.out;
  EXPECT_GE(rollbacks.size(), 1u) << "the wrecking learning rate never made an evaluation worse\n" << train.out;
  std::filesystem::remove(out);

  // Without a best to return to, or a factor without a return, it is refused up front.
  expect_refused(train_command(" --objective draft --rollback 2"), "it needs --keep-best");
  expect_refused(train_command(" --objective draft --keep-best --rollback-lr 0.5"), "--rollback-lr belongs to --rollback");
}

// --population 2: two member processes on other seeds meet at each
// evaluation, where the one that scored lower on the validation set goes on
// from the other's weights; --out gets the best evaluation of either
// (the meeting itself: population_test).
TEST(TrainPopulation, MembersGoOnFromTheBetterAndOutHoldsTheBestOfAll) {
  const auto out = (std::filesystem::temp_directory_path() / "spotlight-population-test.pt").string();
  std::filesystem::remove(out);
  auto train = run_command(train_command(std::string(kQuickDraft) +
                                         " --iterations 3 --lr 3e-3 --ema 0.5 --population 2 --out " + out));
  ASSERT_EQ(train.code, 0) << train.out;
  std::map<std::pair<int, int>, double> reward;  // (member, iteration)
  std::map<std::pair<int, int>, nlohmann::json> exploits;
  std::map<int, int> iters;
  nlohmann::json summary;
  for (const auto& j : json_lines(train.out)) {
    if (j["event"] == "population") {
      summary = j;
      continue;
    }
    const int m = j["member"].get<int>();
    if (j["event"] == "iter") ++iters[m];
    if (j["event"] == "eval") reward[{m, j["iter"].get<int>()}] = j["reward"].get<double>();
    if (j["event"] == "exploit") {
      EXPECT_TRUE(exploits.emplace(std::pair{m, j["iter"].get<int>()}, j).second) << j.dump();
    }
  }
  EXPECT_EQ(iters[0], 3);
  EXPECT_EQ(iters[1], 3);
  ASSERT_EQ(reward.size(), 8u) << train.out;  // iterations 0-3 of each member
  // The members share one stderr: each names itself, on lines of its own.
  for (int m : {0, 1}) {
    const std::string who = "(^|\n)spotlight-train member " + std::to_string(m) + ": ";
    EXPECT_TRUE(std::regex_search(
        train.out, std::regex(who + "draft, tiny DiT from [^\n]*, budget [0-9.]+ min\n")))
        << train.out;
    EXPECT_TRUE(std::regex_search(train.out,
                                  std::regex(who + "3 iterations in [0-9.]+ s, wrote [^\n]*member" +
                                             std::to_string(m) + "\\.pt\n")))
        << train.out;
  }

  // The members met after the evaluations of iterations 0-2 (not after the
  // last): whoever scored lower took the other's weights. The log prints 6
  // digits, so rewards that print alike are left out of the check.
  for (int m : {0, 1})
    for (int i : {0, 1, 2}) {
      const double own = reward[{m, i}], other = reward[{1 - m, i}];
      const auto e = exploits.find({m, i});
      if (std::abs(own - other) < 1e-5) continue;
      ASSERT_EQ(e != exploits.end(), other > own) << "member " << m << ", iteration " << i << "\n" << train.out;
      if (e == exploits.end()) continue;
      EXPECT_EQ(e->second["from"].get<int>(), 1 - m);
      EXPECT_DOUBLE_EQ(e->second["reward"].get<double>(), other);
    }
  EXPECT_EQ(exploits.count({0, 3}) + exploits.count({1, 3}), 0u);

  // --out holds the best evaluation of either member, as spotlight-eval reads it back.
  double best = -1, kept_best = -1;
  for (const auto& [key, r] : reward) best = std::max(best, r);
  ASSERT_FALSE(summary.is_null()) << train.out;
  for (int i = 0; i <= 3; ++i) kept_best = std::max(kept_best, reward[{summary["kept_member"].get<int>(), i}]);
  EXPECT_DOUBLE_EQ(kept_best, best) << train.out;  // members that scored alike may both hold it
  EXPECT_DOUBLE_EQ(summary["reward"].get<double>(), best);
  EXPECT_FALSE(std::filesystem::exists(out + ".population"));
  auto eval = run_command(std::string(SPOTLIGHT_EVAL_BIN) + " --checkpoint " + out +
                          " --validation --seeds 1 --steps 4");
  ASSERT_EQ(eval.code, 0) << eval.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(eval.out, m, std::regex("reward=([0-9.]+)"))) << eval.out;
  EXPECT_NEAR(std::stod(m[1]), best, 1e-4) << eval.out;
  std::filesystem::remove(out);

  expect_refused(train_command(" --objective draft --population 2"),
                 "--population's members meet on the validation set");
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
  expect_refused(base + " --objective nft --explore 4 --group 4", "--explore must exceed --group");
  expect_refused(base + " --objective grpo --explore 8 --group 4", "it needs --objective nft");
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

  expect_refused(base + " --objective nft --reward soft --select strict",
                 "--select strict sets r from mini-GenEval");
}

}  // namespace
}  // namespace spotlight

// spotlight-train --population N: N trainers, one process each, that meet at
// every evaluation and copy the weights of whichever of them scored best on
// the validation set (population-based training's exploit step, Jaderberg et
// al. 2017, arXiv 1711.09846).
//
// Why. A DRaFT run's outcome is mostly luck: the same command on two
// machines (bit-level differences in the BLAS) or on two seeds ends 0.39 to
// 0.50 on the 512 images (docs/benchmarks.md, issue 4). On this 2-core
// machine a --threads 1 trainer leaves a core idle; a second member on it
// draws a second trajectory, and at each evaluation both go on from the
// better of the two, so the budget is spent extending the lucky branch.
//
// How. The members share a folder. At an evaluation a member writes its
// state (a file of the caller's making, at state_path) and then its report
// of that iteration (the reward, by an atomic rename); it then waits for
// every other live member's report of the same iteration. A member that ends
// writes a done marker, so no one waits for it. No LibTorch here: the
// caller saves and loads the weights.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace spotlight::tools {

class Population {
 public:
  // Creates `dir` (emptied first) and forks size - 1 members; the calling
  // process is member 0. Call before LibTorch starts its thread pools.
  Population(std::string dir, int size);
  ~Population();  // member 0: stops members still running (after an error)
  Population(const Population&) = delete;
  Population& operator=(const Population&) = delete;

  int member() const { return member_; }
  const std::string& dir() const { return dir_; }
  int size() const { return size_; }

  // Where this member writes its state for `iter`, and where member k's is.
  std::string state_path(int k, int iter) const;

  struct Best {
    int member = 0;
    double reward = 0;
  };
  // Publishes this member's reward at `iter` (its state must already be at
  // state_path(member(), iter)), waits for the other live members' reports of
  // `iter`, and returns the member with the highest reward among them and
  // this one (on a tie this one, or the first of the others to report it;
  // no copy is made for a tie). Older state files of this member are removed.
  Best meet(int iter, double reward);

  // This member trains no more: nobody waits for it. Also records its best
  // validation reward and the checkpoint that holds it.
  void finish(double best_reward, const std::string& kept_path);

  // Member 0: waits for the other members to exit and returns the kept
  // checkpoint with the highest best reward among all members' (nothing if
  // a member failed). Other members return nothing.
  struct Outcome {
    int member = 0;
    double reward = 0;
    std::string kept_path;
  };
  std::optional<Outcome> gather();

 private:
  std::string file(int k, const std::string& what) const;
  std::string report_path(int k, int iter) const;
  bool alive(int k) const;

  std::string dir_;
  int size_ = 1, member_ = 0;
  std::vector<pid_t> pids_;  // member 0's children, index k - 1
  pid_t parent_ = 0;
  std::vector<int> published_;  // this member's state iterations still on disk
  bool gathered_ = false;
};

}  // namespace spotlight::tools

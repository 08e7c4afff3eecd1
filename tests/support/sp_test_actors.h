// An actor type for the SP group tests: each step all-reduces a value from
// every rank through the group's communicator and commits the running total.
#pragma once

#include <cstdint>
#include <vector>

#include "spotlight/spotlight.h"
#include "spotlight/sp_member.h"

namespace testing_actors {

struct SpProgress {
  int64_t step = 0;
  int64_t total = 0;
  MSGPACK_DEFINE(step, total)
};

struct SpReport {
  int64_t total = 0;       // sum over the steps of the group's all-reduce
  int64_t started_at = 0;  // the step the finishing run started from
  bool resumed = false;
  uint32_t attempt = 0;
  uint64_t epoch = 0;      // the formation that finished the task
  std::string group;
  std::vector<uint64_t> members;  // by rank
  int64_t pid = 0;         // rank 0's process
  int32_t formations = 0;  // communicators rank 0 built so far
  int64_t steps_run = 0;   // steps rank 0's actor computed in its life, in every attempt
  MSGPACK_DEFINE(total, started_at, resumed, attempt, epoch, group, members, pid, formations, steps_run)
};

class SpSummer {
 public:
  // `steps` steps of `step_ms` of work each; rank r contributes (step + 1) * (r + 1).
  SpReport run(spotlight::TaskContext& ctx, int64_t steps, int64_t step_ms);

 private:
  int64_t steps_run_ = 0;
  spotlight::SpMember sp_{spotlight::collective::GlooOptions{"127.0.0.1", std::chrono::seconds(5)}};
};

// What run() returns for `steps` steps in a group of `d` members.
inline int64_t sp_expected_total(int64_t steps, int64_t d) { return d * (d + 1) / 2 * steps * (steps + 1) / 2; }

}  // namespace testing_actors

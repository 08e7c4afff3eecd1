// Actor types the benchmarks and the replay drive; registered in the
// spotlight binary, so every `spotlight join` node can host them.
#pragma once

#include <cstdint>
#include <string>

#include "spotlight/codec.h"
#include "spotlight/sp_member.h"
#include "spotlight/spotlight.h"
#include "spotlight/task.h"

namespace spotlight::bench {

struct Echo {
  int64_t ping(int64_t x) { return x; }
};

// Synchronous calls of Echo::ping(i), i in [0, n), one at a time; checks
// every echo. Returns calls/s.
double echo_sync(ActorHandle<Echo>& h, int64_t n);

// Pipelined calls of Echo::ping(i), i in [0, n), keeping up to `window` in
// flight, as Ray's async benchmark does; checks every echo. Returns calls/s.
double echo_pipelined(ActorHandle<Echo>& h, int64_t n, int64_t window);

// Holds its calls until opened, so that a benchmark can fill a mailbox
// behind a member that is busy. Every Gate of one node process shares one
// latch: a member of another pool on that node opens it while this one waits.
struct Gate {
  int64_t pass(int64_t x);  // returns x once the latch is open
  void open();
  void close();
};

// Calls an Echo actor from inside its task (TaskContext::runtime()), as
// Ray's n:n benchmark does from its client actors; returns calls/s.
struct Caller {
  double run(TaskContext& ctx, std::string echo, int64_t n, int64_t window);
};

// A rollout-like task: `steps` steps of `step_ms` each, committing after each
// step and yielding on notice. With SPOTLIGHT_STEP_LOG set to a folder, every
// finished step is appended there before its commit, so a replay can count
// the steps that were computed more than once.
struct StepResult {
  int64_t key = 0;
  uint32_t attempt = 0;
  bool resumed = false;
  MSGPACK_DEFINE(key, attempt, resumed)
};
struct Stepper {
  StepResult run(TaskContext& ctx, int64_t key, int64_t steps, int64_t step_ms);
};

// Puts and gets one object through its node's store, timing the call
// inside the actor (what an explorer waits for).
struct ObjectTiming {
  int64_t ns = 0;
  uint64_t bytes = 0;
  uint64_t local_hits = 0, fetches = 0;  // the node's store, after the call
  MSGPACK_DEFINE(ns, bytes, local_hits, fetches)
};
struct ObjectBench {
  ObjectTiming put(TaskContext& ctx, std::string id, int64_t bytes);
  ObjectTiming get(TaskContext& ctx, std::string id);
};

// An SP task of `steps` steps (`step_ms` of work and one all-reduce each)
// that commits after every step. It reports, for the attempt that finished,
// when its communicator was ready and when its first step was done
// (CLOCK_MONOTONIC, the same clock in every process of the machine).
struct SpStepTimes {
  int64_t comm_ready_ns = 0;
  int64_t first_step_ns = 0;
  bool resumed = false;
  uint32_t attempt = 0;
  uint64_t epoch = 0;
  MSGPACK_DEFINE(comm_ready_ns, first_step_ns, resumed, attempt, epoch)
};
struct SpStepper {
  SpMember sp;
  SpStepTimes run(TaskContext& ctx, int64_t steps, int64_t step_ms);
};

}  // namespace spotlight::bench

#include "support/test_actors.h"

#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "spotlight/actor.h"

namespace testing_actors {

int64_t Recorder::record(int64_t key) {
  ++executions_;
  seen_.insert(key);
  return key;
}

Recorder::Stats Recorder::stats() const {
  return Stats{executions_, static_cast<int64_t>(seen_.size())};
}

std::string Worker::who() {
  return std::to_string(getpid()) + ":" + std::to_string(reinterpret_cast<uintptr_t>(this));
}

int64_t Worker::fail(std::string message) { throw std::invalid_argument(message); }

int64_t Ledger::pid() const { return getpid(); }

StepReport Stepper::run(spotlight::TaskContext& ctx, int64_t key, int64_t steps, int64_t step_ms) {
  StepState s = ctx.resume_value<StepState>().value_or(StepState{});
  StepReport r{key, ctx.attempt(), ctx.resumed(), s.step, 0, getpid()};
  while (s.step < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));  // the step's work
    ++s.step;
    ++r.ran;
    ctx.commit_value(s);
    if (ctx.should_yield() && s.step < steps) ctx.yield();
  }
  return r;
}

}  // namespace testing_actors

SPOTLIGHT_ACTOR(testing_actors::Recorder, record, stats)
SPOTLIGHT_ACTOR(testing_actors::Stepper, run)
SPOTLIGHT_ACTOR(testing_actors::Ledger, add, total, pid)
SPOTLIGHT_ACTOR(testing_actors::Worker, who, twice, fail, echo_many, blob)

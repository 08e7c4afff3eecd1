#include "support/test_actors.h"

#include <unistd.h>

#include <stdexcept>

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

}  // namespace testing_actors

SPOTLIGHT_ACTOR(testing_actors::Recorder, record, stats)
SPOTLIGHT_ACTOR(testing_actors::Worker, who, twice, fail, echo_many, blob)

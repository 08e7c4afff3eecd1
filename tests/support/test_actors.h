// Actor types for the tests.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "spotlight/codec.h"

namespace testing_actors {

// Counts how often each key ran: a task that ran twice shows up here.
class Recorder {
 public:
  int64_t record(int64_t key);
  struct Stats {
    int64_t executions = 0;
    int64_t distinct = 0;
    MSGPACK_DEFINE(executions, distinct)
  };
  Stats stats() const;

 private:
  std::set<int64_t> seen_;
  int64_t executions_ = 0;
};

// Tells which member ran a call, and fails on request.
class Worker {
 public:
  std::string who();
  int64_t twice(int64_t x) { return 2 * x; }
  int64_t fail(std::string message);  // throws std::invalid_argument(message)
  std::vector<std::string> echo_many(std::vector<std::string> v) { return v; }
  std::string blob(int64_t bytes) { return std::string(static_cast<size_t>(bytes), 'b'); }
};

}  // namespace testing_actors

// The hello example's actor types.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "spotlight/codec.h"
#include "spotlight/task.h"

namespace hello {

// A user struct crossing the wire: MSGPACK_DEFINE lists its fields.
struct Tally {
  int64_t value = 0;
  int64_t calls = 0;
  MSGPACK_DEFINE(value, calls)
};

// A lone stateful actor.
class Counter {
 public:
  int64_t add(int64_t x) {
    tally_.value += x;
    tally_.calls += 1;
    return tally_.value;
  }
  Tally get() const { return tally_; }

 private:
  Tally tally_;
};

// Stateless workers in a pool; `where` says which member ran a call.
class Square {
 public:
  int64_t square(int64_t x) { return x * x; }
  std::string where();
  // Throws for negative input, to show errors reaching the caller.
  double checked_sqrt(double x);
};

// An actor that calls other actors: its method fans out to the Square pool
// through its task's own runtime and adds up the answers.
class Summer {
 public:
  int64_t sum_of_squares(spotlight::TaskContext& ctx, std::string pool, int64_t n);
};

}  // namespace hello

#include "hello_actors.h"

#include <unistd.h>

#include <cmath>

#include "spotlight/spotlight.h"

namespace hello {

std::string Square::where() {
  // The actor's address within its node process: distinct per member.
  return std::to_string(getpid()) + "/" + std::to_string(reinterpret_cast<uintptr_t>(this));
}

double Square::checked_sqrt(double x) {
  if (x < 0) throw std::domain_error("checked_sqrt of a negative number: " + std::to_string(x));
  return std::sqrt(x);
}

int64_t Summer::sum_of_squares(spotlight::TaskContext& ctx, std::string pool, int64_t n) {
  // These calls are the task's own: if this node dies mid-way, the task's
  // next run gets the answers already computed instead of asking again.
  auto squares = ctx.runtime().actor<Square>(pool);
  std::vector<spotlight::Future<int64_t>> fs;
  for (int64_t i = 0; i < n; ++i) fs.push_back(squares.call(&Square::square, i));
  int64_t sum = 0;
  for (auto& f : fs) sum += f.get();
  return sum;
}

}  // namespace hello

SPOTLIGHT_ACTOR(hello::Counter, add, get)
SPOTLIGHT_ACTOR(hello::Summer, sum_of_squares)
SPOTLIGHT_ACTOR(hello::Square, square, where, checked_sqrt)

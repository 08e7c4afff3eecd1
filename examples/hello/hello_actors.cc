#include "hello_actors.h"

#include <unistd.h>

#include <cmath>

#include "spotlight/actor.h"

namespace hello {

std::string Square::where() {
  // The actor's address within its node process: distinct per member.
  return std::to_string(getpid()) + "/" + std::to_string(reinterpret_cast<uintptr_t>(this));
}

double Square::checked_sqrt(double x) {
  if (x < 0) throw std::domain_error("checked_sqrt of a negative number: " + std::to_string(x));
  return std::sqrt(x);
}

}  // namespace hello

SPOTLIGHT_ACTOR(hello::Counter, add, get)
SPOTLIGHT_ACTOR(hello::Square, square, where, checked_sqrt)

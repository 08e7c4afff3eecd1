// Actor types the runtime benchmarks call; registered in the spotlight binary,
// so every `spotlight join` node can host them.
#pragma once

#include <cstdint>

namespace spotlight::bench {
struct Echo {
  int64_t ping(int64_t x) { return x; }
};
}  // namespace spotlight::bench

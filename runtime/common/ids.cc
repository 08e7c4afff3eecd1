#include "common/ids.h"

#include <unistd.h>

#include <random>

namespace spotlight::common {

std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  uint64_t v = rng();
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = hex[(v >> (4 * i)) & 15];
  return s;
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace spotlight::common

// Ids of calls made by running tasks ("child calls").
//
// A task that crashes runs again, and so would every call it made, unless the
// second run's calls are recognised as the first run's. A child call's id is
// therefore derived, not numbered: the high bit set, the rest a hash of the
// parent task's id, the call's key (its number since the parent's last
// commit, the SP rank, and that commit), and what it calls. A parent that runs again and makes the
// same calls in the same order makes them under the same ids, and the head answers them from the
// tasks it already holds. A call that differs gets another id and is a new call. Client ids keep
// bit 63 clear (client numbers stay below 2^23), so the two never meet.
//
// The hash is spelled out here, not taken from std::hash, so that nodes built
// by different compilers derive the same ids.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace spotlight::wire {

inline constexpr uint64_t kChildIdBit = uint64_t{1} << 63;

inline bool is_child_id(uint64_t id) {
  return (id & kChildIdBit) != 0;
}

namespace detail {
// splitmix64's finaliser: every input bit reaches every output bit.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
// Absorbs `bytes` 8 at a time, then their count (so "a" and "a\0" differ).
inline uint64_t absorb(uint64_t h, std::string_view bytes) {
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = mix64(h ^ tail) + 0x9e3779b97f4a7c15ull;
  return mix64(h ^ bytes.size());
}
}  // namespace detail

// What a task's calls are numbered under: the commit its run last made or
// resumed from (a hash of the committed bytes), 0 before any commit.
inline uint64_t commit_lineage(std::string_view committed) {
  const uint64_t h = detail::absorb(0x636f6d6d6974ull, committed);  // "commit"
  return h == 0 ? 1 : h;
}

// The key of a task's call: its number since the lineage began, the SP rank,
// and the lineage. A run resumed from a commit numbers its calls as the run
// that made the commit did after it, so the two meet; calls made before the
// commit keep keys of their own.
inline uint64_t child_call_key(uint64_t lineage, int32_t rank, uint32_t seq) {
  const uint64_t number = (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | seq;
  return lineage == 0 ? number : detail::mix64(lineage ^ detail::mix64(number));
}

inline uint64_t child_call_id(uint64_t parent, uint64_t child_key, std::string_view mailbox,
                              std::string_view method, std::string_view args) {
  uint64_t h = detail::mix64(parent ^ 0x5370'6f74'6c69'6768ull);  // "Spotligh"
  h = detail::mix64(h ^ child_key);
  h = detail::absorb(h, mailbox);
  h = detail::absorb(h, method);
  h = detail::absorb(h, args);
  return kChildIdBit | (h & ~kChildIdBit);
}

}  // namespace spotlight::wire

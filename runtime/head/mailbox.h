// A pool's mailbox: the ids of its accepted, unleased calls, in the order the
// head leases them. Higher priority first (CallOptions::priority); within a
// priority, arrival order, except that a call re-queued after a lost or
// handed-back lease goes back to the front of its priority.
//
// With aging (Placement::aging), a waiting call gains one level per `aging`
// it has waited: of the first calls of each priority, the one with the
// earliest virtual start, accepted - priority × aging, leaves first. Within a
// priority the first call is the earliest accepted, so only the fronts need
// comparing, and a turn that leases pays one look-up per non-empty level.
//
// Nearly every call has priority 0, so that level is kept even when empty
// (no allocation per call on the synchronous path); other levels exist only
// while they hold calls, so a caller that uses a new priority per call
// cannot make the head keep empty levels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

namespace spotlight::head {

class Mailbox {
 public:
  void push_back(int32_t priority, uint64_t id) {
    levels_[priority].push_back(id);
    ++size_;
  }
  void push_front(int32_t priority, uint64_t id) {
    levels_[priority].push_front(id);
    ++size_;
  }
  // The next call to lease. Requires !empty().
  uint64_t pop_front() { return take_front(first_nonempty()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The next call to lease under aging of `aging_ms` per level, given the
  // time each call was accepted (`accepted_ms(id)`, ms on any one clock).
  // Ties go to the higher priority. Requires !empty() and 0 <= aging_ms <=
  // 30 days, so that priority × aging fits 63 bits.
  template <class AcceptedMs>
  uint64_t pop_front(int64_t aging_ms, AcceptedMs accepted_ms) {
    return take_front(next_level(aging_ms, accepted_ms));
  }
  // The call pop_front(aging_ms, accepted_ms) would take, and its priority,
  // left in place. Requires !empty().
  template <class AcceptedMs>
  std::pair<uint64_t, int32_t> front(int64_t aging_ms, AcceptedMs accepted_ms) {
    auto it = next_level(aging_ms, accepted_ms);
    return {it->second.front(), it->first};
  }
  // A call's place in the order under aging: the earliest leaves first.
  static int64_t virtual_start(int64_t accepted_ms, int32_t priority, int64_t aging_ms) {
    return accepted_ms - int64_t{priority} * aging_ms;
  }
  // Removes the ids for which `drop(id)` is true.
  template <class Pred>
  void erase_if(Pred drop) {
    for (auto it = levels_.begin(); it != levels_.end();) {
      size_ -= std::erase_if(it->second, drop);
      if (it->second.empty() && it->first != 0) {
        it = levels_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Every id, in lease order without aging (status and tests).
  std::vector<uint64_t> ids() const {
    std::vector<uint64_t> out;
    out.reserve(size_);
    for (const auto& [_, level] : levels_) out.insert(out.end(), level.begin(), level.end());
    return out;
  }
  // Calls waiting per priority, highest first.
  std::vector<std::pair<int32_t, uint64_t>> depths() const {
    std::vector<std::pair<int32_t, uint64_t>> out;
    for (const auto& [p, level] : levels_) {
      if (!level.empty()) out.emplace_back(p, level.size());
    }
    return out;
  }

 private:
  using Levels = std::map<int32_t, std::deque<uint64_t>, std::greater<>>;
  uint64_t take_front(Levels::iterator it) {
    const uint64_t id = it->second.front();
    it->second.pop_front();
    --size_;
    if (it->second.empty() && it->first != 0) levels_.erase(it);
    return id;
  }
  template <class AcceptedMs>
  Levels::iterator next_level(int64_t aging_ms, AcceptedMs& accepted_ms) {
    auto best = first_nonempty();
    if (aging_ms == 0) return best;
    auto key = [&](Levels::iterator it) {
      return virtual_start(accepted_ms(it->second.front()), it->first, aging_ms);
    };
    int64_t best_key = key(best);
    for (auto it = std::next(best); it != levels_.end(); ++it) {
      if (it->second.empty()) continue;  // the kept level 0
      const int64_t k = key(it);
      if (k < best_key) {  // strictly: a tie stays with the higher priority
        best = it;
        best_key = k;
      }
    }
    return best;
  }
  Levels::iterator first_nonempty() {
    auto it = levels_.begin();
    while (it->second.empty()) ++it;  // at most the kept level 0 is empty
    return it;
  }

  Levels levels_;
  size_t size_ = 0;
};

}  // namespace spotlight::head

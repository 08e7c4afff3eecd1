// A pool's latency histograms as the head keeps them (spotlight::Latency is
// what status shows). Observed on the head's hot path: a bucket is found by
// comparing integer nanoseconds, with no allocation.
#pragma once

#include <array>
#include <cstdint>

#include "spotlight/status.h"
#include "transport/socket.h"

namespace spotlight::head {

class LatencyHistogram {
 public:
  void observe(transport::Clock::duration d);
  // The time from `from` to `to`; nothing when `from` is unset (a call a
  // restarted head took over: its start is unknown).
  void observe(transport::Clock::time_point from, transport::Clock::time_point to) {
    if (from != transport::Clock::time_point{}) observe(to - from);
  }
  Latency status() const;

 private:
  std::array<uint64_t, kLatencyBoundsS.size() + 1> counts_{};
  uint64_t sum_ns_ = 0;
  uint64_t count_ = 0;
};

// The three a pool keeps (PoolStatus::waited, ran, answered).
struct PoolLatency {
  LatencyHistogram waited, ran, answered;
};

}  // namespace spotlight::head

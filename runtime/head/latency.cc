#include "head/latency.h"

#include <algorithm>
#include <cstdio>

namespace spotlight {

namespace {

constexpr auto kBoundsNs = [] {
  std::array<int64_t, kLatencyBoundsS.size()> ns{};
  for (size_t i = 0; i < ns.size(); ++i)
    ns[i] = static_cast<int64_t>(kLatencyBoundsS[i] * 1e9 + 0.5);
  return ns;
}();

}  // namespace

double Latency::quantile(double q) const {
  if (count == 0 || buckets.size() != kLatencyBoundsS.size() + 1) return 0;
  const double want = std::clamp(q, 0.0, 1.0) * static_cast<double>(count);
  uint64_t below = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] == 0 || static_cast<double>(below + buckets[i]) < want) {
      below += buckets[i];
      continue;
    }
    if (i == kLatencyBoundsS.size()) return kLatencyBoundsS.back();
    const double lo = i == 0 ? 0 : kLatencyBoundsS[i - 1];
    const double hi = kLatencyBoundsS[i];
    const double within = (want - static_cast<double>(below)) / static_cast<double>(buckets[i]);
    return lo + (hi - lo) * std::clamp(within, 0.0, 1.0);
  }
  return kLatencyBoundsS.back();
}

std::string human_seconds(double s) {
  char buf[32];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.0f us", s * 1e6);
  } else if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  }
  return buf;
}

std::string p50_p99(const Latency& l) {
  return l.count == 0 ? "-"
                      : human_seconds(l.quantile(0.5)) + " / " + human_seconds(l.quantile(0.99));
}

namespace head {

void LatencyHistogram::observe(transport::Clock::duration d) {
  const int64_t ns =
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  // Nearly every call lands in the first few buckets: a scan beats a search.
  size_t i = 0;
  while (i < kBoundsNs.size() && ns > kBoundsNs[i]) ++i;
  counts_[i] += 1;
  sum_ns_ += static_cast<uint64_t>(ns);
  count_ += 1;
}

Latency LatencyHistogram::status() const {
  Latency l;
  l.count = count_;
  l.sum_s = static_cast<double>(sum_ns_) / 1e9;
  if (count_ > 0) l.buckets.assign(counts_.begin(), counts_.end());
  return l;
}

}  // namespace head
}  // namespace spotlight

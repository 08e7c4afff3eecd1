// Spot preemption traces: the event log format (`t_ms,add|remove,node`) and
// the GCP count format (`YYYY-MM-DD, HH:MM:SS, running`), both read into one
// list of add/remove events (see ../shared/traces/README.md).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spotlight::replay {

struct TraceEvent {
  int64_t t_ms = 0;  // since the start of the trace
  bool add = true;   // false: a preemption
  std::string node;
};

struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses either format (told apart by the first data line). Count traces
// become anonymous events; victims of a decrease are drawn with `seed`.
// Throws TraceError naming the line of anything malformed.
std::vector<TraceEvent> parse_trace(const std::string& text, uint64_t seed = 42);
std::vector<TraceEvent> read_trace(const std::string& path, uint64_t seed = 42);

// Events in [from_ms, to_ms): nodes live at from_ms are added at from_ms;
// removes of nodes added before the slice are kept. Times are shifted so the
// slice starts at 0.
std::vector<TraceEvent> slice(const std::vector<TraceEvent>& events, int64_t from_ms, int64_t to_ms);

// The largest number of nodes live at once.
int max_live(const std::vector<TraceEvent>& events);

}  // namespace spotlight::replay

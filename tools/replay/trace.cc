#include "tools/replay/trace.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace spotlight::replay {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(trim(f));
  return out;
}

bool is_number(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

[[noreturn]] void bad(int line, const std::string& why) {
  throw TraceError("trace line " + std::to_string(line) + ": " + why);
}

// Seconds since the epoch of "YYYY-MM-DD" "HH:MM:SS" (UTC, days from civil).
int64_t to_seconds(const std::string& date, const std::string& time, int line) {
  int y, mo, d, h, mi, s;
  if (std::sscanf(date.c_str(), "%d-%d-%d", &y, &mo, &d) != 3 ||
      std::sscanf(time.c_str(), "%d:%d:%d", &h, &mi, &s) != 3) {
    bad(line, "expected YYYY-MM-DD, HH:MM:SS, COUNT");
  }
  y -= mo <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = era * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + s;
}

}  // namespace

std::vector<TraceEvent> parse_trace(const std::string& text, uint64_t seed) {
  std::vector<TraceEvent> events;
  std::stringstream in(text);
  std::string raw;
  int line = 0;
  enum { kUnknown, kEvents, kCounts } format = kUnknown;
  std::set<std::string> live;
  std::vector<std::string> live_anon;  // count format: nodes in order of arrival
  std::mt19937_64 rng(seed);
  int64_t first_s = -1, last_t = -1;
  int next_anon = 1;
  while (std::getline(in, raw)) {
    ++line;
    std::string l = trim(raw);
    if (l.empty()) continue;
    auto f = split(l);
    if (format == kUnknown) format = (f.size() == 3 && is_number(f[0])) ? kEvents : kCounts;
    if (format == kEvents) {
      if (f.size() != 3 || !is_number(f[0])) bad(line, "expected t_ms,add|remove,node");
      TraceEvent e{std::stoll(f[0]), f[1] == "add", f[2]};
      if (f[1] != "add" && f[1] != "remove") bad(line, "event must be add or remove, not '" + f[1] + "'");
      if (e.node.empty()) bad(line, "empty node id");
      if (e.t_ms < last_t) bad(line, "time goes backwards");
      if (e.add && !live.insert(e.node).second) bad(line, e.node + " added twice");
      if (!e.add && !live.erase(e.node)) bad(line, e.node + " removed while not live");
      last_t = e.t_ms;
      events.push_back(std::move(e));
    } else {
      if (f.size() != 3 || !is_number(f[2])) bad(line, "expected YYYY-MM-DD, HH:MM:SS, COUNT");
      int64_t s = to_seconds(f[0], f[1], line);
      if (first_s < 0) first_s = s;
      int64_t t = (s - first_s) * 1000;
      if (t < last_t) bad(line, "time goes backwards");
      last_t = t;
      size_t want = std::stoul(f[2]);
      while (live_anon.size() < want) {
        live_anon.push_back("gcp" + std::to_string(next_anon++));
        events.push_back(TraceEvent{t, true, live_anon.back()});
      }
      while (live_anon.size() > want) {
        std::uniform_int_distribution<size_t> pick(0, live_anon.size() - 1);
        size_t i = pick(rng);
        events.push_back(TraceEvent{t, false, live_anon[i]});
        live_anon.erase(live_anon.begin() + static_cast<long>(i));
      }
    }
  }
  if (events.empty()) throw TraceError("trace has no events");
  return events;
}

std::vector<TraceEvent> read_trace(const std::string& path, uint64_t seed) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw TraceError("cannot read trace " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_trace(ss.str(), seed);
}

std::vector<TraceEvent> slice(const std::vector<TraceEvent>& events, int64_t from_ms, int64_t to_ms) {
  std::vector<TraceEvent> out;
  std::set<std::string> live;
  for (const auto& e : events) {
    if (e.t_ms < from_ms) {
      if (e.add) live.insert(e.node); else live.erase(e.node);
      continue;
    }
    if (e.t_ms >= to_ms) break;
    if (out.empty() && !live.empty()) {
      for (const auto& n : live) out.push_back(TraceEvent{0, true, n});
    }
    out.push_back(TraceEvent{e.t_ms - from_ms, e.add, e.node});
  }
  if (out.empty()) {
    for (const auto& n : live) out.push_back(TraceEvent{0, true, n});
  }
  return out;
}

int max_live(const std::vector<TraceEvent>& events) {
  int live = 0, most = 0;
  for (const auto& e : events) {
    live += e.add ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

}  // namespace spotlight::replay

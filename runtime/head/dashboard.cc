#include "head/dashboard.h"

#include <algorithm>
#include <sstream>

namespace spotlight::head {
namespace {

constexpr int kRefreshSeconds = 2;

const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.1em; margin-top: 1.6em; }
.sub { color: #666; }
table { border-collapse: collapse; margin-top: 0.4em; }
th, td { padding: 0.25em 0.8em; text-align: left; border-bottom: 1px solid #e4e4e4; }
th { background: #f5f5f5; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.tiles { display: flex; gap: 1em; flex-wrap: wrap; margin-top: 1em; }
.tile { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 1em; min-width: 8em; }
.tile b { display: block; font-size: 1.5em; }
.bar { width: 8em; height: 0.7em; background: #eee; display: inline-block; border-radius: 3px; }
.bar i { display: block; height: 100%; background: #4a7; border-radius: 3px; }
.alive { color: #2a7; } .draining { color: #c80; } .dead { color: #c33; }
)";

std::string num(uint64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string td(const std::string& text) {
  return "<td>" + html_escape(text) + "</td>";
}
std::string td_num(uint64_t v) {
  return "<td class=\"n\">" + num(v) + "</td>";
}

std::string bar(int64_t used, int64_t total) {
  const int64_t pct = total > 0 ? std::clamp<int64_t>(used * 100 / total, 0, 100) : 0;
  return "<span class=\"bar\"><i style=\"width:" + std::to_string(pct) + "%\"></i></span> " +
         num(static_cast<uint64_t>(std::max<int64_t>(used, 0))) + " / " +
         num(static_cast<uint64_t>(std::max<int64_t>(total, 0)));
}

std::string tile(const std::string& label, const std::string& value) {
  return "<div class=\"tile\"><b>" + value + "</b>" + html_escape(label) + "</div>";
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string dashboard_html(const ClusterStatus& s) {
  int64_t slots = 0, used = 0;
  size_t alive = 0, draining = 0, dead = 0;
  for (const auto& n : s.nodes) {
    if (n.state == "dead") {
      ++dead;
      continue;
    }
    (n.state == "draining" ? draining : alive) += 1;
    slots += n.slots;
    used += n.used;
  }
  uint64_t queued = 0, leased = 0;
  int64_t members = 0, placed = 0;
  for (const auto& p : s.pools) {
    queued += p.queued;
    leased += p.leased;
    members += p.size;
    placed += p.placed;
  }

  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\""
    << kRefreshSeconds << "\"><title>Spotlight cluster</title><style>" << kStyle
    << "</style></head><body>";
  o << "<h1>Spotlight cluster</h1><div class=\"sub\">head boot " << s.boot << " &middot; store "
    << html_escape(s.store) << " &middot; reloads every " << kRefreshSeconds
    << " s &middot; <a href=\"/metrics\">/metrics</a> &middot; <a "
       "href=\"/status.json\">/status.json</a></div>";

  o << "<div class=\"tiles\">" << tile("nodes alive", num(alive)) << tile("draining", num(draining))
    << tile("dead", num(dead)) << tile("slots used", bar(used, slots))
    << tile("actors placed", bar(placed, members)) << tile("calls waiting", num(queued))
    << tile("calls running", num(leased)) << tile("calls held", num(s.tasks_live)) << "</div>";

  o << "<h2>Nodes</h2><table><tr><th>id</th><th>host</th><th>market</th><th>state</th><th>slots</"
       "th>"
       "<th>running</th><th>last heard</th><th>pid</th></tr>";
  for (const auto& n : s.nodes) {
    o << "<tr>" << td(n.id) << td(n.host) << td(n.market) << "<td class=\"" << html_escape(n.state)
      << "\">" << html_escape(n.state) << "</td><td>" << bar(n.used, n.slots) << "</td>"
      << td_num(n.running) << "<td class=\"n\">"
      << num(static_cast<uint64_t>(std::max<int64_t>(0, n.last_heartbeat_ms))) << " ms ago</td>"
      << td_num(static_cast<uint64_t>(std::max<int64_t>(0, n.pid))) << "</tr>";
  }
  o << "</table>";

  o << "<h2>Pools (mailboxes)</h2><table><tr><th>name</th><th>type</th><th>market</th><th>members "
       "placed</th>"
       "<th>waiting</th><th>running</th><th>waiting by priority</th><th>results</th>"
       "<th>call p50 / p99</th></tr>";
  for (const auto& p : s.pools) {
    std::string prio;
    for (const auto& [level, n] : p.by_priority)
      prio += std::to_string(level) + ": " + num(n) + "  ";
    o << "<tr>" << td(p.name) << td(p.type) << td(p.market) << "<td>" << bar(p.placed, p.size)
      << "</td>" << td_num(p.queued) << td_num(p.leased) << td(prio) << td_num(p.answered.count)
      << td(p50_p99(p.answered)) << "</tr>";
  }
  o << "</table>";
  for (const auto& p : s.pools) {
    if (!p.placement.empty())
      o << "<p class=\"sub\">" << html_escape(p.name) << " is placed: " << html_escape(p.placement)
        << "</p>";
    if (!p.waiting_for.empty())
      o << "<p class=\"sub\">" << html_escape(p.name) << ": " << html_escape(p.waiting_for)
        << "</p>";
  }

  if (!s.groups.empty()) {
    o << "<h2>Sequence-parallel groups</h2><table><tr><th>group</th><th>epoch</th><th>members (by "
         "rank)</th>"
         "<th>task</th></tr>";
    for (const auto& g : s.groups) {
      std::string ranks;
      for (uint64_t m : g.members) ranks += (ranks.empty() ? "" : ", ") + std::to_string(m);
      o << "<tr>" << td(g.name) << td_num(g.epoch) << td(ranks)
        << td(g.task ? std::to_string(g.task) : "idle") << "</tr>";
    }
    o << "</table>";
  }

  o << "<h2>Actors</h2>";
  const size_t shown = std::min(s.actors.size(), kDashboardActors);
  if (shown < s.actors.size()) {
    o << "<p class=\"sub\">The first " << num(shown) << " of " << num(s.actors.size())
      << " actors; <a href=\"/status.json\">/status.json</a> lists all.</p>";
  }
  o << "<table><tr><th>id</th><th>pool</th><th>node</th><th>state</th><th>incarnation</"
       "th><th>running</th>"
       "<th>completed</th></tr>";
  for (size_t i = 0; i < shown; ++i) {
    const auto& a = s.actors[i];
    o << "<tr>" << td_num(a.id) << td(a.pool) << td(a.node.empty() ? "-" : a.node) << td(a.state)
      << td_num(a.incarnation) << td_num(a.leased) << td_num(a.completed) << "</tr>";
  }
  o << "</table>";

  o << "<h2>Counters</h2><details><summary>" << num(s.counters.size())
    << " counters since the head started</summary><table>";
  for (const auto& [name, value] : s.counters) o << "<tr>" << td(name) << td_num(value) << "</tr>";
  o << "</table></details></body></html>\n";
  return o.str();
}

}  // namespace spotlight::head

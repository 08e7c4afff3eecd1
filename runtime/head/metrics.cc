#include "head/metrics.h"

#include <map>
#include <sstream>
#include <tuple>

namespace spotlight::head {

namespace {

// Metric names allow [a-zA-Z0-9_:]; counters are the head's own snake_case
// names, but nothing malformed may reach a scraper.
std::string metric_name(const std::string& raw) {
  std::string out = raw;
  for (char& c : out) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) c = '_';
  }
  return out;
}

class Writer {
 public:
  // Starts a family: its HELP and TYPE lines.
  void family(const std::string& name, const char* type, const std::string& help) {
    name_ = name;
    out_ << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
  }
  // One sample of the current family; `labels` as name=value pairs.
  template <class V>
  void sample(std::initializer_list<std::pair<const char*, std::string>> labels, V value) {
    out_ << name_;
    if (labels.size() > 0) {
      out_ << '{';
      bool first = true;
      for (const auto& [k, v] : labels) {
        out_ << (first ? "" : ",") << k << "=\"" << prometheus_label(v) << '"';
        first = false;
      }
      out_ << '}';
    }
    out_ << ' ' << value << '\n';
  }
  // One labelled histogram of the current family: cumulative buckets, then
  // its sum and count.
  void histogram(const char* label, const std::string& value, const Latency& l) {
    const std::string lv = std::string(label) + "=\"" + prometheus_label(value) + '"';
    uint64_t below = 0;
    for (size_t i = 0; i <= kLatencyBoundsS.size(); ++i) {
      below += l.buckets.empty() ? 0 : l.buckets[i];
      out_ << name_ << "_bucket{" << lv << ",le=\"";
      if (i < kLatencyBoundsS.size()) {
        out_ << kLatencyBoundsS[i];
      } else {
        out_ << "+Inf";
      }
      out_ << "\"} " << below << '\n';
    }
    out_ << name_ << "_sum{" << lv << "} " << l.sum_s << '\n';
    out_ << name_ << "_count{" << lv << "} " << l.count << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::string name_;
};

std::string node_state(const NodeStatus& n) {
  return n.state == "alive" && n.notice_ms_ago >= 0 ? "draining" : n.state;
}

}  // namespace

std::string prometheus_label(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string prometheus_text(const ClusterStatus& s) {
  Writer w;
  w.family("spotlight_head_boot", "gauge", "Starts of the head over its store so far.");
  w.sample({}, s.boot);
  w.family("spotlight_tasks_live", "gauge",
           "Calls accepted and not yet acknowledged by their caller.");
  w.sample({}, s.tasks_live);

  std::map<std::string, uint64_t> by_state{{"alive", 0}, {"draining", 0}, {"dead", 0}};
  for (const auto& n : s.nodes) by_state[node_state(n)] += 1;
  w.family("spotlight_nodes", "gauge", "Nodes by state (draining: alive, with notice).");
  for (const auto& [state, count] : by_state) w.sample({{"state", state}}, count);
  w.family("spotlight_node_slots", "gauge", "Slots of each node.");
  for (const auto& n : s.nodes)
    w.sample({{"node", n.id}, {"market", n.market}, {"state", node_state(n)}}, n.slots);
  w.family("spotlight_node_slots_used", "gauge", "Slots of each node its actors occupy.");
  for (const auto& n : s.nodes) w.sample({{"node", n.id}}, n.used);
  w.family("spotlight_node_tasks_leased", "gauge", "Tasks leased to each node and not yet back.");
  for (const auto& n : s.nodes) w.sample({{"node", n.id}}, n.running);
  w.family("spotlight_node_heartbeat_age_seconds", "gauge",
           "Seconds since the head last heard from each node.");
  for (const auto& n : s.nodes)
    w.sample({{"node", n.id}}, static_cast<double>(n.last_heartbeat_ms) / 1000);

  w.family("spotlight_pool_members", "gauge",
           "Members of each actor pool (a lone actor is a pool of one).");
  for (const auto& p : s.pools)
    w.sample({{"pool", p.name}, {"type", p.type}, {"market", p.market}}, p.size);
  w.family("spotlight_pool_members_placed", "gauge", "Members of each pool placed on a node.");
  for (const auto& p : s.pools) w.sample({{"pool", p.name}}, p.placed);
  w.family("spotlight_pool_queued", "gauge", "Calls waiting in each pool's mailbox.");
  for (const auto& p : s.pools) w.sample({{"pool", p.name}}, p.queued);
  w.family("spotlight_pool_queued_by_priority", "gauge",
           "Calls waiting in each pool's mailbox, by priority (levels with calls only).");
  for (const auto& p : s.pools) {
    for (const auto& [priority, n] : p.by_priority) {
      w.sample({{"pool", p.name}, {"priority", std::to_string(priority)}}, n);
    }
  }
  w.family("spotlight_pool_leased", "gauge", "Calls of each pool leased to its actors.");
  for (const auto& p : s.pools) w.sample({{"pool", p.name}}, p.leased);

  // Latency histograms of the pools that served calls in this boot (a
  // cluster of 10,000 idle pools of one adds no lines).
  const std::tuple<const char*, Latency PoolStatus::*, const char*> latencies[] = {
      {"spotlight_pool_call_wait_seconds", &PoolStatus::waited,
       "Seconds a call waited in its pool's mailbox, each time it left it for a lease."},
      {"spotlight_pool_call_run_seconds", &PoolStatus::ran,
       "Seconds from a call's lease to its result from the actor."},
      {"spotlight_pool_call_seconds", &PoolStatus::answered,
       "Seconds from a call's acceptance to its result from the actor, as the head saw them."}};
  for (const auto& [name, field, help] : latencies) {
    w.family(name, "histogram", help);
    for (const auto& p : s.pools) {
      if ((p.*field).count > 0) w.histogram("pool", p.name, p.*field);
    }
  }

  std::map<std::string, uint64_t> groups;
  for (const auto& p : s.pools) groups[p.name] = 0;
  for (const auto& g : s.groups) groups[g.pool] += 1;
  w.family("spotlight_sp_groups", "gauge", "Sequence-parallel groups formed in each pool.");
  for (const auto& [pool, n] : groups) w.sample({{"pool", pool}}, n);

  for (const auto& [name, value] : s.counters) {
    const std::string m = "spotlight_" + metric_name(name) + "_total";
    w.family(m, "counter", "The head's '" + metric_name(name) + "' counter since it started.");
    w.sample({}, value);
  }
  return w.str();
}

std::optional<std::string> MetricsExchange::request(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t ticket = ++asked_;
  if (!cv_.wait_for(l, timeout, [&] { return served_ >= ticket; })) return std::nullopt;
  return text_;
}

void MetricsExchange::serve(const std::function<std::string()>& render) {
  // served_ is written by this thread only: no lock to read it here.
  const uint64_t asked = asked_.load();
  if (asked == served_) return;
  std::string text = render();  // without the lock: askers may come meanwhile
  {
    std::lock_guard<std::mutex> l(mu_);
    text_ = std::move(text);
    served_ = asked;
  }
  cv_.notify_all();
}

}  // namespace spotlight::head

// ClusterStatus as JSON, for the CLI and the head's HTTP endpoint alike.
#include <nlohmann/json.hpp>

#include "spotlight/status.h"

namespace spotlight {

namespace {

// Counts per bucket beside their bounds, and the quantiles people look at.
nlohmann::json latency_json(const Latency& l) {
  return {{"count", l.count},         {"sum_s", l.sum_s},          {"p50_s", l.quantile(0.5)},
          {"p90_s", l.quantile(0.9)}, {"p99_s", l.quantile(0.99)}, {"bounds_s", kLatencyBoundsS},
          {"buckets", l.buckets}};
}

}  // namespace

std::string status_json(const ClusterStatus& s) {
  nlohmann::json j;
  j["boot"] = s.boot;
  j["store"] = s.store;
  j["tasks_live"] = s.tasks_live;
  j["counters"] = s.counters;
  j["metrics_address"] = s.metrics_address;
  j["nodes"] = nlohmann::json::array();
  j["pools"] = nlohmann::json::array();
  j["actors"] = nlohmann::json::array();
  j["groups"] = nlohmann::json::array();
  for (const auto& n : s.nodes) {
    j["nodes"].push_back({{"id", n.id},
                          {"host", n.host},
                          {"market", n.market},
                          {"state", n.state},
                          {"slots", n.slots},
                          {"used", n.used},
                          {"pid", n.pid},
                          {"last_heartbeat_ms", n.last_heartbeat_ms},
                          {"running", n.running},
                          {"notice_ms_ago", n.notice_ms_ago},
                          {"emptied_ms_ago", n.emptied_ms_ago},
                          {"gone_ms_ago", n.gone_ms_ago},
                          {"object_address", n.object_address}});
  }
  for (const auto& p : s.pools) {
    j["pools"].push_back({{"name", p.name},
                          {"type", p.type},
                          {"market", p.market},
                          {"size", p.size},
                          {"placed", p.placed},
                          {"queued", p.queued},
                          {"leased", p.leased},
                          {"queued_by_priority", p.by_priority},
                          {"aging_ms", p.aging_ms},
                          {"waiting_for", p.waiting_for},
                          {"placement", p.placement},
                          {"waited", latency_json(p.waited)},
                          {"ran", latency_json(p.ran)},
                          {"answered", latency_json(p.answered)}});
  }
  for (const auto& a : s.actors) {
    j["actors"].push_back({{"id", a.id},
                           {"pool", a.pool},
                           {"node", a.node},
                           {"state", a.state},
                           {"incarnation", a.incarnation},
                           {"leased", a.leased},
                           {"completed", a.completed}});
  }
  for (const auto& g : s.groups) {
    j["groups"].push_back({{"pool", g.pool},
                           {"name", g.name},
                           {"epoch", g.epoch},
                           {"members", g.members},
                           {"task", g.task}});
  }
  // Names come from users: replace bytes that are not UTF-8 rather than throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace spotlight

// `spotlight status` and `spotlight stop`.
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "spotlight/spotlight.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {

std::string default_address() {
  const char* env = std::getenv("SPOTLIGHT_ADDRESS");
  return env ? env : "127.0.0.1:6380";
}

void print_latency(const ClusterStatus& s) {
  bool any = false;
  for (const auto& p : s.pools) any |= p.answered.count > 0 || p.waited.count > 0;
  if (!any) return;
  std::cout << "\nLATENCY (p50 / p99 in this boot of the head; bucketed, so within a bucket)\n"
            << std::setw(20) << "pool" << std::setw(10) << "results" << std::setw(24)
            << "waited in mailbox" << std::setw(24) << "ran (lease to result)"
            << "call (accepted to result)\n";
  for (const auto& p : s.pools) {
    if (p.answered.count == 0 && p.waited.count == 0) continue;
    std::cout << std::setw(20) << p.name << std::setw(10) << p.answered.count << std::setw(24)
              << p50_p99(p.waited) << std::setw(24) << p50_p99(p.ran) << p50_p99(p.answered)
              << "\n";
  }
}

void print_table(const ClusterStatus& s) {
  std::cout << "head boot " << s.boot << ", store " << s.store << ", " << s.tasks_live
            << " live tasks\n";
  if (!s.metrics_address.empty())
    std::cout << "status page: http://" << s.metrics_address << "/ (metrics at /metrics)\n";
  std::cout << "\nNODES\n";
  std::cout << std::left << std::setw(28) << "id" << std::setw(10) << "market" << std::setw(8)
            << "state" << std::setw(10) << "slots" << std::setw(10) << "running"
            << "last heartbeat\n";
  for (const auto& n : s.nodes) {
    std::cout << std::setw(28) << n.id << std::setw(10) << n.market << std::setw(8) << n.state
              << std::setw(10) << (std::to_string(n.used) + "/" + std::to_string(n.slots))
              << std::setw(10) << n.running << n.last_heartbeat_ms << " ms ago\n";
  }
  std::cout << "\nPOOLS (mailboxes)\n"
            << std::setw(20) << "name" << std::setw(16) << "type" << std::setw(10) << "market"
            << std::setw(10) << "members" << std::setw(10) << "queued" << std::setw(10) << "leased"
            << "queued by priority\n";
  for (const auto& p : s.pools) {
    std::cout << std::setw(20) << p.name << std::setw(16) << p.type << std::setw(10) << p.market
              << std::setw(10) << (std::to_string(p.placed) + "/" + std::to_string(p.size))
              << std::setw(10) << p.queued << std::setw(10) << p.leased;
    // Only where calls of more than the default priority wait: "3:40 0:12".
    if (p.by_priority.size() > 1 || (p.by_priority.size() == 1 && p.by_priority[0].first != 0)) {
      for (const auto& [priority, n] : p.by_priority) std::cout << priority << ":" << n << " ";
    }
    if (p.aging_ms > 0) std::cout << "(aging +1 per " << human_seconds(p.aging_ms / 1000.0) << ")";
    std::cout << "\n";
  }
  for (const auto& p : s.pools) {
    if (!p.placement.empty()) std::cout << "  " << p.name << " is placed: " << p.placement << "\n";
    if (!p.waiting_for.empty()) std::cout << "  " << p.name << ": " << p.waiting_for << "\n";
  }
  std::cout << "\nACTORS\n"
            << std::setw(6) << "id" << std::setw(20) << "pool" << std::setw(28) << "node"
            << std::setw(10) << "state" << std::setw(6) << "inc" << std::setw(8) << "leased"
            << "completed\n";
  for (const auto& a : s.actors) {
    std::cout << std::setw(6) << a.id << std::setw(20) << a.pool << std::setw(28)
              << (a.node.empty() ? "-" : a.node) << std::setw(10) << a.state << std::setw(6)
              << a.incarnation << std::setw(8) << a.leased << a.completed << "\n";
  }
  if (!s.groups.empty()) {
    std::cout << "\nSP GROUPS\n"
              << std::setw(24) << "name" << std::setw(22) << "epoch" << std::setw(24) << "members (by rank)"
              << "task\n";
    for (const auto& g : s.groups) {
      std::string members;
      for (uint64_t m : g.members) members += (members.empty() ? "" : ",") + std::to_string(m);
      std::cout << std::setw(24) << g.name << std::setw(22) << g.epoch << std::setw(24) << members
                << (g.task ? std::to_string(g.task) : std::string("-")) << "\n";
    }
  }
  print_latency(s);
  if (!s.counters.empty()) {
    std::cout << "\nCOUNTERS\n";
    for (const auto& [k, v] : s.counters) std::cout << "  " << std::setw(30) << k << v << "\n";
  }
}

}  // namespace

void add_status(CLI::App& app) {
  auto address = std::make_shared<std::string>(default_address());
  auto json = std::make_shared<bool>(false);
  auto timeout = std::make_shared<int>(5000);
  CLI::App* st = app.add_subcommand("status", "Show nodes, actors, pools and mailbox depths");
  st->add_option("--address", *address, "HOST:PORT of the head ($SPOTLIGHT_ADDRESS)");
  add_key_option(st);
  st->add_flag("--json", *json, "Print one JSON object");
  st->add_option("--timeout-ms", *timeout, "How long to wait for the head")->check(CLI::Range(1, 600000));
  st->callback([=] {
    ClusterStatus s = cluster_status(*address, std::chrono::milliseconds(*timeout));
    if (*json) {
      std::cout << status_json(s) << "\n";
    } else {
      print_table(s);
    }
  });
  auto drain_address = std::make_shared<std::string>(default_address());
  auto drain_node_id = std::make_shared<std::string>();
  auto deadline = std::make_shared<double>(30);
  CLI::App* dr = app.add_subcommand("drain", "Give a node notice: it hands its work back and leaves");
  dr->add_option("node", *drain_node_id, "Node id (see spotlight status)")->required();
  dr->add_option("--deadline", *deadline, "Seconds until the node must be gone")->check(CLI::Range(0.0, 86400.0));
  dr->add_option("--address", *drain_address, "HOST:PORT of the head ($SPOTLIGHT_ADDRESS)");
  add_key_option(dr);
  dr->callback([=] {
    drain_node(*drain_address, *drain_node_id,
               std::chrono::milliseconds(static_cast<int64_t>(*deadline * 1000)));
    std::cout << "node " << *drain_node_id << " is draining (deadline " << *deadline << " s)\n";
  });

  auto remove_address = std::make_shared<std::string>(default_address());
  auto remove_name = std::make_shared<std::string>();
  CLI::App* rm =
      app.add_subcommand("remove", "Remove an actor or pool: its calls fail, its slots are freed");
  rm->add_option("name", *remove_name, "Actor or pool name (see spotlight status)")->required();
  rm->add_option("--address", *remove_address, "HOST:PORT of the head ($SPOTLIGHT_ADDRESS)");
  add_key_option(rm);
  rm->callback([=] {
    connect(*remove_address).remove_pool(*remove_name);
    std::cout << "removed " << *remove_name << "\n";
  });

  auto tasks_address = std::make_shared<std::string>(default_address());
  auto query = std::make_shared<TaskQuery>();
  auto tasks_json = std::make_shared<bool>(false);
  CLI::App* tk =
      app.add_subcommand("tasks", "List the calls the head holds: waiting, leased, finished");
  tk->add_option("--pool", query->mailbox, "Only the calls to this actor or pool");
  tk->add_option("--state", query->state, "Only calls in this state")
      ->check(CLI::IsMember({"queued", "leased", "done"}));
  tk->add_option("--limit", query->limit, "At most this many, the earliest accepted first")
      ->check(CLI::Range(1, 100000));
  tk->add_option("--method", query->method, "Only the calls of this method");
  tk->add_option("--node", query->node, "Only the calls leased on this node");
  // The head checks the outcome against the error kinds it knows.
  tk->add_option("--outcome", query->outcome,
                 "Only the finished calls that ended so: ok, error (any failure) or one error "
                 "kind (method, crashed, cancelled, ...)");
  tk->add_option("--caller", query->caller,
                 "Only the calls whose result goes to this client number (the caller column)")
      ->check(CLI::Range(1u, (1u << 23) - 1));
  tk->add_flag("--json", *tasks_json, "Print one JSON object");
  tk->add_option("--address", *tasks_address, "HOST:PORT of the head ($SPOTLIGHT_ADDRESS)");
  add_key_option(tk);
  tk->callback([=] {
    TaskList l = list_tasks(*tasks_address, *query);
    if (*tasks_json) {
      nlohmann::json j;
      j["matching"] = l.matching;
      j["tasks"] = nlohmann::json::array();
      for (const auto& t : l.tasks) {
        j["tasks"].push_back({{"id", t.id},
                              {"pool", t.mailbox},
                              {"method", t.method},
                              {"state", t.state},
                              {"priority", t.priority},
                              {"attempts", t.attempts},
                              {"max_attempts", t.max_attempts},
                              {"caller", t.caller},
                              {"parent", t.parent},
                              {"node", t.node},
                              {"actor", t.actor},
                              {"has_checkpoint", t.has_checkpoint},
                              {"deadline_ms", t.deadline_ms},
                              {"outcome", t.outcome},
                              {"args_bytes", t.args_bytes},
                              {"age_ms", t.age_ms},
                              {"in_state_ms", t.in_state_ms}});
      }
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << std::left << std::setw(22) << "id" << std::setw(20) << "pool" << std::setw(16)
              << "method" << std::setw(8) << "state" << std::setw(12) << "for" << std::setw(10)
              << "priority" << std::setw(10) << "attempts"
              << "where / outcome\n";
    for (const auto& t : l.tasks) {
      // How long it has been queued or leased ("-": done, or from before a restart).
      const std::string held_for = t.in_state_ms < 0 ? "-" : human_seconds(t.in_state_ms / 1000.0);
      std::cout << std::setw(22) << t.id << std::setw(20) << t.mailbox << std::setw(16) << t.method
                << std::setw(8) << t.state << std::setw(12) << held_for << std::setw(10)
                << t.priority << std::setw(10)
                << (std::to_string(t.attempts) + "/" + std::to_string(t.max_attempts))
                << (t.state == "leased" ? t.node + " actor " + std::to_string(t.actor) : t.outcome)
                << "\n";
    }
    std::cout << l.tasks.size() << " of " << l.matching << " matching calls shown\n";
  });

  auto cancel_address = std::make_shared<std::string>(default_address());
  auto cancel_ids = std::make_shared<std::vector<uint64_t>>();
  auto keep_children = std::make_shared<bool>(false);
  CLI::App* cn = app.add_subcommand(
      "cancel", "Cancel calls by task id: those not finished fail with CancelledError");
  cn->add_option("ids", *cancel_ids, "Task ids (Future::task_id())")->required();
  cn->add_flag("--keep-children", *keep_children,
               "Leave the calls the cancelled calls' runs made running");
  cn->add_option("--address", *cancel_address, "HOST:PORT of the head ($SPOTLIGHT_ADDRESS)");
  add_key_option(cn);
  cn->callback([=] {
    std::vector<CancelOutcome> out = connect(*cancel_address).cancel(*cancel_ids, !*keep_children);
    for (size_t i = 0; i < out.size(); ++i) {
      std::cout << (*cancel_ids)[i] << " " << to_string(out[i]) << "\n";
    }
  });

  auto stop_address = std::make_shared<std::string>(default_address());
  CLI::App* sp = app.add_subcommand("stop", "Stop every node and the head");
  sp->add_option("--address", *stop_address, "HOST:PORT of the head ($SPOTLIGHT_ADDRESS)");
  add_key_option(sp);
  sp->callback([=] {
    stop_cluster(*stop_address);
    std::cout << "cluster at " << *stop_address << " stopped\n";
  });
}

}  // namespace spotlight::cli

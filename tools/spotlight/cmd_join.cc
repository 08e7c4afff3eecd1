// `spotlight join HOST:PORT`: runs a node that hosts actors on its slots.
#include <csignal>

#include "common/log.h"
#include "common/process.h"
#include "node/node.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {
node::Node* g_node = nullptr;
void on_stop(int) {
  if (g_node) g_node->request_stop();
}
// SIGTERM is how clouds and schedulers announce that a machine goes away: drain.
void on_notice(int) {
  if (g_node) g_node->request_drain();
}
}  // namespace

void add_join(CLI::App& app) {
  auto opt = std::make_shared<node::NodeOptions>();
  auto libs = std::make_shared<std::vector<std::string>>();
  auto hb = std::make_shared<int>(250);
  auto notice_s = std::make_shared<double>(30);
  CLI::App* cmd = app.add_subcommand("join", "Attach this machine to a cluster as a node");
  cmd->add_option("head", opt->head, "HOST:PORT of the head")->required();
  cmd->add_option("--market", opt->market, "reserved or spot")->check(CLI::IsMember({"reserved", "spot"}));
  cmd->add_option("--slots", opt->slots, "Actor slots on this machine")->check(CLI::Range(1, 4096));
  cmd->add_option("--load", *libs, "Actor library (.so) to load; repeatable")->check(CLI::ExistingFile);
  cmd->add_option("--id", opt->node_id, "Node id (default HOST-PID)");
  cmd->add_option("--heartbeat-ms", *hb, "Heartbeat interval")->check(CLI::Range(10, 60000));
  cmd->add_option("--notice-deadline", *notice_s, "Seconds to drain after SIGTERM before exiting")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--notice-url", opt->notice_url,
                  "Cloud metadata URL announcing a spot interruption (http://...)");
  auto poll_ms = std::make_shared<int>(1000);
  cmd->add_option("--notice-poll-ms", *poll_ms, "How often to poll --notice-url")->check(CLI::Range(10, 600000));
  auto store_mb = std::make_shared<int64_t>(2048);
  cmd->add_option("--object-store-mb", *store_mb, "Memory for this node's object store (weight versions)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--object-host", opt->object_host,
                  "Host other nodes reach this node's object server at (default: its address toward the head)");
  add_key_option(cmd);
  cmd->callback([=] {
    common::init_logging("node");
    // Early, while this process has one thread: it takes its lifeline out of the environment.
    common::stop_with_starter();  // a node that a local cluster started ends with it
    if (opt->head.find(':') == std::string::npos) {
      throw CLI::ValidationError("head", "expected HOST:PORT, got '" + opt->head + "'");
    }
    for (const auto& lib : *libs) node::load_actor_library(lib);
    node::NodeOptions o = *opt;
    o.heartbeat = std::chrono::milliseconds(*hb);
    o.notice_deadline = std::chrono::milliseconds(static_cast<int64_t>(*notice_s * 1000));
    o.notice_poll = std::chrono::milliseconds(*poll_ms);
    o.object_store_bytes = static_cast<uint64_t>(*store_mb) << 20;
    if (!o.notice_url.empty()) node::parse_notice_url(o.notice_url);  // refuse a bad URL up front
    {
      node::Node n(o);
      g_node = &n;
      std::signal(SIGTERM, on_notice);
      std::signal(SIGINT, on_stop);
      n.run();
      g_node = nullptr;
    }
    transport::terminate_context();  // flushes the last results
  });
}

}  // namespace spotlight::cli

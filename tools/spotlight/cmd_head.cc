// `spotlight head`: runs the head until `spotlight stop` or SIGTERM/SIGINT.
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "common/ids.h"
#include "common/log.h"
#include "common/process.h"
#include "head/head.h"
#include "tools/spotlight/commands.h"

namespace spotlight::cli {
namespace {
head::Head* g_head = nullptr;
void on_signal(int) {
  if (g_head) g_head->request_stop();
}
}  // namespace

void add_head(CLI::App& app) {
  auto opt = std::make_shared<head::HeadOptions>();
  auto sync = std::make_shared<std::string>("process");
  auto hb = std::make_shared<int>(250), live = std::make_shared<int>(850);
  auto max_mib = std::make_shared<double>(64);
  auto compact_mib = std::make_shared<double>(64);
  auto result_ttl_s = std::make_shared<double>(86400);
  CLI::App* cmd = app.add_subcommand("head", "Run the head node (the cluster's truth)");
  cmd->add_option("--port", opt->port, "Port to listen on (0: pick a free one)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--bind", opt->bind_host, "Address to listen on");
  cmd->add_option("--advertise", opt->advertise_host, "Host name printed in the join command");
  cmd->add_option("--store", opt->store_path,
                  "SQLite store of mailboxes, leases and results (the journal goes beside it, in "
                  "PATH.journal.N)");
  cmd->add_option("--sync", *sync,
                  "Durability: process (survives kill -9) or machine (fsync per commit)")
      ->check(CLI::IsMember({"process", "machine"}));
  cmd->add_option("--heartbeat-ms", *hb, "Heartbeat interval")->check(CLI::Range(10, 60000));
  cmd->add_option("--liveness-ms", *live, "A node silent this long is dead")
      ->check(CLI::Range(50, 600000));
  cmd->add_option("--max-frame-mib", *max_mib, "Largest frame accepted")
      ->check(CLI::Range(0.001, 4096.0));
  cmd->add_option("--compact-mib", *compact_mib,
                  "Journal written between compactions into the store's tables")
      ->check(CLI::Range(0.01, 65536.0));
  cmd->add_option("--port-file", opt->port_file, "Write the bound port to this file");
  // For tests (hidden): a snapshot that spans many turns, to kill the head in one.
  cmd->add_option("--snapshot-records", opt->snapshot_records,
                  "Copy at most this many tasks of a compaction's snapshot per turn")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30))
      ->group("");
  cmd->add_option(
         "--result-ttl-s", *result_ttl_s,
         "Drop the stored results of a driver gone this long, unless fetched (0: keep them)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--max-clients", opt->max_clients,
                  "Client records held at once; past this many, the numbers of retired drivers "
                  "are given out again")
      ->check(CLI::Range(uint32_t{2}, (uint32_t{1} << 23) - 1));
  cmd->add_option("--max-mailbox", opt->max_mailbox, "Calls one mailbox may hold waiting")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40));
  cmd->add_option(
         "--key", opt->cluster_key,
         "Cluster key (64 hex digits) that joining machines and drivers must hold; default: "
         "$SPOTLIGHT_CLUSTER_KEY, else the one kept in STORE.key, made on first start")
      ->check(key_validator());
  cmd->add_option(
         "--metrics-port", opt->metrics_port,
         "Serve a status page (GET /), /status.json, /metrics (Prometheus) and /healthz on "
         "this port (0: a free one; default: off)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-host", opt->metrics_host,
                  "Address the metrics endpoint listens on; it has no key, so the default keeps it "
                  "to this machine")
      ->check(CLI::ValidIPV4);
  auto insecure = std::make_shared<bool>(false);
  cmd->add_flag(
      "--insecure", *insecure,
      "No cluster key: no encryption, and anyone who reaches the port may use the cluster");
  cmd->callback([=] {
    common::init_logging("head");
    // Early, while this process has one thread: it takes its lifeline out of the environment.
    common::stop_with_starter();  // a head that a local cluster started ends with it
    head::HeadOptions o = *opt;
    const char* env_key = std::getenv(transport::kKeyVariable);
    if (o.cluster_key.empty() && env_key) o.cluster_key = env_key;
    if (*insecure) o.cluster_key = "none";
    o.durability = *sync == "machine" ? store::Durability::kMachine : store::Durability::kProcess;
    o.heartbeat = std::chrono::milliseconds(*hb);
    o.liveness = std::chrono::milliseconds(*live);
    o.max_frame = static_cast<size_t>(*max_mib * (1 << 20));
    o.compact_bytes = static_cast<size_t>(*compact_mib * (1 << 20));
    o.result_ttl = std::chrono::milliseconds(static_cast<int64_t>(*result_ttl_s * 1000));
    {
    head::Head h(o);
    g_head = &h;
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::string host = o.advertise_host.empty() ? common::hostname() : o.advertise_host;
    if (o.bind_host == "127.0.0.1") host = "127.0.0.1";
    std::cout << "Spotlight head listening on port " << h.port() << " (boot " << h.boot()
              << ", store " << o.store_path << ")\n";
    // The key goes in the environment, where `ps` does not show it to other users.
    std::string key_env =
        h.key().secure() ? std::string(transport::kKeyVariable) + "=" + h.key().hex() + " " : "";
    if (h.key().secure()) {
      std::cout << "Cluster key (kept in " << o.store_path
                << ".key; drivers, `spotlight status` and "
                << "nodes need it): " << h.key().hex() << "\n";
    }
    if (!h.metrics_address().empty()) {
      std::cout << "Metrics: http://" << h.metrics_address() << "/metrics\n";
    }
    std::cout << "Attach a machine with:\n  " << key_env << "spotlight join " << host << ":"
              << h.port() << " --market spot --slots 1 --load libyour_actors.so\n"
              << std::flush;
    h.run();
    g_head = nullptr;
    }
    transport::terminate_context();  // flushes the last replies
  });
}

}  // namespace spotlight::cli

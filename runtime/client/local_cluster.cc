// spotlight::local_cluster: a head and N nodes as child processes on loopback.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "client/client.h"
#include "common/process.h"
#include "spotlight/spotlight.h"
#include "transport/cluster_key.h"

namespace spotlight {

namespace fs = std::filesystem;

struct LocalCluster::Impl {
  ClusterOptions opt;
  std::string bin;
  fs::path dir;
  std::string dir_name;  // dir as a string, for log_dir()
  bool own_dir = false;
  std::string store;
  std::string address;
  int port = 0;
  pid_t head = -1;
  std::vector<pid_t> nodes;
  bool stopped = false;
  std::string key;  // the cluster key, hex or "none", handed to children in their environment

  std::vector<std::string> child_env() const {
    return {std::string(transport::kKeyVariable) + "=" + key};
  }

  std::string log(const std::string& name) const { return opt.quiet ? (dir / name).string() : ""; }

  void start_head() {
    std::string port_file = (dir / "head.port").string();
    fs::remove(port_file);
    std::vector<std::string> argv{bin, "head", "--bind", "127.0.0.1", "--port", std::to_string(port),
                                  "--store", store, "--port-file", port_file};
    if (key == "none") argv.push_back("--insecure");
    argv.insert(argv.end(), opt.head_args.begin(), opt.head_args.end());
    head = common::spawn(argv, log("head.log"), child_env());
    std::string p = common::wait_for_file(port_file, std::chrono::seconds(20));
    if (p.empty()) {
      throw ConnectionError("the head did not start; see " + (dir / "head.log").string());
    }
    port = std::stoi(p);
    address = "127.0.0.1:" + std::to_string(port);
  }

  int add_node(int slots, const std::string& market, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{bin, "join", address, "--market", market, "--slots",
                                  std::to_string(slots)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const auto& lib : opt.load) {
      argv.push_back("--load");
      argv.push_back(lib);
    }
    int index = static_cast<int>(nodes.size());
    nodes.push_back(
        common::spawn(argv, log("node-" + std::to_string(index) + ".log"), child_env()));
    return index;
  }

  // Waits until the head counts `alive` live nodes.
  void wait_for_nodes(size_t alive) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      size_t n = 0;
      for (const auto& node : detail::cluster_status(address, key).nodes)
        n += node.state == "alive";
      if (n >= alive) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling another process
    }
    throw ConnectionError("nodes did not join within 30 s; logs in " + dir.string());
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    if (head > 0 && common::wait_exit(head, std::chrono::milliseconds(0)) == -1) {
      try {
        detail::stop_cluster(address, key, std::chrono::milliseconds(2000));
      } catch (const std::exception& e) {
        spdlog::debug("local cluster: clean stop failed: {}", e.what());
      }
    }
    std::vector<pid_t> all = nodes;
    all.push_back(head);
    for (pid_t p : all) {
      if (p > 0 && common::wait_exit(p, std::chrono::seconds(5)) == -1) {
        common::signal_process(p, SIGKILL);
        common::wait_exit(p, std::chrono::seconds(5));
      }
    }
    if (own_dir && !std::getenv("SPOTLIGHT_KEEP_LOGS")) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  }
};

LocalCluster::LocalCluster(ClusterOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.opt = std::move(options);
  d.bin = d.opt.spotlight_bin.empty() ? common::find_spotlight_bin() : d.opt.spotlight_bin;
  char tmpl[] = "/tmp/spotlight-cluster-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
  d.dir = tmpl;
  d.dir_name = tmpl;
  d.own_dir = true;
  d.store = d.opt.store.empty() ? (d.dir / "head.db").string() : d.opt.store;
  if (d.opt.insecure) {
    d.key = "none";
  } else {
    // The process's key: its connections to the cluster (connect(),
    // cluster_status, head_kv...) then need no key given.
    d.key = transport::process_key_or_new().hex();
  }
  try {
    d.start_head();
    for (int i = 0; i < d.opt.nodes; ++i) d.add_node(d.opt.slots, d.opt.market);
    if (d.opt.nodes > 0) d.wait_for_nodes(d.opt.nodes);
  } catch (...) {
    d.stop();
    throw;
  }
}

LocalCluster::LocalCluster(LocalCluster&&) noexcept = default;
LocalCluster& LocalCluster::operator=(LocalCluster&&) noexcept = default;
LocalCluster::~LocalCluster() {
  if (impl_) impl_->stop();
}

const std::string& LocalCluster::address() const { return impl_->address; }
Runtime LocalCluster::connect(ConnectOptions options) const {
  if (options.cluster_key.empty()) options.cluster_key = impl_->key;
  return spotlight::connect(impl_->address, options);
}
int LocalCluster::add_node(int slots, const std::string& market) {
  int alive = 0;
  for (pid_t p : impl_->nodes) alive += common::wait_exit(p, std::chrono::milliseconds(0)) == -1;
  int i = impl_->add_node(slots, market);
  impl_->wait_for_nodes(alive + 1);
  return i;
}
int LocalCluster::start_node(int slots, const std::string& market,
                             const std::vector<std::string>& extra) {
  return impl_->add_node(slots, market, extra);
}
int LocalCluster::node_pid(int index) const { return impl_->nodes.at(index); }
int LocalCluster::head_pid() const { return impl_->head; }
const std::string& LocalCluster::log_dir() const { return impl_->dir_name; }
const std::string& LocalCluster::key() const {
  return impl_->key;
}
void LocalCluster::kill_node(int index, int signal) {
  pid_t p = impl_->nodes.at(index);
  common::signal_process(p, signal);
  if (signal == SIGKILL) common::wait_exit(p, std::chrono::seconds(5));
}
int LocalCluster::node_count() const { return static_cast<int>(impl_->nodes.size()); }
void LocalCluster::kill_head(int signal) {
  common::signal_process(impl_->head, signal);
  common::wait_exit(impl_->head, std::chrono::seconds(10));
  impl_->head = -1;
}
void LocalCluster::start_head() { impl_->start_head(); }
const std::string& LocalCluster::store_path() const { return impl_->store; }
void LocalCluster::stop() { impl_->stop(); }

LocalCluster local_cluster(ClusterOptions options) { return LocalCluster(std::move(options)); }

}  // namespace spotlight

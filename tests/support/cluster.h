// Helpers for tests that start real clusters on loopback.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "spotlight/spotlight.h"
#include "transport/cluster_key.h"

namespace spotlight::testing {

inline ClusterOptions cluster_options(int nodes, int slots = 2) {
  ClusterOptions o;
  o.nodes = nodes;
  o.slots = slots;
  o.spotlight_bin = SPOTLIGHT_TEST_BIN;
  o.load = {SPOTLIGHT_TEST_ACTORS, SPOTLIGHT_HELLO_ACTORS};
  return o;
}

// This test process's cluster key (made on first use, as a local cluster
// would), and the environment that gives it to a process the test spawns.
inline std::vector<std::string> key_env() {
  return {std::string(transport::kKeyVariable) + "=" + transport::process_key_or_new().hex()};
}

// Polls the head's status until `pred` holds or the deadline passes.
inline bool wait_for_status(const std::string& address, const std::function<bool(const ClusterStatus&)>& pred,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (pred(cluster_status(address, std::chrono::seconds(2)))) return true;
    } catch (const ConnectionError&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling another process
  }
  return false;
}

// A head counter, 0 when it never counted.
inline uint64_t counter(const ClusterStatus& s, const std::string& name) {
  auto it = s.counters.find(name);
  return it == s.counters.end() ? 0 : it->second;
}

// The node running a task of `pool` right now.
inline const NodeStatus* busy_node(const ClusterStatus& s, const std::string& pool) {
  for (const auto& a : s.actors) {
    if (a.pool != pool || a.leased == 0) continue;
    for (const auto& n : s.nodes) {
      if (n.id == a.node) return &n;
    }
  }
  return nullptr;
}

inline const PoolStatus* find_pool(const ClusterStatus& s, const std::string& name) {
  for (const auto& p : s.pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace spotlight::testing

// What `spotlight status` shows: the cluster as the head sees it.
#pragma once

#include <cstdint>
#include <map>
#include <msgpack.hpp>
#include <string>
#include <utility>
#include <vector>

namespace spotlight {

struct NodeStatus {
  std::string id;
  std::string host;
  std::string market;
  std::string state;  // alive, dead
  int32_t slots = 0;
  int32_t used = 0;
  int64_t pid = 0;
  int64_t last_heartbeat_ms = 0;  // milliseconds since the head last heard from it
  uint64_t running = 0;           // tasks leased to it
  // Milliseconds since: it had notice (began to drain); its last lease went
  // after the notice; it was declared gone. -1: not (yet).
  int64_t notice_ms_ago = -1;
  int64_t emptied_ms_ago = -1;
  int64_t gone_ms_ago = -1;
  std::string object_address;  // HOST:PORT of its object server
  MSGPACK_DEFINE(id, host, market, state, slots, used, pid, last_heartbeat_ms, running,
                 notice_ms_ago, emptied_ms_ago, gone_ms_ago, object_address)
};

struct ActorStatus {
  uint64_t id = 0;
  std::string pool;
  std::string node;   // empty while waiting for a slot
  std::string state;  // pending, placing, ready
  uint32_t incarnation = 0;
  uint64_t leased = 0;
  uint64_t completed = 0;
  MSGPACK_DEFINE(id, pool, node, state, incarnation, leased, completed)
};

struct PoolStatus {
  std::string name;
  std::string type;
  std::string market;
  int32_t size = 0;
  int32_t placed = 0;
  uint64_t queued = 0;  // mailbox depth: accepted, not yet leased
  uint64_t leased = 0;
  // The queued calls per priority (CallOptions::priority), highest first;
  // only priorities with calls waiting.
  std::vector<std::pair<int32_t, uint64_t>> by_priority;
  MSGPACK_DEFINE(name, type, market, size, placed, queued, leased, by_priority)
};

// A sequence-parallel group as the head formed it.
struct SpGroupStatus {
  std::string pool;
  std::string name;
  uint64_t epoch = 0;
  std::vector<uint64_t> members;  // actor ids, by rank
  uint64_t task = 0;              // the task it runs, 0 when idle
  MSGPACK_DEFINE(pool, name, epoch, members, task)
};

struct ClusterStatus {
  uint64_t boot = 0;  // grows on every head start over the same store
  std::string store;
  std::vector<NodeStatus> nodes;
  std::vector<PoolStatus> pools;
  std::vector<ActorStatus> actors;
  uint64_t tasks_live = 0;  // accepted and not yet acknowledged by their caller
  std::map<std::string, uint64_t> counters;  // bad frames by reason, calls, results...
  std::vector<SpGroupStatus> groups;
  // HOST:PORT of the head's HTTP endpoint (/metrics, /healthz); empty when off.
  std::string metrics_address;
  MSGPACK_DEFINE(boot, store, nodes, pools, actors, tasks_live, counters, groups, metrics_address)
};

}  // namespace spotlight

// Large immutable blobs (weight versions) by id: the node's object store.
//
// Every node keeps one store, shared by all its slots. A blob put by one
// actor is read by its sibling slots on the same node from memory, without a
// copy and without the network; a node that does not hold it asks the head
// where it is (the head tracks locations only, never bytes) and copies it
// from a node that does, in chunks, straight from that node's object server.
// A node that got a copy becomes a location too.
//
//   void Explorer::load(spotlight::TaskContext& ctx, std::string version) {
//     spotlight::ObjectRef w = ctx.objects().get(version, std::chrono::seconds(60));
//     model_.load_weights(*w);
//   }
//
// The putter's copy is pinned until released; fetched copies are evicted,
// least recently used first, when the store needs room and no reader holds
// them. Copies live as long as their node: the head forgets a dead node's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace spotlight {

// An immutable blob; holding it keeps the bytes alive (and the copy in the store).
using ObjectRef = std::shared_ptr<const std::string>;

struct ObjectStats {
  uint64_t objects = 0;        // held now
  uint64_t bytes = 0;          // held now
  uint64_t capacity = 0;       // bytes
  uint64_t local_hits = 0;     // gets served from this node's memory
  uint64_t fetches = 0;        // copies made from another node
  uint64_t fetched_bytes = 0;
  uint64_t evictions = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // Stores `bytes` under `id` on this node (pinned) and tells the head. The
  // same id with the same bytes again is a no-op; other bytes under a known
  // id throw RejectedError (objects are immutable), as does a store too full
  // of pinned or read copies to make room.
  virtual void put(const std::string& id, std::string bytes) = 0;
  // The blob: from this node, else copied from a node that holds it, waiting
  // up to `timeout` for it to be put. Throws TimeoutError when nobody put it
  // by then, ConnectionError when no holder could be reached.
  virtual ObjectRef get(const std::string& id, std::chrono::milliseconds timeout) = 0;
  // True if this node holds `id` now.
  virtual bool contains(const std::string& id) const = 0;
  // Unpins this node's copy of `id`: it may be evicted once no reader holds it.
  virtual void release(const std::string& id) = 0;
  virtual ObjectStats stats() const = 0;
};

}  // namespace spotlight

// Collectives among the members of a sequence-parallel group: all-to-all,
// all-gather, broadcast, all-reduce and barrier over contiguous buffers.
// A Communicator belongs to one formation (epoch) of a group; when a member
// dies the survivors build a new one for epoch + 1 (DESIGN.md §3, "Elastic
// SP groups"). Backends: Gloo over TCP on CPUs (here); NCCL on GPUs (later).
//
// Members find each other through a KvStore: in a cluster, the head's KV
// (no other store or server); in a unit test, an in-memory or file store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace spotlight::collective {

// A collective failed: a peer died or hung past the timeout, or the
// arguments were wrong. The communicator is unusable afterwards; the group
// re-forms with a new one.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DataType : uint8_t { kFloat32, kFloat64, kInt64 };
enum class ReduceOp : uint8_t { kSum, kMax, kMin };

size_t size_of(DataType t);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group's formation this communicator belongs to.
  virtual uint64_t epoch() const = 0;

  // send holds size() blocks of `block` bytes; block r goes to rank r. recv
  // gets size() blocks; block r came from rank r.
  virtual void all_to_all(const void* send, void* recv, size_t block) = 0;
  // recv gets size() blocks of `bytes`, rank order; send is this rank's block.
  virtual void all_gather(const void* send, void* recv, size_t bytes) = 0;
  // root's buffer is copied into every other rank's.
  virtual void broadcast(void* buffer, size_t bytes, int root) = 0;
  // In place, element-wise over count elements.
  virtual void all_reduce(void* buffer, size_t count, DataType type, ReduceOp op) = 0;
  virtual void barrier() = 0;
  // Point to point: `bytes` from this rank to `peer`, which calls recv with
  // the same size and this rank; pairs match in the order they are called.
  // A send may wait until its receive is posted: order them without cycles.
  // (A member that needs the weights gets them from one sibling, not from a
  // broadcast that sends them to every member.)
  virtual void send(const void* buffer, size_t bytes, int peer) = 0;
  virtual void recv(void* buffer, size_t bytes, int peer) = 0;
};

// Destroys `comm` on a background thread. Closing a broken group's
// connections takes 10-25 ms on a busy machine (measured: spotlight bench
// sp); a member re-forming its group should not wait for it.
void retire(std::unique_ptr<Communicator> comm);

// Where members rendezvous: set a key once, read it, wait for it.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value, waiting up to `timeout` for the key to be set; nullopt if it
  // was not set by then.
  virtual std::optional<std::string> wait(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Forgets `key`; true if it was set. A program's own keys stay until it
  // erases them (an SP formation's go with its group).
  virtual bool erase(const std::string& key) = 0;
};

// A KvStore in this process, for tests and for groups of threads.
std::shared_ptr<KvStore> make_memory_kv();
// A KvStore in a directory shared by processes of one machine (tests only:
// a cluster uses the head's KV). Each key is a file written atomically.
std::shared_ptr<KvStore> make_file_kv(const std::string& directory);

struct GlooOptions {
  std::string host = "127.0.0.1";  // the address this member listens on
  std::chrono::milliseconds timeout{10000};  // per rendezvous and per collective
};

// Where every key of one formation of `group` lives: "<this>/...". The
// head drops a formation's keys when its group ends, so a pool whose groups
// re-form around preemptions for weeks does not fill the head's memory.
inline std::string rendezvous_prefix(const std::string& group, uint64_t epoch) {
  return "spotlight/sp/" + group + "/epoch/" + std::to_string(epoch);
}

// Joins `group` at `epoch` as `rank` of `size`: every member calls this with
// the same group, epoch and size. Keys are namespaced by group and epoch, so
// a re-formed group never reads the last formation's addresses. Throws
// CollectiveError if the members do not all arrive within the timeout.
std::unique_ptr<Communicator> make_gloo_communicator(KvStore& store, const std::string& group, uint64_t epoch,
                                                     int rank, int size, const GlooOptions& options = {});

}  // namespace spotlight::collective

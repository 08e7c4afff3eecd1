// The node's object store (spotlight/objects.h): one per node, shared by its
// slots. Copies live in this process's memory; an object server thread
// hands chunks of them to other nodes; the head's directory says where
// copies are. See docs/objects.md.
#pragma once

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/head_requester.h"
#include "spotlight/objects.h"
#include "transport/cluster_key.h"
#include "transport/socket.h"
#include "wire/messages.h"

namespace spotlight::objects {

struct StoreOptions {
  std::string head;            // HOST:PORT of the head
  std::string node_id;
  std::string advertise_host;  // where other nodes reach this node's object server
  uint64_t capacity = 2ull << 30;
  size_t chunk = 8u << 20;     // bytes per fetched chunk (under the frame limit); = kDigestBlock is fastest
  std::chrono::milliseconds request_timeout{10000};
  transport::ClusterKey key = transport::process_key();  // of the head, the servers and this one
  // A driver's store (Runtime::objects()): its copies go with it, so closing
  // it takes them out of the head's directory. A node's go with the node.
  bool forget_on_close = false;
};

// The digest the directory compares: the same id must name the same bytes.
// Computed over blocks of kDigestBlock bytes in order, so that a copy is
// checked block by block as its chunks arrive.
inline constexpr size_t kDigestBlock = 8u << 20;
uint64_t digest_step(uint64_t acc, std::string_view block);
uint64_t digest_of(std::string_view bytes);

class NodeObjectStore final : public ObjectStore {
 public:
  explicit NodeObjectStore(StoreOptions options);
  ~NodeObjectStore() override;
  NodeObjectStore(const NodeObjectStore&) = delete;
  NodeObjectStore& operator=(const NodeObjectStore&) = delete;

  void put(const std::string& id, std::string bytes) override;
  ObjectRef get(const std::string& id, std::chrono::milliseconds timeout) override;
  bool contains(const std::string& id) const override;
  void release(const std::string& id) override;
  ObjectStats stats() const override;

  // Tells the head again about every copy held here (a head that welcomed
  // this node anew, restarted or not, has forgotten them). Does not wait.
  void announce_all();
  // Takes every copy held here out of the head's directory (a driver's store
  // on close), and waits up to 2 s for the head to have them.
  void forget_all();
  // HOST:PORT of this node's object server.
  const std::string& address() const { return address_; }

 private:
  struct Entry {
    ObjectRef data;
    uint64_t digest = 0;
    bool pinned = false;  // the putter's copy, until released
    uint64_t last_use = 0;
  };
  // Adds a copy, evicting unpinned, unread copies (least recently used
  // first) to make room; throws RejectedError when there is none. mu_ held.
  ObjectRef insert(const std::string& id, std::shared_ptr<const std::string> data, uint64_t digest, bool pinned,
                   std::vector<std::string>& evicted);
  // The body of an ObjectAdd for a copy held here.
  std::string added(const std::string& id, uint64_t size, uint64_t digest) const;
  void tell_evicted(const std::vector<std::string>& ids);
  ObjectRef fetch(const std::string& id, std::chrono::milliseconds timeout);
  ObjectRef copy_from(const std::string& address, const std::string& id, uint64_t size, uint64_t digest);
  void serve();
  // [peer][envelope] or, for a chunk, [peer][envelope][the stored bytes, not copied].
  void send_chunk(const std::string& peer, const std::string& envelope, ObjectRef data, uint64_t offset,
                  uint64_t length);

  StoreOptions opt_;
  std::string address_;
  client::HeadRequester head_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::shared_future<ObjectRef>> inflight_;  // fetches under way, by id
  uint64_t bytes_ = 0;
  uint64_t tick_ = 0;
  ObjectStats stats_;
  zmq::socket_t server_;
  std::atomic<bool> stop_{false};
  std::thread server_thread_;
};

}  // namespace spotlight::objects

// The Gloo backend of Communicator: a full mesh of TCP pairs, built through
// the KvStore, and Gloo's collectives on byte buffers.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <csignal>
#include <map>
#include <vector>

#include "spotlight/collective.h"

namespace spotlight::collective {
namespace {

// Gloo's Store on top of ours. Gloo waits for keys and then gets them: the
// values a wait fetched are kept, so each key costs one request to the KV
// (keys are written once per epoch, so a kept value never goes stale).
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(KvStore& kv, std::chrono::milliseconds timeout) : kv_(kv), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    kv_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const auto& v = fetch(key, timeout_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const auto& k : keys) fetch(k, timeout);
  }

 private:
  const std::string& fetch(const std::string& key, std::chrono::milliseconds timeout) {
    auto it = seen_.find(key);
    if (it != seen_.end()) return it->second;
    auto v = kv_.wait(key, timeout);
    if (!v) throw CollectiveError("rendezvous: " + key + " was not set within the timeout");
    return seen_.emplace(key, std::move(*v)).first->second;
  }

  KvStore& kv_;
  std::chrono::milliseconds timeout_;
  std::map<std::string, std::string> seen_;
};

template <class T>
gloo::AllreduceOptions::Func reducer(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::kSum: return static_cast<Fn>(&gloo::sum<T>);
    case ReduceOp::kMax: return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::kMin: return static_cast<Fn>(&gloo::min<T>);
  }
  throw CollectiveError("all_reduce: unknown reduce op");
}

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx, uint64_t epoch, std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), epoch_(epoch), timeout_(timeout) {}

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  uint64_t epoch() const override { return epoch_; }

  void all_to_all(const void* send, void* recv, size_t block) override {
    if (block == 0) return;
    run("all_to_all", [&] {
      gloo::AlltoallOptions o(ctx_);
      o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(send)), block * size_t(size()));
      o.setOutput(static_cast<uint8_t*>(recv), block * size_t(size()));
      o.setTag(next_tag());
      o.setTimeout(timeout_);
      gloo::alltoall(o);
    });
  }

  void all_gather(const void* send, void* recv, size_t bytes) override {
    if (bytes == 0) return;
    run("all_gather", [&] {
      gloo::AllgatherOptions o(ctx_);
      o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(send)), bytes);
      o.setOutput(static_cast<uint8_t*>(recv), bytes * size_t(size()));
      o.setTag(next_tag());
      o.setTimeout(timeout_);
      gloo::allgather(o);
    });
  }

  void broadcast(void* buffer, size_t bytes, int root) override {
    if (root < 0 || root >= size()) throw CollectiveError("broadcast: root " + std::to_string(root) + " out of range");
    if (bytes == 0) return;
    run("broadcast", [&] {
      gloo::BroadcastOptions o(ctx_);
      o.setOutput(static_cast<uint8_t*>(buffer), bytes);
      o.setRoot(root);
      o.setTag(next_tag());
      o.setTimeout(timeout_);
      gloo::broadcast(o);
    });
  }

  void all_reduce(void* buffer, size_t count, DataType type, ReduceOp op) override {
    if (count == 0) return;
    run("all_reduce", [&] {
      gloo::AllreduceOptions o(ctx_);
      switch (type) {
        case DataType::kFloat32:
          o.setOutput(static_cast<float*>(buffer), count);
          o.setReduceFunction(reducer<float>(op));
          break;
        case DataType::kFloat64:
          o.setOutput(static_cast<double*>(buffer), count);
          o.setReduceFunction(reducer<double>(op));
          break;
        case DataType::kInt64:
          o.setOutput(static_cast<int64_t*>(buffer), count);
          o.setReduceFunction(reducer<int64_t>(op));
          break;
      }
      o.setTag(next_tag());
      o.setTimeout(timeout_);
      gloo::allreduce(o);
    });
  }

  void send(const void* buffer, size_t bytes, int peer) override {
    check_peer("send", peer);
    if (bytes == 0) return;
    run("send", [&] {
      auto buf = ctx_->createUnboundBuffer(const_cast<void*>(buffer), bytes);
      buf->send(peer, gloo::Slot::build(kPointToPointPrefix, sent_[peer]++));
      if (!buf->waitSend(timeout_)) throw CollectiveError("timed out");
    });
  }

  void recv(void* buffer, size_t bytes, int peer) override {
    check_peer("recv", peer);
    if (bytes == 0) return;
    run("recv", [&] {
      auto buf = ctx_->createUnboundBuffer(buffer, bytes);
      buf->recv(peer, gloo::Slot::build(kPointToPointPrefix, received_[peer]++));
      if (!buf->waitRecv(timeout_)) throw CollectiveError("timed out");
    });
  }

  void barrier() override {
    run("barrier", [&] {
      gloo::BarrierOptions o(ctx_);
      o.setTag(next_tag());
      o.setTimeout(timeout_);
      gloo::barrier(o);
    });
  }

 private:
  // Every collective gets its own tag, the same sequence on every rank (they
  // call collectives in the same order), so that two in flight never mix.
  uint32_t next_tag() { return tag_++; }

  // Outside Gloo's collective prefixes (0x01-0x08); one sequence per peer
  // and direction, so that sends and receives pair up in call order.
  static constexpr uint8_t kPointToPointPrefix = 0x50;
  void check_peer(const char* what, int peer) const {
    if (peer < 0 || peer >= size() || peer == rank())
      throw CollectiveError(std::string(what) + ": peer " + std::to_string(peer) + " is not another member");
  }

  // Gloo reports a dead or silent peer as gloo::IoException/EnforceNotMet:
  // one error type for callers, naming the operation and the epoch.
  template <class F>
  void run(const char* what, F&& f) {
    try {
      f();
    } catch (const CollectiveError&) {
      throw;
    } catch (const std::exception& e) {
      throw CollectiveError(std::string(what) + " failed in epoch " + std::to_string(epoch_) + " at rank " +
                            std::to_string(rank()) + ": " + e.what());
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  uint64_t epoch_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 1;
  std::map<int, uint32_t> sent_, received_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(KvStore& store, const std::string& group, uint64_t epoch,
                                                     int rank, int size, const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    throw CollectiveError("communicator: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                          " is not a member");
  // A peer that dies leaves a closed socket; writing to it must be an error
  // (EPIPE, then CollectiveError), not SIGPIPE killing this process.
  // A handler the program installed itself is kept.
  if (auto prev = std::signal(SIGPIPE, SIG_IGN); prev != SIG_DFL && prev != SIG_ERR) std::signal(SIGPIPE, prev);
  try {
    // A device (a listening socket and an event loop) per communicator. One
    // shared by a process's communicators was tried: it breaks when one
    // process holds several ranks of a group (threads) and after fork, and
    // did not measurably speed up re-formation.
    gloo::transport::tcp::attr attr;
    attr.hostname = options.host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(options.timeout);
    GlooStore gs(store, options.timeout);
    gloo::rendezvous::PrefixStore prefixed(rendezvous_prefix(group, epoch), gs);
    ctx->connectFullMesh(prefixed, device);
    return std::make_unique<GlooCommunicator>(std::move(ctx), epoch, options.timeout);
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    throw CollectiveError("communicator: group " + group + " epoch " + std::to_string(epoch) + " rank " +
                          std::to_string(rank) + " could not connect: " + e.what());
  }
}

}  // namespace spotlight::collective

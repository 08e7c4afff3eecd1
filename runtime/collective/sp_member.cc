#include "spotlight/sp_member.h"

#include <stdexcept>

#include "spotlight/head_kv.h"

namespace spotlight {

// Forwards to the backend's communicator; on the first failure it drops it,
// which closes its connections so that the peers' collectives fail too.
class SpMember::Guarded final : public collective::Communicator {
 public:
  explicit Guarded(std::unique_ptr<collective::Communicator> inner)
      : inner_(std::move(inner)), rank_(inner_->rank()), size_(inner_->size()), epoch_(inner_->epoch()) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t epoch() const override { return epoch_; }
  void all_to_all(const void* send, void* recv, size_t block) override {
    guard([&](auto& c) { c.all_to_all(send, recv, block); });
  }
  void all_gather(const void* send, void* recv, size_t bytes) override {
    guard([&](auto& c) { c.all_gather(send, recv, bytes); });
  }
  void broadcast(void* buffer, size_t bytes, int root) override {
    guard([&](auto& c) { c.broadcast(buffer, bytes, root); });
  }
  void all_reduce(void* buffer, size_t count, collective::DataType type, collective::ReduceOp op) override {
    guard([&](auto& c) { c.all_reduce(buffer, count, type, op); });
  }
  void barrier() override {
    guard([&](auto& c) { c.barrier(); });
  }
  void send(const void* buffer, size_t bytes, int peer) override {
    guard([&](auto& c) { c.send(buffer, bytes, peer); });
  }
  void recv(void* buffer, size_t bytes, int peer) override {
    guard([&](auto& c) { c.recv(buffer, bytes, peer); });
  }
  bool broken() const { return !inner_; }

 private:
  template <class F>
  void guard(F&& f) {
    if (!inner_) throw collective::CollectiveError("the group's communicator failed earlier in this epoch");
    try {
      f(*inner_);
    } catch (const collective::CollectiveError&) {
      collective::retire(std::move(inner_));  // its sockets close: the peers' collectives fail too
      throw;
    }
  }
  std::unique_ptr<collective::Communicator> inner_;
  int rank_, size_;
  uint64_t epoch_;
};

SpMember::SpMember(collective::GlooOptions options) : options_(std::move(options)) {}
SpMember::~SpMember() = default;

bool SpMember::should_yield(const TaskContext& ctx) {
  int64_t any = ctx.should_yield() ? 1 : 0;
  communicator(ctx).all_reduce(&any, 1, collective::DataType::kInt64, collective::ReduceOp::kMax);
  return any != 0;
}

uint64_t SpMember::epoch() const { return comm_ ? comm_->epoch() : 0; }

collective::Communicator& SpMember::communicator(const TaskContext& ctx) {
  const SpGroup* g = ctx.group();
  if (!g) throw std::logic_error("SpMember::communicator: this task does not run in an SP group");
  if (comm_ && !comm_->broken() && group_ == g->name && comm_->epoch() == g->epoch) return *comm_;
  if (comm_) collective::retire(std::move(comm_));  // the last formation's connections, in the background
  if (!kv_ || kv_address_ != ctx.head_address()) {
    kv_address_ = ctx.head_address();
    kv_ = head_kv(kv_address_);
  }
  comm_ = std::make_unique<Guarded>(
      collective::make_gloo_communicator(*kv_, g->name, g->epoch, g->rank, g->size, options_));
  group_ = g->name;
  ++formations_;
  return *comm_;
}

}  // namespace spotlight

// NcclCommunicator: blocking collectives on a private stream; all-to-all as
// grouped send/recv pairs (NCCL has no all-to-all primitive).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "spotlight/collective_nccl.h"

namespace spotlight::collective {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw CollectiveError(std::string(what) + ": " + ncclGetErrorString(r));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CollectiveError(std::string(what) + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt64: return ncclInt64;
  }
  throw CollectiveError("nccl: unknown data type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  throw CollectiveError("nccl: unknown reduce op");
}

class Nccl : public NcclCommunicator {
 public:
  Nccl(ncclComm_t comm, int device, uint64_t epoch) : comm_(comm), device_(device), epoch_(epoch) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
    check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount");
  }
  ~Nccl() override {
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t epoch() const override { return epoch_; }

  void all_to_all(const void* send, void* recv, size_t block) override {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      check_nccl(ncclSend(static_cast<const char*>(send) + r * block, block, ncclUint8, r, comm_, stream_), "ncclSend");
      check_nccl(ncclRecv(static_cast<char*>(recv) + r * block, block, ncclUint8, r, comm_, stream_), "ncclRecv");
    }
    check_nccl(ncclGroupEnd(), "all_to_all");
    wait("all_to_all");
  }
  void all_gather(const void* send, void* recv, size_t bytes) override {
    check_nccl(ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream_), "all_gather");
    wait("all_gather");
  }
  void broadcast(void* buffer, size_t bytes, int root) override {
    if (root < 0 || root >= size_) throw CollectiveError("broadcast: root " + std::to_string(root) + " out of range");
    check_nccl(ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, comm_, stream_), "broadcast");
    wait("broadcast");
  }
  void all_reduce(void* buffer, size_t count, DataType type, ReduceOp op) override {
    check_nccl(ncclAllReduce(buffer, buffer, count, nccl_type(type), nccl_op(op), comm_, stream_), "all_reduce");
    wait("all_reduce");
  }
  void send(const void* buffer, size_t bytes, int peer) override {
    check_peer("send", peer);
    check_nccl(ncclSend(buffer, bytes, ncclUint8, peer, comm_, stream_), "send");
    wait("send");
  }
  void recv(void* buffer, size_t bytes, int peer) override {
    check_peer("recv", peer);
    check_nccl(ncclRecv(buffer, bytes, ncclUint8, peer, comm_, stream_), "recv");
    wait("recv");
  }
  void check_peer(const char* what, int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw CollectiveError(std::string(what) + ": peer " + std::to_string(peer) + " is not another member");
  }
  void barrier() override {
    check_nccl(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    wait("barrier");
  }

  std::unique_ptr<NcclCommunicator> shrink(const std::vector<int>& excluded, uint64_t new_epoch) override {
    ncclComm_t child = nullptr;
    std::vector<int> ex(excluded);
    check_nccl(ncclCommShrink(comm_, ex.data(), int(ex.size()), &child, nullptr,
                              ex.empty() ? NCCL_SHRINK_DEFAULT : NCCL_SHRINK_ABORT),
               "ncclCommShrink");
    return std::make_unique<Nccl>(child, device_, new_epoch);
  }
  std::unique_ptr<NcclCommunicator> split(int color, int key, uint64_t new_epoch) override {
    ncclComm_t child = nullptr;
    check_nccl(ncclCommSplit(comm_, color, key, &child, nullptr), "ncclCommSplit");
    if (!child) throw CollectiveError("ncclCommSplit: this rank is in no new communicator");
    return std::make_unique<Nccl>(child, device_, new_epoch);
  }

 private:
  void wait(const char* what) {
    check_cuda(cudaStreamSynchronize(stream_), what);
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    check_nccl(async, what);
  }

  ncclComm_t comm_;
  int device_;
  uint64_t epoch_;
  int rank_ = 0, size_ = 0;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace

std::unique_ptr<NcclCommunicator> make_nccl_communicator(KvStore& store, const std::string& group, uint64_t epoch,
                                                         int rank, int size, int device,
                                                         std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    throw CollectiveError("nccl communicator: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                          " is not a member");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  const std::string key = rendezvous_prefix(group, epoch) + "/nccl-id";
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store.set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    auto v = store.wait(key, timeout);
    if (!v || v->size() != sizeof id) throw CollectiveError("nccl communicator: no unique id for " + key);
    std::memcpy(&id, v->data(), sizeof id);
  }
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  return std::make_unique<Nccl>(comm, device, epoch);
}

}  // namespace spotlight::collective

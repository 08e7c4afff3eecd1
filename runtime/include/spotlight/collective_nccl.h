// The NCCL backend of collective::Communicator, for GPU groups. Buffers are
// device pointers on the member's device; each call returns when the
// operation is complete on the communicator's own stream.
//
// Re-forming a group does not pay a fresh ncclCommInitRank (a third to half
// a second on the H200, ../shared/device/README.md): the survivors derive the
// next epoch's communicator from the live one with ncclCommShrink (dropping
// the dead ranks) or ncclCommSplit (about 15 ms).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "spotlight/collective.h"

namespace spotlight::collective {

class NcclCommunicator : public Communicator {
 public:
  virtual ~NcclCommunicator() = default;
  // The next epoch without the `excluded` ranks (ncclCommShrink; on a
  // failure the parent's pending work is aborted first). Every survivor calls
  // it with the same list. Ranks are renumbered in order.
  virtual std::unique_ptr<NcclCommunicator> shrink(const std::vector<int>& excluded, uint64_t new_epoch) = 0;
  // The next epoch among the ranks that pass the same color, ordered by key
  // (ncclCommSplit). Every rank calls it.
  virtual std::unique_ptr<NcclCommunicator> split(int color, int key, uint64_t new_epoch) = 0;
};

// Joins `group` at `epoch` as `rank` of `size` on CUDA device `device`: rank
// 0 publishes the NCCL unique id in the store, the others read it.
std::unique_ptr<NcclCommunicator> make_nccl_communicator(KvStore& store, const std::string& group, uint64_t epoch,
                                                         int rank, int size, int device,
                                                         std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace spotlight::collective

// An actor's side of its SP group: the communicator of the formation its
// current task runs in, built at the first task of each epoch (the members
// rendezvous in the head's KV) and reused by the next tasks of that epoch.
//
//   class Explorer {
//     spotlight::SpMember sp_;
//     Latent rollout(spotlight::TaskContext& ctx, Request r) {
//       collective::Communicator& comm = sp_.communicator(ctx);
//       ... Ulysses attention through comm ...
//     }
//   };
//
// When one collective fails, the communicator closes its connections, so
// every other member's pending collective fails at once instead of waiting
// for a timeout: the whole group gives its task back and the head re-forms
// it around the survivors. Link spotlight_sp.
#pragma once

#include <memory>
#include <string>

#include "spotlight/collective.h"
#include "spotlight/task.h"

namespace spotlight {

class SpMember {
 public:
  explicit SpMember(collective::GlooOptions options = {});
  ~SpMember();
  SpMember(const SpMember&) = delete;
  SpMember& operator=(const SpMember&) = delete;

  // The communicator of ctx's group and epoch. Throws std::logic_error for a
  // task that does not run in a group, collective::CollectiveError if the
  // members do not all arrive (the task then goes back to its mailbox).
  collective::Communicator& communicator(const TaskContext& ctx);
  // TaskContext::should_yield() agreed by the whole group: true on every
  // member when any member's machine has notice (one all-reduce). Members
  // that check it at the same step yield together, after the same commit,
  // and none is left waiting in a collective for one that left.
  bool should_yield(const TaskContext& ctx);
  // Epoch of the communicator held now (0: none).
  uint64_t epoch() const;
  // Communicators built so far (one per formation this member was part of).
  int formations() const { return formations_; }

 private:
  class Guarded;
  collective::GlooOptions options_;
  std::string kv_address_;
  std::shared_ptr<collective::KvStore> kv_;
  std::string group_;
  std::unique_ptr<Guarded> comm_;
  int formations_ = 0;
};

}  // namespace spotlight

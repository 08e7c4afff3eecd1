// One head turn's events, journaled and applied to the state together, as
// the head does: for tests of the store and of the head's state. The entry
// is appended when the turn ends (end() or the destructor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "head/state.h"
#include "spotlight/codec.h"
#include "store/store.h"

namespace spotlight::testing {

struct JournalTurn {
  store::Store& s;
  head::State& st;
  head::Journal j;

  void pool(const store::PoolRecord& p) { j.add(head::EventKind::kPool, p), st.apply_pool(p); }
  void accept(const store::TaskRecord& t) {
    j.add(head::EventKind::kAccept, t), st.apply_accept(t);
  }
  void lease(uint64_t id, uint64_t epoch, const std::string& node = "n1") {
    head::LeaseEvent e{id, epoch, 1, node};
    j.add(head::EventKind::kLease, e), st.apply_lease(e);
  }
  void finish(uint64_t id, int64_t value = 1) {
    head::FinishEvent e{id, true, 0, "", Blob{pack(value)}};
    j.add(head::EventKind::kFinish, e), st.apply_finish(e);
  }
  void requeue(uint64_t id) {
    head::RequeueEvent e{id, false};
    j.add(head::EventKind::kRequeue, e), st.apply_requeue(e);
  }
  void commit(uint64_t id, uint64_t epoch, const std::string& state) {
    head::CommitEvent e{id, epoch, Blob{state}};
    j.add(head::EventKind::kCommit, e), st.apply_commit(e);
  }
  void claim(uint64_t id, uint32_t caller) {
    head::ClaimEvent e{id, caller};
    j.add(head::EventKind::kClaim, e), st.apply_claim(e);
  }
  void forget(uint64_t id, uint32_t caller) {
    auto done = st.apply_forget({id}, caller);
    if (!done.empty()) j.add(head::EventKind::kForget, done);
  }
  void end() {
    if (!j.empty()) s.append(j.bytes());
    j.clear();
  }
  ~JournalTurn() { end(); }
};

}  // namespace spotlight::testing

// The calls a running task makes (TaskContext::runtime(), spotlight/task.h)
// and how they are numbered (wire/child_ids.h).
#include "spotlight/spotlight.h"
#include "wire/child_ids.h"

namespace spotlight {

namespace detail {

uint64_t CallOrigin::next_key() {
  std::lock_guard<std::mutex> l(mu_);
  return wire::child_call_key(lineage_, rank, next_++);
}

void CallOrigin::rebase(uint64_t lineage) {
  std::lock_guard<std::mutex> l(mu_);
  lineage_ = lineage;
  next_ = 0;
}

}  // namespace detail

Runtime TaskContext::runtime() {
  // One numbering for the whole run, however many runtimes it asks for.
  if (!origin_) {
    const SpGroup* g = group();
    // Only runs that make calls pay for hashing the state they resumed from.
    if (!committed_ && resume_) lineage_ = wire::commit_lineage(*resume_);
    origin_ = std::make_shared<detail::CallOrigin>(id_, g ? g->rank : 0, lineage_);
  }
  return Runtime(host_.caller(), origin_);
}

void TaskContext::rebase(const std::string& committed) {
  lineage_ = wire::commit_lineage(committed);
  committed_ = true;
  if (origin_) origin_->rebase(lineage_);
}

}  // namespace spotlight

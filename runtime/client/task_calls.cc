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

namespace {
thread_local TaskContext* t_running = nullptr;
}  // namespace

TaskContext* running_task() {
  return t_running;
}
void set_running_task(TaskContext* ctx) {
  t_running = ctx;
}

std::pair<std::shared_ptr<Client>, std::shared_ptr<CallOrigin>> task_binding(
    const std::string& handle) {
  TaskContext* ctx = running_task();
  if (!ctx) {
    throw std::logic_error("the handle to '" + handle +
                           "' came in a call's arguments or result: it calls from the task that "
                           "received it, on that task's thread; elsewhere take one by name, "
                           "rt.actor<A>(handle.name())");
  }
  Runtime rt = ctx->runtime();
  return {rt.client_, rt.origin_};
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

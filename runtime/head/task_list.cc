// The calls the head holds, for operators (`spotlight tasks`) and programs
// (Runtime::tasks): which are waiting, where the leased ones run, how the
// finished ones ended. Read-only. Leased calls (all, or one node's), and a
// pool's waiting ones, come from the head's indexes (State::leased_on, the
// pool's mailbox); other queries scan the task table, which a million
// queued calls make a pause of tens of milliseconds.
#include <algorithm>
#include <stdexcept>

#include "head/head.h"

namespace spotlight::head {

namespace {
const char* state_name(TaskState s) {
  switch (s) {
    case TaskState::kQueued:
      return "queued";
    case TaskState::kLeased:
      return "leased";
    case TaskState::kDone:
      return "done";
  }
  return "unknown";
}

// Throws unless `o` is "ok", "error", or an error kind's name (to_string(ErrorKind)).
void check_outcome(const std::string& o) {
  if (o == "ok" || o == "error") return;
  std::string kinds;
  for (int k = static_cast<int>(ErrorKind::kMethod); k <= static_cast<int>(ErrorKind::kCancelled);
       ++k) {
    const char* name = to_string(static_cast<ErrorKind>(k));
    if (o == name) return;
    kinds += (kinds.empty() ? "" : ", ") + std::string(name);
  }
  throw std::invalid_argument("an outcome is ok, error or an error kind (" + kinds + "), not '" +
                              o + "'");
}

const char* outcome_of(const Task& t) {
  return t.ok ? "ok" : to_string(static_cast<ErrorKind>(t.kind));
}

// The state a query asks for: its own, or the one its node or outcome implies.
std::string wanted_state(const TaskQuery& q) {
  if (!q.node.empty() && !q.outcome.empty())
    throw std::invalid_argument("a query by node lists leased calls, which have no outcome yet");
  const char* implied = !q.node.empty() ? "leased" : !q.outcome.empty() ? "done" : nullptr;
  if (implied && !q.state.empty() && q.state != implied) {
    throw std::invalid_argument(std::string("a query by ") + (q.node.empty() ? "outcome" : "node") +
                                " lists " + implied + " calls, not " + q.state + " ones");
  }
  return implied ? implied : q.state;
}
}  // namespace

TaskList Head::list_tasks(const TaskQuery& q) const {
  if (!q.state.empty() && q.state != "queued" && q.state != "leased" && q.state != "done") {
    throw std::invalid_argument("a task's state is queued, leased or done, not '" + q.state + "'");
  }
  if (q.limit < 1 || q.limit > kMaxTaskList) {
    throw std::invalid_argument("a task list holds 1 to " + std::to_string(kMaxTaskList) +
                                " tasks, not " + std::to_string(q.limit));
  }
  if (!q.outcome.empty()) check_outcome(q.outcome);
  const std::string state = wanted_state(q);
  std::vector<const Task*> match;
  auto consider = [&](const Task& t) {
    if (!q.mailbox.empty() && t.mailbox != q.mailbox) return;
    if (!state.empty() && state != state_name(t.state)) return;
    if (!q.method.empty() && t.method != q.method) return;
    if (q.caller != 0 && t.caller != q.caller) return;
    if (!q.outcome.empty()) {
      if (q.outcome == "error" ? t.ok : q.outcome != outcome_of(t)) return;
    }
    match.push_back(&t);
  };
  if (!q.node.empty()) {
    if (auto it = state_.leased_on.find(q.node); it != state_.leased_on.end()) {
      for (uint64_t id : it->second) consider(state_.tasks.at(id));
    }
  } else if (state == "leased") {
    for (const auto& [node, ids] : state_.leased_on) {
      for (uint64_t id : ids) consider(state_.tasks.at(id));
    }
  } else if (state == "queued" && !q.mailbox.empty()) {
    if (auto p = state_.pools.find(q.mailbox); p != state_.pools.end()) {
      for (uint64_t id : p->second.queue.ids()) {
        if (auto t = state_.tasks.find(id); t != state_.tasks.end()) consider(t->second);
      }
    }
  } else {
    for (const auto& [id, t] : state_.tasks) consider(t);
  }
  TaskList out;
  out.matching = match.size();
  const size_t n = std::min<size_t>(q.limit, match.size());
  auto by_arrival = [](const Task* a, const Task* b) { return a->ord < b->ord; };
  std::partial_sort(match.begin(), match.begin() + static_cast<std::ptrdiff_t>(n), match.end(),
                    by_arrival);
  out.tasks.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Task& t = *match[i];
    TaskInfo info;
    info.id = t.id;
    info.mailbox = t.mailbox;
    info.method = t.method;
    info.state = state_name(t.state);
    info.priority = t.priority;
    info.attempts = t.attempts;
    info.max_attempts = t.max_attempts;
    info.caller = t.caller;
    info.parent = t.parent;
    if (t.state == TaskState::kLeased) {
      info.node = t.node;
      info.actor = t.actor;
    }
    info.has_checkpoint = t.has_checkpoint;
    info.deadline_ms = t.deadline_ms;
    if (t.state == TaskState::kDone) info.outcome = outcome_of(t);
    info.args_bytes = t.args.data.size();
    auto ms_since = [&](transport::Clock::time_point at) -> int64_t {
      if (at == transport::Clock::time_point{}) return -1;
      return std::chrono::duration_cast<std::chrono::milliseconds>(now_ - at).count();
    };
    info.age_ms = ms_since(t.accepted_at);
    // Accepted by an earlier boot: its stored wall-clock time tells.
    if (info.age_ms < 0 && t.accepted_ms != 0)
      info.age_ms = std::max<int64_t>(0, wall_ms_ - t.accepted_ms);
    if (t.state != TaskState::kDone) info.in_state_ms = ms_since(t.since);
    out.tasks.push_back(std::move(info));
  }
  return out;
}

}  // namespace spotlight::head

// Actor types for the tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "spotlight/codec.h"
#include "spotlight/spotlight.h"
#include "spotlight/task.h"

namespace testing_actors {

// Counts how often each key ran: a task that ran twice shows up here.
class Recorder {
 public:
  int64_t record(int64_t key);
  struct Stats {
    int64_t executions = 0;
    int64_t distinct = 0;
    MSGPACK_DEFINE(executions, distinct)
  };
  Stats stats() const;

 private:
  std::set<int64_t> seen_;
  int64_t executions_ = 0;
};

// Tells which member ran a call, and fails on request.
class Worker {
 public:
  std::string who();
  int64_t twice(int64_t x) { return 2 * x; }
  int64_t fail(std::string message);  // throws std::invalid_argument(message)
  std::vector<std::string> echo_many(std::vector<std::string> v) { return v; }
  std::string blob(int64_t bytes) { return std::string(static_cast<size_t>(bytes), 'b'); }
};

// Calls actors through handles it is given: ActorHandle as an argument and a result.
class Relay {
 public:
  int64_t twice_via(spotlight::ActorHandle<Worker> w, int64_t x);
  spotlight::ActorHandle<Worker> echo(spotlight::ActorHandle<Worker> w) { return w; }
  // Hands both handles on to `next`, which calls `w` through its own task.
  int64_t pass_on(spotlight::ActorHandle<Relay> next, spotlight::ActorHandle<Worker> w, int64_t x);
};

// A task that waits until the test opens its gate (creates DIR/open), then
// appends its key to DIR/runs: each line there is one run.
class Gate {
 public:
  int64_t pass(std::string dir, int64_t key);
  // The same, after a commit that tells the head (its `commits` counter) it started.
  int64_t enter_and_pass(spotlight::TaskContext& ctx, std::string dir, int64_t key);
};
// The keys that passed the gate in DIR, in the order they ran.
inline std::vector<int64_t> gate_runs(const std::string& dir) {
  std::ifstream in(dir + "/runs");
  std::vector<int64_t> keys;
  for (int64_t k; in >> k;) keys.push_back(k);
  return keys;
}
inline void open_gate(const std::string& dir) {
  std::ofstream(dir + "/open").put('\n');
}

// Runs until its call is cancelled (TaskContext::cancelled()).
struct SpinCounts {
  int64_t runs = 0;  // runs of until_cancelled that started on this actor
  int64_t seen = 0;  // of those, the ones that saw their call cancelled
  MSGPACK_DEFINE(runs, seen)
};
class Spinner {
 public:
  // Writes its task id to DIR/KEY.id, commits (the head's `commits` counter
  // tells a test it runs), then waits until the call is cancelled and
  // returns `key`; throws after 60 s.
  int64_t until_cancelled(spotlight::TaskContext& ctx, std::string dir, int64_t key);
  // Calls the Spinner pool `spinners`.until_cancelled(dir, key) from inside
  // the task and waits for it: the call a cancelled task made.
  int64_t wait_on(spotlight::TaskContext& ctx, std::string spinners, std::string dir, int64_t key);
  SpinCounts counts() const { return counts_; }

 private:
  SpinCounts counts_;
};

// A stateful actor with save/restore hooks: its total survives its machine.
class Ledger {
 public:
  int64_t add(int64_t x) { return total_ += x; }
  int64_t total() const { return total_; }
  int64_t pid() const;
  std::string save() const { return spotlight::pack(total_); }
  void restore(std::string_view state) { total_ = spotlight::unpack<int64_t>(state); }

 private:
  int64_t total_ = 0;
};

// A task of K steps that commits after every step and yields on notice, as
// an explorer does with its denoising steps.
struct StepState {
  int64_t step = 0;      // steps done in the committed lineage
  MSGPACK_DEFINE(step)
};
struct StepReport {
  int64_t key = 0;
  uint32_t attempt = 0;    // of the run that finished
  bool resumed = false;
  int64_t started_at = 0;  // the step the finishing run started from
  int64_t ran = 0;         // steps the finishing run executed
  int64_t pid = 0;         // where it finished
  MSGPACK_DEFINE(key, attempt, resumed, started_at, ran, pid)
};
class Stepper {
 public:
  StepReport run(spotlight::TaskContext& ctx, int64_t key, int64_t steps, int64_t step_ms);
};

// Makes calls of its own from inside its tasks (TaskContext::runtime()).
struct FanoutReport {
  int64_t sum = 0;
  uint32_t attempt = 0;  // of the run that finished
  int64_t pid = 0;       // where it finished
  MSGPACK_DEFINE(sum, attempt, pid)
};
class Fanout {
 public:
  // Sums `pool`.twice(i) for i in [0, n), all calls in flight at once.
  FanoutReport twice_all(spotlight::TaskContext& ctx, std::string pool, int64_t n);
  // Has the Recorder `recorder` record key i % 3 for i in [0, n), committing
  // its progress after i == commit_at (-1: never), then passes the Gate
  // `gate` with key 1000 (`dir` is the gate's); returns the sum of the keys
  // and of the gate's answer. A run resumed from the commit goes on from there.
  FanoutReport record_then_pass(spotlight::TaskContext& ctx, std::string recorder, std::string gate,
                                std::string dir, int64_t n, int64_t commit_at);
  // Creates a pool of `members` Workers named `name` from inside the task and
  // returns which members answered `calls` calls of `who`.
  std::set<std::string> spawn_and_ask(spotlight::TaskContext& ctx, std::string name,
                                      int64_t members, int64_t calls);
};

// Puts and gets blobs through its node's object store.
struct ObjectView {
  uint64_t size = 0;
  uint64_t digest = 0;  // std::hash of the bytes
  int64_t pid = 0;      // of the node that served the get
  uint64_t local_hits = 0, fetches = 0, evictions = 0, objects = 0, bytes = 0;  // the node's store
  MSGPACK_DEFINE(size, digest, pid, local_hits, fetches, evictions, objects, bytes)
};
// `size` bytes that depend on `seed` only.
std::string object_bytes(int64_t size, int64_t seed);
class ObjectUser {
 public:
  void put(spotlight::TaskContext& ctx, std::string id, int64_t size, int64_t seed);
  ObjectView get(spotlight::TaskContext& ctx, std::string id, int64_t timeout_ms);
  bool contains(spotlight::TaskContext& ctx, std::string id);
  void release(spotlight::TaskContext& ctx, std::string id);
  ObjectView stats(spotlight::TaskContext& ctx);
};

}  // namespace testing_actors

#include "support/test_actors.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "spotlight/actor.h"

namespace testing_actors {

int64_t Recorder::record(int64_t key) {
  ++executions_;
  seen_.insert(key);
  return key;
}

Recorder::Stats Recorder::stats() const {
  return Stats{executions_, static_cast<int64_t>(seen_.size())};
}

std::string Worker::who() {
  return std::to_string(getpid()) + ":" + std::to_string(reinterpret_cast<uintptr_t>(this));
}

int64_t Worker::fail(std::string message) { throw std::invalid_argument(message); }

int64_t Ledger::pid() const { return getpid(); }

int64_t Gate::pass(std::string dir, int64_t key) {
  const std::string open_path = dir + "/open";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // The gate is a file another process creates: nothing to wait on but its existence.
  while (access(open_path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("the gate never opened");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::string line = std::to_string(key) + "\n";
  const int fd = ::open((dir + "/runs").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot record the run in " + dir);
  ::close(fd);
  return key;
}

StepReport Stepper::run(spotlight::TaskContext& ctx, int64_t key, int64_t steps, int64_t step_ms) {
  StepState s = ctx.resume_value<StepState>().value_or(StepState{});
  StepReport r{key, ctx.attempt(), ctx.resumed(), s.step, 0, getpid()};
  while (s.step < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));  // the step's work
    ++s.step;
    ++r.ran;
    ctx.commit_value(s);
    if (ctx.should_yield() && s.step < steps) ctx.yield();
  }
  return r;
}

std::string object_bytes(int64_t size, int64_t seed) {
  std::string b(static_cast<size_t>(size), '\0');
  uint64_t x = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + 1;
  for (auto& c : b) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  return b;
}

namespace {
ObjectView view_of(spotlight::TaskContext& ctx, const spotlight::ObjectRef& data) {
  spotlight::ObjectStats st = ctx.objects().stats();
  ObjectView v;
  if (data) {
    v.size = data->size();
    v.digest = std::hash<std::string_view>{}(*data);
  }
  v.pid = getpid();
  v.local_hits = st.local_hits;
  v.fetches = st.fetches;
  v.evictions = st.evictions;
  v.objects = st.objects;
  v.bytes = st.bytes;
  return v;
}
}  // namespace

void ObjectUser::put(spotlight::TaskContext& ctx, std::string id, int64_t size, int64_t seed) {
  ctx.objects().put(id, object_bytes(size, seed));
}
ObjectView ObjectUser::get(spotlight::TaskContext& ctx, std::string id, int64_t timeout_ms) {
  return view_of(ctx, ctx.objects().get(id, std::chrono::milliseconds(timeout_ms)));
}
bool ObjectUser::contains(spotlight::TaskContext& ctx, std::string id) { return ctx.objects().contains(id); }
void ObjectUser::release(spotlight::TaskContext& ctx, std::string id) { ctx.objects().release(id); }
ObjectView ObjectUser::stats(spotlight::TaskContext& ctx) { return view_of(ctx, nullptr); }

}  // namespace testing_actors

SPOTLIGHT_ACTOR(testing_actors::Recorder, record, stats)
SPOTLIGHT_ACTOR(testing_actors::Stepper, run)
SPOTLIGHT_ACTOR(testing_actors::Gate, pass)
SPOTLIGHT_ACTOR(testing_actors::Ledger, add, total, pid)
SPOTLIGHT_ACTOR(testing_actors::Worker, who, twice, fail, echo_many, blob)
SPOTLIGHT_ACTOR(testing_actors::ObjectUser, put, get, contains, release, stats)

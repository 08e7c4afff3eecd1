#include "support/test_actors.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "spotlight/spotlight.h"

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

int64_t Relay::twice_via(spotlight::ActorHandle<Worker> w, int64_t x) {
  return w.call(&Worker::twice, x).get();
}

int64_t Relay::pass_on(spotlight::ActorHandle<Relay> next, spotlight::ActorHandle<Worker> w,
                       int64_t x) {
  return next.call(&Relay::twice_via, w, x).get();
}

int64_t Spinner::until_cancelled(spotlight::TaskContext& ctx, std::string dir, int64_t key) {
  ++counts_.runs;
  std::ofstream(dir + "/" + std::to_string(key) + ".id") << ctx.task_id() << "\n";
  ctx.commit("started");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // The flag is set by the node's loop when the head's Cancel comes: polled,
  // as a long task polls it between its steps.
  while (!ctx.cancelled()) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("the call was never cancelled");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ++counts_.seen;
  return key;
}

int64_t Spinner::wait_on(spotlight::TaskContext& ctx, std::string spinners, std::string dir,
                         int64_t key) {
  return ctx.runtime().actor<Spinner>(spinners).call(&Spinner::until_cancelled, dir, key).get();
}

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

int64_t Gate::enter_and_pass(spotlight::TaskContext& ctx, std::string dir, int64_t key) {
  ctx.commit("entered");
  return pass(std::move(dir), key);
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

FanoutReport Fanout::twice_all(spotlight::TaskContext& ctx, std::string pool, int64_t n) {
  auto workers = ctx.runtime().actor<Worker>(pool);
  std::vector<spotlight::Future<int64_t>> answers;
  for (int64_t i = 0; i < n; ++i) answers.push_back(workers.call(&Worker::twice, i));
  FanoutReport r{0, ctx.attempt(), getpid()};
  for (auto& a : answers) r.sum += a.get();
  return r;
}

FanoutReport Fanout::record_then_pass(spotlight::TaskContext& ctx, std::string recorder,
                                      std::string gate, std::string dir, int64_t n,
                                      int64_t commit_at) {
  spotlight::Runtime rt = ctx.runtime();
  auto rec = rt.actor<Recorder>(recorder);
  // (next i, sum so far), as committed
  auto [i, sum] =
      ctx.resume_value<std::pair<int64_t, int64_t>>().value_or(std::pair<int64_t, int64_t>{0, 0});
  for (; i < n; ++i) {
    sum += rec.call(&Recorder::record, i % 3).get();
    if (i == commit_at) ctx.commit_value(std::make_pair(i + 1, sum));
  }
  sum += rt.actor<Gate>(gate).call(&Gate::pass, dir, int64_t{1000}).get();
  return FanoutReport{sum, ctx.attempt(), getpid()};
}

std::set<std::string> Fanout::spawn_and_ask(spotlight::TaskContext& ctx, std::string name,
                                            int64_t members, int64_t calls) {
  auto pool = ctx.runtime().pool<Worker>(
      name, spotlight::on_market("any").members(static_cast<int>(members)));
  std::vector<spotlight::Future<std::string>> answers;
  for (int64_t i = 0; i < calls; ++i) answers.push_back(pool.call(&Worker::who));
  std::set<std::string> who;
  for (auto& a : answers) who.insert(a.get());
  return who;
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
SPOTLIGHT_ACTOR(testing_actors::Gate, pass, enter_and_pass)
SPOTLIGHT_ACTOR(testing_actors::Fanout, twice_all, record_then_pass, spawn_and_ask)
SPOTLIGHT_ACTOR(testing_actors::Ledger, add, total, pid)
SPOTLIGHT_ACTOR(testing_actors::Relay, twice_via, echo, pass_on)
SPOTLIGHT_ACTOR(testing_actors::Spinner, until_cancelled, wait_on, counts)
SPOTLIGHT_ACTOR(testing_actors::Worker, who, twice, fail, echo_many, blob)
SPOTLIGHT_ACTOR(testing_actors::ObjectUser, put, get, contains, release, stats)

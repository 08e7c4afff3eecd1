#include "tools/spotlight/bench_actors.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "spotlight/actor.h"

namespace spotlight::bench {

namespace {
// One append-only file per node process; O_APPEND writes of a line are atomic.
int step_log() {
  static int fd = [] {
    const char* dir = std::getenv("SPOTLIGHT_STEP_LOG");
    if (!dir) return -1;
    std::string path = std::string(dir) + "/steps-" + std::to_string(getpid()) + ".log";
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }();
  return fd;
}
}  // namespace

double echo_sync(ActorHandle<Echo>& h, int64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (h.call(&Echo::ping, i).get() != i) throw std::runtime_error("wrong echo");
  }
  return static_cast<double>(n) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double echo_pipelined(ActorHandle<Echo>& h, int64_t n, int64_t window) {
  std::vector<Future<int64_t>> futures(static_cast<size_t>(n));
  const auto t0 = std::chrono::steady_clock::now();
  int64_t waited = 0;
  auto check = [&](int64_t i) {
    if (futures[static_cast<size_t>(i)].get() != i) throw std::runtime_error("wrong echo");
  };
  for (int64_t i = 0; i < n; ++i) {
    futures[static_cast<size_t>(i)] = h.call(&Echo::ping, i);
    if (i - waited >= window) check(waited++);
  }
  for (; waited < n; ++waited) check(waited);
  return static_cast<double>(n) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

namespace {
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
};
Latch& gate_latch() {
  static Latch l;
  return l;
}
}  // namespace

int64_t Gate::pass(int64_t x) {
  Latch& l = gate_latch();
  std::unique_lock<std::mutex> lock(l.mu);
  l.cv.wait(lock, [&] { return l.open; });
  return x;
}

void Gate::open() {
  Latch& l = gate_latch();
  {
    std::lock_guard<std::mutex> lock(l.mu);
    l.open = true;
  }
  l.cv.notify_all();
}

void Gate::close() {
  Latch& l = gate_latch();
  std::lock_guard<std::mutex> lock(l.mu);
  l.open = false;
}

double Caller::run(TaskContext& ctx, std::string echo, int64_t n, int64_t window) {
  auto h = ctx.runtime().actor<Echo>(echo);
  return echo_pipelined(h, n, window);
}

StepResult Stepper::run(TaskContext& ctx, int64_t key, int64_t steps, int64_t step_ms) {
  int64_t step = ctx.resume_value<int64_t>().value_or(0);
  while (step < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));  // the step's work
    ++step;
    if (int fd = step_log(); fd >= 0) {
      std::string line = std::to_string(key) + " " + std::to_string(step) + "\n";
      ssize_t w = ::write(fd, line.data(), line.size());
      (void)w;
    }
    ctx.commit_value(step);
    if (ctx.should_yield() && step < steps) ctx.yield();
  }
  return StepResult{key, ctx.attempt(), ctx.resumed()};
}

namespace {
ObjectTiming timing(TaskContext& ctx, std::chrono::steady_clock::time_point t0, uint64_t bytes) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  ObjectStats st = ctx.objects().stats();
  return ObjectTiming{ns.count(), bytes, st.local_hits, st.fetches};
}
}  // namespace

ObjectTiming ObjectBench::put(TaskContext& ctx, std::string id, int64_t bytes) {
  std::string data(static_cast<size_t>(bytes), '\0');
  for (size_t i = 0; i < data.size(); i += 4096) data[i] = static_cast<char>(i / 4096);  // not all zeros
  const auto t0 = std::chrono::steady_clock::now();
  ctx.objects().put(id, std::move(data));
  return timing(ctx, t0, static_cast<uint64_t>(bytes));
}

ObjectTiming ObjectBench::get(TaskContext& ctx, std::string id) {
  const auto t0 = std::chrono::steady_clock::now();
  ObjectRef w = ctx.objects().get(id, std::chrono::seconds(60));
  return timing(ctx, t0, w->size());
}

SpStepTimes SpStepper::run(TaskContext& ctx, int64_t steps, int64_t step_ms) {
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  collective::Communicator& comm = sp.communicator(ctx);
  SpStepTimes t;
  t.comm_ready_ns = now_ns();
  int64_t step = ctx.resume_value<int64_t>().value_or(0);
  while (step < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));  // the step's work
    int64_t v = step;
    comm.all_reduce(&v, 1, collective::DataType::kInt64, collective::ReduceOp::kSum);
    if (t.first_step_ns == 0) t.first_step_ns = now_ns();
    ctx.commit_value(++step);
    if (step < steps && sp.should_yield(ctx)) ctx.yield();
  }
  t.resumed = ctx.resumed();
  t.attempt = ctx.attempt();
  t.epoch = ctx.group()->epoch;
  return t;
}

}  // namespace spotlight::bench

SPOTLIGHT_ACTOR(spotlight::bench::Echo, ping)
SPOTLIGHT_ACTOR(spotlight::bench::Caller, run)
SPOTLIGHT_ACTOR(spotlight::bench::Gate, pass, open, close)
SPOTLIGHT_ACTOR(spotlight::bench::SpStepper, run)
SPOTLIGHT_ACTOR(spotlight::bench::ObjectBench, put, get)
SPOTLIGHT_ACTOR(spotlight::bench::Stepper, run)

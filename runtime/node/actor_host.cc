#include "node/actor_host.h"

#include <cxxabi.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <typeinfo>

namespace spotlight::node {

namespace {
std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  return s;
}

wire::Completion failure(const wire::Task& t, ErrorKind kind, std::string type, std::string msg) {
  return wire::Completion{t.id, t.actor_id, t.epoch, false, static_cast<int32_t>(kind),
                          std::move(type), Blob{std::move(msg)}};
}
}  // namespace

void Outgoing::done(wire::Completion c) {
  bool wake;
  {
    std::lock_guard<std::mutex> l(mu_);
    wake = done_.empty() && placed_.empty();
    done_.push_back(std::move(c));
  }
  if (wake) waker_.notify();  // one wake-up per batch, not per result
}

void Outgoing::placed(wire::Placed p) {
  {
    std::lock_guard<std::mutex> l(mu_);
    placed_.push_back(std::move(p));
  }
  waker_.notify();
}

void Outgoing::take(std::vector<wire::Completion>& done, std::vector<wire::Placed>& placed) {
  std::lock_guard<std::mutex> l(mu_);
  done.swap(done_);
  placed.swap(placed_);
  done_.clear();
  placed_.clear();
}

ActorHost::ActorHost(uint64_t actor_id, uint32_t incarnation, const detail::ActorTypeInfo& type,
                     Outgoing& out)
    : id_(actor_id), incarnation_(incarnation), type_(type), out_(out) {
  thread_ = std::thread([this] { loop(); });
}

ActorHost::~ActorHost() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void ActorHost::push(wire::Task t) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(t));
  }
  cv_.notify_one();
}

wire::Completion ActorHost::run(wire::Task& t) {
  auto it = type_.methods.find(t.method);
  if (it == type_.methods.end()) {
    return failure(t, ErrorKind::kRejected, "rejected",
                   type_.name + " has no method '" + t.method + "'");
  }
  try {
    std::string out = it->second(instance_.get(), t.args.data);
    return wire::Completion{t.id, t.actor_id, t.epoch, true, 0, "", Blob{std::move(out)}};
  } catch (const BadArguments& e) {
    return failure(t, ErrorKind::kRejected, "rejected", e.what());
  } catch (const std::exception& e) {
    return failure(t, ErrorKind::kMethod, demangle(typeid(e).name()), e.what());
  } catch (...) {
    return failure(t, ErrorKind::kMethod, "unknown", "a non-standard exception was thrown");
  }
}

void ActorHost::loop() {
  wire::Placed placed{id_, incarnation_, true, ""};
  try {
    instance_ = type_.create();
  } catch (const std::exception& e) {
    placed.ok = false;
    placed.error = std::string("constructor threw: ") + e.what();
  }
  out_.placed(placed);
  if (!placed.ok) return;
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    wire::Task t = std::move(queue_.front());
    queue_.pop_front();
    l.unlock();
    out_.done(run(t));
    l.lock();
  }
  l.unlock();
  instance_.reset();  // the actor is destroyed on its own thread
}

}  // namespace spotlight::node

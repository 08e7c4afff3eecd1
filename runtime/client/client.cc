#include "client/client.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/ids.h"
#include "spotlight/spotlight.h"
#include "transport/spin.h"
#include "wire/child_ids.h"

namespace spotlight {
namespace detail {

namespace {
// Calls go to the head in frames of about this much: the head reads a frame
// whole, at about 1 us a call, so a frame of 1 MiB held it 10-36 ms, however
// short its turns. At 64 KiB (less in small calls: the estimate below is
// generous) that is a few ms, and a flood still travels in frames of a
// thousand calls or more.
constexpr size_t kBatchBytes = 64u << 10;
constexpr auto kAckDelay = std::chrono::milliseconds(5);
constexpr size_t kMaxAcks = 16384;
constexpr size_t kMaxFetchIds = 65536;  // ids per Fetch frame: 0.6 MiB
// A waiting caller reads the socket itself while at most this many calls are in flight.
constexpr size_t kLeadMaxPending = 16;
}

Client::Client(std::string address, ConnectOptions options, std::string node_id)
    : address_(std::move(address)),
      opt_(options),
      id_("client-" + common::random_id()),
      node_id_(std::move(node_id)) {
  // Its handshakes are watched for its whole life: a head that refuses its
  // key (at connect, or when it comes back with another) is said at once.
  dealer_ = transport::make_dealer(transport::endpoint(address_), id_,
                                   transport::resolve_key(opt_.cluster_key), true, &handshakes_);
  dealer_fd_ = dealer_.get(zmq::sockopt::fd);
  welcome_ = std::make_shared<FutureState>();
  io_ = std::thread([this] { io_loop(); });
  // The I/O thread resolves welcome_: welcomed, or refused (check_handshakes).
  bool answered = welcome_->wait_until(std::chrono::steady_clock::now() + opt_.connect_timeout);
  if (!answered || !welcome_->ok) {
    stop_ = true;
    waker_.notify();
    io_.join();
    throw ConnectionError(answered ? welcome_->payload
                                   : "no answer from a head at " + address_ + " within " +
                                         std::to_string(opt_.connect_timeout.count()) + " ms");
  }
}

void Client::check_handshakes(transport::Clock::time_point now) {
  // At most every 20 ms (the I/O thread's idle wake-up while connecting):
  // nothing on a call's path.
  if (now < next_handshake_check_) return;
  next_handshake_check_ = now + std::chrono::milliseconds(20);
  handshakes_->drain();
  if (!handshakes_->refused()) return;
  std::string why = handshakes_->refused_by("the head at " + address_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!refused_.empty()) return;
    refused_ = why;
  }
  // libzmq does not reconnect after such a refusal: nothing this client
  // waits for can come any more.
  if (is_welcomed()) spdlog::error("client {}: {}", id_, why);
  welcome_->resolve(false, why, ErrorKind::kConnection, "connection");
  fail_pending(why);
}

Client::~Client() {
  {
    std::lock_guard<std::mutex> l(objects_mu_);
    objects_.reset();  // takes this driver's copies out of the head's directory
  }
  stop_ = true;
  room_.notify_all();
  waker_.notify();
  io_.join();
  fail_pending();
}

void Client::fail_pending(const std::string& why) {
  std::unordered_map<uint64_t, Pending> failed;
  {
    std::lock_guard<std::mutex> l(mu_);
    failed.swap(pending_);
    outq_.clear();
  }
  room_.notify_all();
  for (auto& [id, p] : failed) {
    p.state->resolve(false, why, ErrorKind::kConnection, "connection");
  }
}

bool Client::abandoned() const {
  // Waiters hold a reference each while they wait (FutureState::wait_until);
  // when those are all there is, no Runtime or handle holds this client.
  return weak_from_this().use_count() <= waiting_.load();
}

void Client::leave_socket() {
  // The I/O thread sleeps on timers from its own last pump; a client that
  // lost its head must say hello again within 100 ms, not a heartbeat.
  if (!is_welcomed()) waker_.notify();
}

bool Client::is_welcomed() {
  std::lock_guard<std::mutex> l(mu_);
  return welcomed_;
}

size_t Client::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.size();
}

std::shared_ptr<FutureState> Client::submit(const std::string& mailbox, const std::string& method,
                                            std::string args, const CallOptions& options,
                                            CallOrigin* origin) {
  auto state = std::make_shared<FutureState>();
  state->waiter = weak_from_this();
  // A task's call: its id follows from its parent, its number and what it
  // calls (hashed here, outside the lock).
  uint64_t child_id = 0, child_key = 0;
  if (origin) {
    child_key = origin->next_key();
    child_id = wire::child_call_id(origin->parent, child_key, mailbox, method, args);
  }
  bool wake, alone;
  {
    std::unique_lock<std::mutex> l(mu_);
    // An earlier run of the parent on this node made the same call, and it is
    // still in flight: both wait for the one result.
    if (origin) {
      if (auto it = pending_.find(child_id); it != pending_.end()) return it->second.state;
    }
    if (!wait_for_room(l, *state)) return state;
    if (args.size() + mailbox.size() + method.size() + 64 > max_frame_) {
      state->resolve(false,
                     "the arguments of " + mailbox + "." + method + " take " +
                         std::to_string(args.size()) + " bytes, over the head's frame limit of " +
                         std::to_string(max_frame_) + " (pass large data through the object store)",
                     ErrorKind::kRejected, "rejected");
      return state;
    }
    const uint64_t id = origin ? child_id : (static_cast<uint64_t>(num_) << 40) | ++next_seq_;
    state->id = id;
    pending_.emplace(
        id, Pending{state, wire::Call{id, mailbox, method, Blob{std::move(args)},
                                      options.max_attempts, options.deadline.count(),
                                      origin ? origin->parent : 0, child_key, options.priority}});
    wake = outq_.empty();
    alone = pending_.size() == 1;
    outq_.push_back(id);
  }
  // The only call in flight (a synchronous caller) goes out from this thread
  // when the socket is free. Calls submitted while others are in flight wake
  // the I/O thread instead, which packs all that queued meanwhile in a frame.
  if (alone) {
    std::unique_lock<std::mutex> io(io_mu_, std::try_to_lock);
    if (io.owns_lock()) {
      pump();
      leave_socket();
      return state;
    }
  }
  if (wake) waker_.notify();
  return state;
}

bool Client::wait_for_room(std::unique_lock<std::mutex>& l, FutureState& state) {
  if (pending_.size() >= opt_.max_pending) {
    if (!opt_.wait_when_full) {
      state.resolve(false,
                    "this client already has " + std::to_string(pending_.size()) +
                        " calls in flight (ConnectOptions::max_pending)",
                    ErrorKind::kRejected, "rejected");
      return false;
    }
    room_.wait(l, [&] { return pending_.size() < opt_.max_pending || stop_.load(); });
  }
  if (!refused_.empty()) {  // the head refused this client for good (check_handshakes)
    state.resolve(false, refused_, ErrorKind::kConnection, "connection");
    return false;
  }
  return true;
}

std::shared_ptr<FutureState> Client::fetch(uint64_t task_id) {
  auto state = std::make_shared<FutureState>();
  state->waiter = weak_from_this();
  state->id = task_id;
  bool wake;
  {
    std::unique_lock<std::mutex> l(mu_);
    if ((task_id >> 40) == num_ && (task_id & ((uint64_t{1} << 40) - 1)) > next_seq_) {
      // An id this client has yet to give a call: fetching it would take the
      // id from that call.
      state->resolve(false, "call " + std::to_string(task_id) + " was never made",
                     ErrorKind::kRejected, "rejected");
      return state;
    }
    if (auto it = pending_.find(task_id); it != pending_.end()) return it->second.state;
    if (!wait_for_room(l, *state)) return state;
    // Another thread may have fetched it while this one waited for room.
    if (auto it = pending_.find(task_id); it != pending_.end()) return it->second.state;
    wire::Call call;
    call.id = task_id;
    pending_.emplace(task_id, Pending{state, std::move(call), true});
    wake = outq_.empty();
    outq_.push_back(task_id);
  }
  if (wake) waker_.notify();
  return state;
}

std::string Client::request(wire::MsgType type, std::string packed_body,
                            std::chrono::milliseconds timeout, bool after_calls) {
  auto state = std::make_shared<FutureState>();
  uint64_t rid;
  {
    std::lock_guard<std::mutex> l(mu_);
    rid = ++next_rid_;
    control_[rid] = Control{state, wire::encode_raw(type, rid, packed_body), after_calls};
    control_outq_.push_back(rid);
  }
  waker_.notify();
  bool done = state->wait_until(std::chrono::steady_clock::now() + timeout);
  {
    std::lock_guard<std::mutex> l(mu_);
    control_.erase(rid);
  }
  if (!done) {
    throw ConnectionError(std::string(wire::to_string(type)) + ": no answer from the head at " +
                          address_ + " within " + std::to_string(timeout.count()) + " ms");
  }
  return state->value_or_throw();
}

void Client::say_hello() {
  wire::HelloClient hello{id_, {}, node_id_};
  {
    std::lock_guard<std::mutex> l(mu_);
    hello.awaiting = sorted_pending_ids();
  }
  transport::send(dealer_, wire::encode(hello));
  last_hello_ = last_sent_ = transport::Clock::now();
}

std::vector<uint64_t> Client::sorted_pending_ids() const {
  std::vector<uint64_t> ids;
  ids.reserve(pending_.size());
  for (const auto& [id, p] : pending_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void Client::send_queued() {
  std::vector<std::string> frames;
  std::vector<uint64_t> deferred;  // after_calls requests that wait for a welcome
  std::vector<std::string> after_calls;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (uint64_t rid : control_outq_) {
      auto it = control_.find(rid);
      if (it == control_.end()) continue;
      if (!it->second.after_calls) {
        frames.push_back(it->second.frame);
      } else if (welcomed_) {
        after_calls.push_back(it->second.frame);
      } else {
        deferred.push_back(rid);
      }
    }
    control_outq_ = std::move(deferred);
    if (welcomed_ && !outq_.empty()) {
      // A call may have its result already (a resend raced with the answer): skip it.
      std::vector<const wire::Call*> calls;
      calls.reserve(outq_.size());
      wire::Fetch fetch;
      for (uint64_t id : outq_) {
        auto it = pending_.find(id);
        if (it == pending_.end()) continue;
        if (it->second.fetched) {
          fetch.ids.push_back(id);
        } else {
          calls.push_back(&it->second.call);
        }
      }
      // Ids take at most 9 bytes each: keep a frame under half the head's limit.
      const size_t per_frame =
          std::max<size_t>(1, std::min<size_t>(kMaxFetchIds, max_frame_ / 2 / 9));
      for (size_t i = 0; i < fetch.ids.size(); i += per_frame) {
        const size_t end = std::min(fetch.ids.size(), i + per_frame);
        frames.push_back(wire::encode(
            wire::Fetch{std::vector<uint64_t>(fetch.ids.begin() + i, fetch.ids.begin() + end)}));
      }
      // Pack calls straight from the pending table: one frame per ~kBatchBytes.
      msgpack::sbuffer buf;
      msgpack::packer<msgpack::sbuffer> pk(buf);
      const size_t target = std::min<size_t>(kBatchBytes, max_frame_ / 2);
      size_t i = 0;
      while (i < calls.size()) {
        size_t end = i, bytes = 0;
        while (end < calls.size() && (end == i || bytes < target))
          bytes += calls[end++]->args.data.size() + 64;
        buf.clear();
        pk.pack_array(1);  // wire::Calls{calls}
        pk.pack_array(static_cast<uint32_t>(end - i));
        for (size_t k = i; k < end; ++k) pk.pack(*calls[k]);
        frames.push_back(wire::encode_raw(wire::MsgType::kCalls, 0, {buf.data(), buf.size()}));
        i = end;
      }
      outq_.clear();
    }
  }
  for (auto& f : after_calls) frames.push_back(std::move(f));
  // Acknowledged results only let the head forget them, so acks wait for a
  // frame going out anyway (the next calls: the head reads both in one turn and
  // commits once) or for kAckDelay; a synchronous caller thus costs the head
  // one turn and one commit fewer per call.
  if (!acks_.empty() && (!frames.empty() || acks_.size() >= kMaxAcks ||
                         transport::Clock::now() - first_ack_ >= kAckDelay)) {
    frames.insert(frames.begin(), wire::encode(wire::AckResults{std::move(acks_)}));
    acks_.clear();
  }
  for (const auto& f : frames) {
    if (transport::send(dealer_, f)) last_sent_ = transport::Clock::now();
  }
}

void Client::resend_everything() {
  std::lock_guard<std::mutex> l(mu_);
  outq_ = sorted_pending_ids();
  control_outq_.clear();
  for (const auto& [rid, c] : control_) control_outq_.push_back(rid);
}

void Client::on_frame(zmq::message_t& m) {
  using wire::MsgType;
  wire::Envelope env = wire::decode(std::string_view(static_cast<const char*>(m.data()), m.size()));
  auto resolve_control = [&](bool ok, std::string payload) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = control_.find(env.request_id);
    if (it != control_.end()) {
      it->second.state->resolve(ok, std::move(payload), ErrorKind::kRejected, "rejected");
    }
  };
  switch (env.type) {
    case MsgType::kWelcome: {
      auto w = env.body<wire::Welcome>();
      bool again, anew;
      {
        std::lock_guard<std::mutex> l(mu_);
        anew = num_ != 0;  // welcomed before: the head took this client for gone, or restarted
        again = welcomed_ && boot_ == w.boot;
        if (num_ != 0 && num_ != w.client_num) {
          spdlog::error(
              "the head gave this client a new number: its store was replaced, or this client "
              "was gone for longer than its --result-ttl-s; calls made before are lost");
        }
        num_ = w.client_num;
        next_seq_ = std::max(next_seq_, w.seq_floor);  // a number given out again
        max_frame_ = w.max_frame;
        refused_logged_ = false;
        welcomed_ = true;
      }
      if (anew) {  // either way the head has forgotten this driver's objects
        std::lock_guard<std::mutex> l(objects_mu_);
        if (objects_) objects_->announce_all();
      }
      if (again) break;
      boot_ = w.boot;
      resend_everything();  // whatever the head may not have: it drops duplicates by task id
      welcome_->resolve(true, "");
      break;
    }
    case MsgType::kHeartbeat: {
      auto hb = env.body<wire::Heartbeat>();
      if (hb.boot != boot_) {
        std::lock_guard<std::mutex> l(mu_);
        welcomed_ = false;
      }
      if (hb.boot != boot_) say_hello();
      break;
    }
    case MsgType::kAccepted: break;  // durable now; nothing to do until the result
    case MsgType::kResults: {
      auto r = env.body<wire::Results>();
      std::vector<std::pair<std::shared_ptr<FutureState>, wire::Result*>> ready;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (acks_.empty()) first_ack_ = transport::Clock::now();
        for (auto& res : r.results) {
          acks_.push_back(res.id);
          auto it = pending_.find(res.id);
          if (it == pending_.end()) continue;  // delivered already
          ready.emplace_back(std::move(it->second.state), &res);
          pending_.erase(it);
        }
      }
      if (!ready.empty()) room_.notify_all();
      for (auto& [state, res] : ready) {
        state->resolve(res->ok, std::move(res->payload.data), static_cast<ErrorKind>(res->kind),
                       res->error_type);
      }
      break;
    }
    case MsgType::kPoolCreated: {
      auto p = env.body<wire::PoolCreated>();
      resolve_control(p.ok, p.ok ? p.kept : p.error);
      break;
    }
    case MsgType::kStatus:
    case MsgType::kTaskList:
    case MsgType::kCancelReply:
    case MsgType::kOk:
      resolve_control(true, std::string(static_cast<const char*>(m.data()), m.size()));
      break;
    case MsgType::kError: {
      auto e = env.body<wire::Error>();
      if (e.code == static_cast<int32_t>(wire::ErrorCode::kUnknownPeer)) {
        {
          std::lock_guard<std::mutex> l(mu_);
          welcomed_ = false;
        }
        // Its Welcome resends what the head may not have; resending here too
        // sent a request twice for every frame the head had dropped, and a
        // request that is not idempotent (removing a pool) was answered
        // with an error after its first copy succeeded.
        if (transport::ms_since(last_hello_) > 100) say_hello();
      } else if (e.code == static_cast<int32_t>(wire::ErrorCode::kRefused)) {
        // Its hello was refused: a connect says why at once, and calls made
        // since the head last took this client fail (it goes on saying
        // hello, and may be taken later).
        if (!refused_logged_) spdlog::error("client {}: the head refused it: {}", id_, e.message);
        refused_logged_ = true;  // it says hello every 100 ms: once is enough
        welcome_->resolve(false, e.message, ErrorKind::kConnection, "connection");
        fail_pending(e.message);
      } else {
        spdlog::warn("head reports: {}", e.message);
        resolve_control(false, e.message);
      }
      break;
    }
    default: spdlog::warn("client: unexpected {} from head", wire::to_string(env.type));
  }
}

std::chrono::milliseconds Client::pump() {
  waker_.drain();
  auto liveness = std::max(opt_.heartbeat * 12, std::chrono::milliseconds(3000));
  while (true) {
    while (auto m = transport::try_recv(dealer_)) {
      last_heard_ = transport::Clock::now();
      try {
        on_frame(*m);
      } catch (const std::exception& e) {
        spdlog::warn("client: bad frame from head: {}", e.what());
      }
    }
    send_queued();
    auto now = transport::Clock::now();
    check_handshakes(now);
    bool welcomed = is_welcomed();
    // Until welcomed, hello again often: a hello sent before the connection was up is dropped.
    if (!welcomed && now - last_hello_ > std::chrono::milliseconds(100)) say_hello();
    if (welcomed && now - last_heard_ > liveness) {
      std::lock_guard<std::mutex> l(mu_);
      welcomed_ = false;  // the head went silent: hello again, then resend
    }
    if (welcomed && now - last_sent_ >= opt_.heartbeat) {
      transport::send(dealer_, wire::encode(wire::Heartbeat{boot_}));
      last_sent_ = now;  // tried: while no connection is up, the pump must not spin on it
    }
    // A send may take in the socket's pending notices, which then no longer
    // signal its descriptor: read until the socket says nothing is waiting.
    if (!(dealer_.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
  }
  auto wait = is_welcomed() ? transport::until_heartbeat(last_sent_, opt_.heartbeat)
                            : std::chrono::milliseconds(20);
  if (!acks_.empty())
    wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(kAckDelay));
  return wait;
}

namespace {
// Waits for the socket's descriptor or the waker, without holding the socket.
void wait_for_news(int dealer_fd, int waker_fd, std::chrono::milliseconds timeout) {
  zmq::pollitem_t items[] = {{nullptr, dealer_fd, ZMQ_POLLIN, 0},
                             {nullptr, waker_fd, ZMQ_POLLIN, 0}};
  try {
    transport::poll(items, 2, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
  }
}
}  // namespace

bool Client::wait(FutureState& s, std::chrono::steady_clock::time_point deadline) {
  using std::chrono::steady_clock;
  ++waiting_;
  struct Leave {
    std::atomic<long>& n;
    ~Leave() { --n; }
  } leave{waiting_};
  // Retries to take the socket back off from 100 us to 10 ms: the I/O thread
  // lets it go within microseconds, another caller only when its own result
  // is in, which may take minutes.
  std::chrono::microseconds retry(100);
  while (true) {
    if (s.is_done()) return true;  // most pipelined gets: no need for the socket
    auto now = steady_clock::now();
    if (now >= deadline) return false;
    if (abandoned()) {
      // Its owners are gone: its calls fail as they would have when ~Client
      // ran, which the waiting threads' references now hold off.
      fail_pending();
      return true;
    }
    // With many calls in flight, results come in batches and one wake-up
    // serves a batch, while the I/O thread takes them in as this thread works:
    // leave it the socket.
    if (pending() > kLeadMaxPending) {
      if (s.wait_here(std::min(deadline, now + opt_.heartbeat))) return true;
      continue;
    }
    std::unique_lock<std::mutex> io(io_mu_, std::try_to_lock);
    if (!io.owns_lock()) {
      // The holder resolves the state when its result comes.
      if (s.wait_here(std::min<steady_clock::time_point>(deadline, now + retry))) return true;
      retry = std::min<std::chrono::microseconds>(retry * 2, std::chrono::milliseconds(10));
      continue;
    }
    while (true) {
      auto idle = pump();
      if (s.is_done()) break;
      now = steady_clock::now();
      if (now >= deadline || abandoned()) break;
      if (deadline - now < idle) {
        idle = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
      }
      wait_for_news(dealer_fd_, waker_.fd(), idle);
    }
    leave_socket();
  }
}

void Client::io_loop() {
  std::chrono::milliseconds idle;
  {
    std::lock_guard<std::mutex> io(io_mu_);
    say_hello();
    last_heard_ = transport::Clock::now();
  }
  while (!stop_.load()) {
    {
      std::lock_guard<std::mutex> io(io_mu_);
      idle = pump();
    }
    wait_for_news(dealer_fd_, waker_.fd(), idle);
  }
  // The last results' acks leave with the socket's linger, so that the head
  // forgets them rather than keep them for a caller that is gone.
  std::lock_guard<std::mutex> io(io_mu_);
  if (!acks_.empty()) transport::send(dealer_, wire::encode(wire::AckResults{std::move(acks_)}));
}

std::shared_ptr<FutureState> submit(Client& c, const std::string& mailbox,
                                    const std::string& method, std::string args,
                                    const CallOptions& options, CallOrigin* origin) {
  return c.submit(mailbox, method, std::move(args), options, origin);
}

std::shared_ptr<FutureState> fetch(Client& c, uint64_t task_id) {
  return c.fetch(task_id);
}

}  // namespace detail

// ---- Runtime -----------------------------------------------------------------

Runtime connect(const std::string& address, ConnectOptions options) {
  return Runtime(std::make_shared<detail::Client>(address, options));
}

void use_cluster_key(const std::string& key) {
  transport::set_process_key(transport::ClusterKey::parse(key));
}

std::string Runtime::create_pool(const std::string& name, const std::string& type,
                                 const Placement& where) {
  wire::CreatePool c{name,
                     type,
                     where.market,
                     where.size,
                     where.slots_per_actor,
                     where.prefetch,
                     where.sp_degree,
                     where.strategy,
                     where.node,
                     where.aging.count(),
                     where.max_per_node,
                     where.prefer,
                     where.beside,
                     where.away_from,
                     where.preempt,
                     where.beside_soft};
  std::string kept =
      client_->request(wire::MsgType::kCreatePool, pack(c), std::chrono::seconds(30));
  if (!kept.empty()) spdlog::warn("pool {} exists and keeps its own {}", name, kept);
  return kept;
}

void Runtime::remove_pool(const std::string& name) {
  client_->request(wire::MsgType::kRemovePool, pack(wire::RemovePool{name}),
                   std::chrono::seconds(30));
}

std::vector<CancelOutcome> Runtime::cancel(const std::vector<uint64_t>& task_ids, bool children) {
  if (task_ids.empty()) return {};
  // After the calls submitted before it: a call cancelled at once must have
  // reached the head first, or the head would not know it yet.
  std::string frame =
      client_->request(wire::MsgType::kCancel, pack(wire::Cancel{task_ids, children}),
                       std::chrono::seconds(30), true);
  auto reply = wire::decode(frame).body<wire::CancelReply>();
  if (reply.outcomes.size() != task_ids.size()) {
    throw ConnectionError("the head answered a cancel of " + std::to_string(task_ids.size()) +
                          " calls with " + std::to_string(reply.outcomes.size()) + " outcomes");
  }
  std::vector<CancelOutcome> out;
  out.reserve(task_ids.size());
  for (int32_t o : reply.outcomes) out.push_back(static_cast<CancelOutcome>(o));
  return out;
}

ObjectStore& detail::Client::objects() {
  if (!node_id_.empty()) {
    throw RejectedError(
        "a task has its node's object store: use ctx.objects(), not ctx.runtime().objects()");
  }
  std::lock_guard<std::mutex> l(objects_mu_);
  if (!objects_) {
    objects::StoreOptions o;
    o.head = address_;
    o.node_id = wire::kDriverHolderPrefix + id_;  // the head takes it for this connected client's
    o.capacity = opt_.object_store_mb << 20;
    o.key = transport::resolve_key(opt_.cluster_key);
    o.forget_on_close = true;
    objects_ = std::make_unique<objects::NodeObjectStore>(std::move(o));
  }
  return *objects_;
}

ObjectStore& Runtime::objects() {
  return client_->objects();
}

void Runtime::wait_accepted(std::chrono::milliseconds timeout) {
  client_->request(wire::MsgType::kSync, pack(wire::Empty{}), timeout, true);
}

ClusterStatus Runtime::status() {
  std::string frame =
      client_->request(wire::MsgType::kStatusRequest, pack(wire::Empty{}), std::chrono::seconds(10));
  return wire::decode(frame).body<ClusterStatus>();
}

TaskList Runtime::tasks(const TaskQuery& query) {
  std::string frame =
      client_->request(wire::MsgType::kTasksRequest, pack(query), std::chrono::seconds(30));
  return wire::decode(frame).body<TaskList>();
}

void Runtime::stop_cluster() {
  client_->request(wire::MsgType::kStop, pack(wire::Empty{}), std::chrono::seconds(10));
}

namespace {
// A throwaway DEALER: one request, one reply, no hello.
std::string one_shot(const std::string& address, const transport::ClusterKey& key,
                     wire::MsgType type, std::chrono::milliseconds timeout,
                     const std::string& body = pack(wire::Empty{})) {
  // Not immediate: the request waits in the socket until the connection is up.
  zmq::socket_t s;
  std::unique_ptr<transport::HandshakeMonitor> watch;  // stopped before s closes: declared after it
  s = transport::make_dealer(transport::endpoint(address), "oneshot-" + common::random_id(), key,
                             false, &watch);
  s.set(zmq::sockopt::linger, 0);
  transport::HandshakeMonitor& handshakes = *watch;
  transport::send(s, wire::encode_raw(type, 1, body));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0},
                             {handshakes.socket().handle(), 0, ZMQ_POLLIN, 0}};
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::poll(items, 2,
              std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()));
    handshakes.drain();
    if (handshakes.refused()) {
      throw ConnectionError(handshakes.refused_by("the head at " + address));
    }
    while (auto m = transport::try_recv(s)) {
      std::string frame(static_cast<const char*>(m->data()), m->size());
      wire::Envelope env = wire::decode(frame);
      if (env.type == wire::MsgType::kHeartbeat) continue;
      if (env.type == wire::MsgType::kError) throw RejectedError(env.body<wire::Error>().message);
      return frame;
    }
  }
  throw ConnectionError("no answer from a head at " + address + " within " +
                        std::to_string(timeout.count()) + " ms");
}
}  // namespace

namespace detail {
ClusterStatus cluster_status(const std::string& address, const std::string& key,
                             std::chrono::milliseconds timeout) {
  return wire::decode(
             one_shot(address, transport::resolve_key(key), wire::MsgType::kStatusRequest, timeout))
      .body<ClusterStatus>();
}
void stop_cluster(const std::string& address, const std::string& key,
                  std::chrono::milliseconds timeout) {
  one_shot(address, transport::resolve_key(key), wire::MsgType::kStop, timeout);
}
}  // namespace detail

ClusterStatus cluster_status(const std::string& address, std::chrono::milliseconds timeout) {
  return detail::cluster_status(address, "", timeout);
}

void stop_cluster(const std::string& address, std::chrono::milliseconds timeout) {
  detail::stop_cluster(address, "", timeout);
}

TaskList list_tasks(const std::string& address, const TaskQuery& query,
                    std::chrono::milliseconds timeout) {
  return wire::decode(one_shot(address, transport::process_key(), wire::MsgType::kTasksRequest,
                               timeout, pack(query)))
      .body<TaskList>();
}

void drain_node(const std::string& address, const std::string& node_id,
                std::chrono::milliseconds deadline, std::chrono::milliseconds timeout) {
  one_shot(address, transport::process_key(), wire::MsgType::kDrain, timeout,
           pack(wire::Drain{node_id, deadline.count()}));
}

void Runtime::drain(const std::string& node_id, std::chrono::milliseconds deadline) {
  client_->request(wire::MsgType::kDrain, pack(wire::Drain{node_id, deadline.count()}),
                   std::chrono::seconds(10));
}

const std::string& Runtime::address() const { return client_->address(); }
size_t Runtime::pending() const { return client_->pending(); }

}  // namespace spotlight

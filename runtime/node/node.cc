#include "node/node.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <set>

#include "common/ids.h"
#include "transport/spin.h"

namespace spotlight::node {

void load_actor_library(const std::string& path) {
  // RTLD_GLOBAL: the library's types register in libspotlight_runtime's registry.
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    throw std::runtime_error("cannot load actor library " + path + ": " + dlerror());
  }
}

Node::Node(NodeOptions options)
    : opt_(std::move(options)), session_(static_cast<uint32_t>(std::stoull(common::random_id().substr(0, 8), nullptr, 16))) {
  if (opt_.node_id.empty()) opt_.node_id = common::hostname() + "-" + std::to_string(getpid());
  dealer_ = transport::make_dealer(transport::endpoint(opt_.head), opt_.node_id,
                                   transport::process_key(), true, &handshakes_);
  dealer_fd_ = dealer_.get(zmq::sockopt::fd);
  out_.set_flusher([this] {
    std::unique_lock<std::mutex> io(io_mu_, std::try_to_lock);
    if (!io.owns_lock()) return false;
    send_outgoing();
    // The sends may have taken in the socket's notice of frames that wait,
    // which then no longer signal its descriptor: the loop must read them.
    // A draining node's loop checks whether this was its last result.
    if (draining_.load() || (dealer_.get(zmq::sockopt::events) & ZMQ_POLLIN)) out_.wake();
    return true;
  });
  objects::StoreOptions so;
  so.head = opt_.head;
  so.node_id = opt_.node_id;
  so.advertise_host = opt_.object_host;
  so.capacity = opt_.object_store_bytes;
  objects_ = std::make_unique<objects::NodeObjectStore>(so);
  caller_ = std::make_unique<TaskCaller>(opt_.head, opt_.node_id);
  services_.reset(new TaskServices{draining_, opt_.head, *objects_, *caller_});
  if (!opt_.notice_url.empty()) {
    poller_ = std::make_unique<NoticePoller>(
        opt_.notice_url, opt_.notice_poll, [this](std::optional<std::chrono::milliseconds> left) {
          if (left) notice_left_ms_.store(left->count());
          notice_.store(true);
        });
  }
}

Node::~Node() {
  poller_.reset();
  hosts_.clear();
  retiring_.clear();
}

void Node::send(const std::string& frame) {
  if (transport::send(dealer_, frame)) last_sent_ = transport::Clock::now();
}

void Node::say_hello() {
  wire::HelloNode h{opt_.node_id, common::hostname(), getpid(), opt_.market, opt_.slots,
                    detail::actor_type_names(), session_, {}, {}, objects_->address()};
  for (const auto& [id, host] : hosts_) {
    h.hosted.push_back(wire::HostedActor{id, host->incarnation()});
    host->held(h.held);
  }
  out_.held(h.held);
  for (const auto& [seq, done] : unacked_) {
    for (const auto& c : done) h.held.push_back(c.id);
  }
  send(wire::encode(h));
  last_hello_ = transport::Clock::now();
}

void Node::reset_session(const char* why) {
  // The actors keep running; results wait in the outbox until the head (the
  // same or a restarted one) welcomes this node again and says which of its
  // actors it takes back.
  spdlog::warn("node {}: {}; saying hello again with {} actors", opt_.node_id, why, hosts_.size());
  welcomed_ = false;
  ++session_;
  say_hello();
}

void Node::run() {
  spdlog::info("node {} joining {} as {} with {} slots", opt_.node_id, opt_.head, opt_.market,
               opt_.slots);
  std::unique_lock<std::mutex> io(io_mu_);
  last_heard_ = transport::Clock::now();
  say_hello();
  zmq::pollitem_t items[] = {{nullptr, dealer_fd_, ZMQ_POLLIN, 0},
                             {nullptr, out_.fd(), ZMQ_POLLIN, 0}};
  bool news = false;  // a frame waits whose notice the last sends took in
  while (!shutdown_ && !stop_requested_.load()) {
    auto idle = news        ? std::chrono::milliseconds(0)
                : welcomed_ ? transport::until_heartbeat(last_sent_, opt_.heartbeat)
                            : std::chrono::milliseconds(20);
    io.unlock();  // actor threads may send their results meanwhile
    try {
      transport::poll(items, 2, idle);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    io.lock();
    while (auto m = transport::try_recv(dealer_)) {
      last_heard_ = transport::Clock::now();
      handle(*m);
      if (shutdown_) break;
    }
    send_outgoing();
    std::erase_if(retiring_, [](const auto& h) { return h->exited(); });
    if (notice_.load() && !draining_.load()) {
      int64_t left = notice_left_ms_.load();
      begin_drain(left >= 0 ? std::chrono::milliseconds(left) : opt_.notice_deadline, true);
    }
    auto now = transport::Clock::now();
    // Read between polls, not polled (the loop wakes at least every heartbeat).
    if (now >= next_handshake_check_) {
      check_handshakes();
      next_handshake_check_ = now + std::chrono::milliseconds(100);
    }
    if (draining_.load()) {
      if (drained()) {
        spdlog::info("node {} drained: saying goodbye", opt_.node_id);
        send(wire::encode_empty(wire::MsgType::kOk));
        break;
      }
      if (now > drain_deadline_) {
        // The machine is about to disappear: whatever still runs is lost, and
        // resumes elsewhere from its last commit.
        spdlog::warn(
            "node {}: drain deadline reached with tasks running or results unacknowledged; exiting",
            opt_.node_id);
        std::_Exit(0);
      }
    }
    // Until welcomed, hello again often: a hello sent before the connection was up is dropped.
    if (!welcomed_ && now - last_hello_ > std::chrono::milliseconds(100)) say_hello();
    if (welcomed_ && now - last_heard_ > head_liveness_) reset_session("the head went silent");
    if (welcomed_ && now - last_sent_ >= opt_.heartbeat) {
      send(wire::encode(wire::Heartbeat{boot_}));
      // Tried, even if no connection is up to take it: the loop sleeps until
      // the next beat is due, and must not spin while the head is away.
      last_sent_ = std::max(last_sent_, now);
    }
    news = dealer_.get(zmq::sockopt::events) & ZMQ_POLLIN;
  }
  spdlog::info("node {} leaving", opt_.node_id);
  hosts_.clear();
  retiring_.clear();
  send_outgoing();  // results of tasks that finished while leaving
}

void Node::check_handshakes() {
  if (handshakes_->drain() == 0) return;
  // Refused for good (HandshakeMonitor::refused): the node stops and says
  // why. libzmq does not reconnect after such a refusal, so even a node that
  // was in could do nothing more; its tasks go on elsewhere, as after any
  // node's death. Other failures are logged at 1, 2, 4, 8... and retried.
  if (handshakes_->refused()) {
    throw std::runtime_error(handshakes_->refused_by("the head at " + opt_.head));
  }
  if (handshakes_->log_due()) {
    spdlog::warn("node {}: the head refused {} handshake(s) so far: {}", opt_.node_id,
                 handshakes_->failed(), handshakes_->last_failure());
  }
}

void Node::handle(zmq::message_t& m) {
  using wire::MsgType;
  try {
    wire::Envelope env = wire::decode(std::string_view(static_cast<const char*>(m.data()), m.size()));
    spdlog::trace("node: {} from head", wire::to_string(env.type));
    switch (env.type) {
      case MsgType::kWelcome: {
        auto w = env.body<wire::Welcome>();
        if (welcomed_ && w.boot == boot_) break;  // answer to a repeated hello
        boot_ = w.boot;
        max_frame_ = w.max_frame;
        welcomed_ = true;
        {
          std::set<uint64_t> keep(w.adopted.begin(), w.adopted.end());
          for (auto it = hosts_.begin(); it != hosts_.end();) {
            it = keep.count(it->first) ? std::next(it) : hosts_.erase(it);
          }
        }
        head_liveness_ = std::max(std::chrono::milliseconds(3 * w.liveness_ms),
                                  std::chrono::milliseconds(3000));
        spdlog::info("node {} welcomed by head (boot {})", opt_.node_id, boot_);
        objects_->announce_all();  // this welcome may come from a head that never heard of them
        resend_unacked();
        break;
      }
      case MsgType::kHeartbeat: {
        auto hb = env.body<wire::Heartbeat>();
        if (welcomed_ && hb.boot != boot_) reset_session("the head restarted");
        else if (welcomed_)
          forget_acked(hb.done_acked);
        break;
      }
      case MsgType::kProbe:  // the head checks this node is alive before it re-forms an SP group
        send(wire::encode_empty(MsgType::kProbe, env.request_id));
        break;
      case MsgType::kPlace:
        if (welcomed_) on_place(env.body<wire::Place>());
        break;
      case MsgType::kUnplace:
        if (welcomed_) on_unplace(env.body<wire::Unplace>());
        break;
      case MsgType::kTasks:
        if (welcomed_) {
          auto tasks = env.body<wire::Tasks>();
          forget_acked(tasks.done_acked);
          on_tasks(tasks);
        }
        break;
      case MsgType::kCancel:
        if (welcomed_) {
          auto c = env.body<wire::Cancel>();
          const std::unordered_set<uint64_t> ids(c.ids.begin(), c.ids.end());
          for (auto& [id, host] : hosts_) host->cancel(ids);
          spdlog::debug("node {}: {} tasks cancelled", opt_.node_id, ids.size());
        }
        break;
      case MsgType::kDrain:
        if (welcomed_) begin_drain(std::chrono::milliseconds(env.body<wire::Drain>().deadline_ms), false);
        break;
      case MsgType::kShutdown:
        // Goodbye first: the head waits for it before it exits.
        send(wire::encode_empty(MsgType::kOk, env.request_id));
        shutdown_ = true;
        break;
      case MsgType::kError: {
        auto e = env.body<wire::Error>();
        if (e.code == static_cast<int32_t>(wire::ErrorCode::kUnknownPeer)) {
          if (welcomed_) reset_session("the head does not know this node");
        } else {
          spdlog::warn("head reports: {} ({})", e.message,
                       wire::to_string(static_cast<wire::ErrorCode>(e.code)));
        }
        break;
      }
      default:
        spdlog::warn("node: unexpected {} from head", wire::to_string(env.type));
        send(wire::encode(wire::Error{static_cast<int32_t>(wire::ErrorCode::kBadRequest),
                                      std::string("a node does not serve ") + wire::to_string(env.type)},
                          env.request_id));
    }
  } catch (const wire::WireError& e) {
    spdlog::warn("node: bad frame from head: {}", e.what());
    send(wire::encode(wire::Error{static_cast<int32_t>(e.code), e.what()}));
  }
}

void Node::on_place(const wire::Place& p) {
  const detail::ActorTypeInfo* type = detail::find_actor_type(p.type);
  if (!type) {
    out_.placed(wire::Placed{p.actor_id, p.incarnation, false,
                             "actor type " + p.type + " is not loaded on this node"});
    return;
  }
  hosts_.erase(p.actor_id);  // an older incarnation, if any, goes first
  std::optional<std::string> restore;
  if (p.has_state) restore = p.state.data;
  hosts_[p.actor_id] = std::make_unique<ActorHost>(p.actor_id, p.incarnation, *type, out_,
                                                   *services_, std::move(restore));
}

void Node::on_unplace(const wire::Unplace& u) {
  for (uint64_t id : u.actors) {
    auto it = hosts_.find(id);
    if (it == hosts_.end()) continue;
    it->second->retire();  // a running task ends on its own; the loop must not wait for it
    retiring_.push_back(std::move(it->second));
    hosts_.erase(it);
  }
  spdlog::info("node {}: {} actors unplaced", opt_.node_id, u.actors.size());
}

void Node::begin_drain(std::chrono::milliseconds deadline, bool tell_head) {
  if (draining_.exchange(true)) return;
  drain_deadline_ = transport::Clock::now() + deadline;
  spdlog::info("node {} draining: {} ms to go", opt_.node_id, deadline.count());
  if (tell_head) send(wire::encode(wire::Drain{opt_.node_id, deadline.count()}));
  for (auto& [id, host] : hosts_) host->hand_back_queued();
}

bool Node::drained() {
  for (auto& [id, host] : hosts_) {
    if (!host->idle()) return false;
  }
  // Results leave with the node only once the head has committed them (it
  // acknowledges a draining node's results right after its commit).
  return out_.empty() && unacked_.empty();
}

void Node::on_tasks(wire::Tasks& t) {
  for (auto& task : t.tasks) {
    auto it = hosts_.find(task.actor_id);
    if (it == hosts_.end()) {
      spdlog::warn("task {} for actor {} that this node does not host: dropped", task.id, task.actor_id);
      continue;
    }
    if (draining_.load()) {  // sent before the head knew: straight back
      out_.done(wire::Completion{task.id, task.actor_id, task.epoch, false,
                                 static_cast<int32_t>(ErrorKind::kPreempted), "preempted",
                                 Blob{"handed back unstarted: the node is draining"}, false, {}});
      continue;
    }
    it->second->push(std::move(task));
  }
}

void Node::send_outgoing() {
  out_.drain_wakeups();
  if (!welcomed_) return;  // kept until a head welcomes this node again
  std::vector<wire::Commit> commits;
  std::vector<wire::Completion> done;
  std::vector<wire::Placed> placed;
  out_.take(commits, done, placed);
  for (const auto& p : placed) send(wire::encode(p));
  if (!commits.empty()) send(wire::encode(wire::Commits{std::move(commits)}));
  // Results go in frames of about 1 MiB (less under a small frame limit); a
  // result the head would refuse becomes an error the caller can read.
  const size_t target = std::min<size_t>(1u << 20, max_frame_ / 2);
  wire::Done batch;
  size_t bytes = 0;
  for (auto& c : done) {
    if (c.has_actor_state && c.payload.data.size() + c.actor_state.data.size() + 256 > max_frame_) {
      spdlog::warn(
          "node {}: actor {}'s saved state ({} bytes) does not fit in a frame with the result "
          "of task {} (limit {}): not kept",
          opt_.node_id, c.actor_id, c.actor_state.data.size(), c.id, max_frame_);
      c.has_actor_state = false;
      c.actor_state.data.clear();
    }
    if (c.payload.data.size() + 256 > max_frame_) {
      c.ok = false;
      c.kind = static_cast<int32_t>(ErrorKind::kRejected);
      c.error_type = "rejected";
      c.payload.data = "the result takes " + std::to_string(c.payload.data.size()) +
                       " bytes, over the head's frame limit of " + std::to_string(max_frame_) +
                       " (pass large data through the object store)";
    }
    // A frame the head refused would be acknowledged with the next one, and
    // its results forgotten: no frame may grow past the limit.
    const size_t size =
        c.payload.data.size() + c.actor_state.data.size() + c.error_type.size() + 64;
    if (!batch.done.empty() && bytes + size > target) {
      send_done(batch);
      bytes = 0;
    }
    bytes += size;
    batch.done.push_back(std::move(c));
  }
  if (!batch.done.empty()) send_done(batch);
}

void Node::send_done(wire::Done& batch) {
  batch.seq = ++done_seq_;
  send(wire::encode(batch));
  unacked_.emplace_back(batch.seq, std::move(batch.done));
  batch.done.clear();
}

void Node::forget_acked(uint64_t seq) {
  while (!unacked_.empty() && unacked_.front().first <= seq) unacked_.pop_front();
}

void Node::resend_unacked() {
  // Sent again under new numbers; the head takes each result once (a result
  // it had committed is stale to it, its task no longer leased).
  for (auto& [seq, done] : unacked_) {
    for (auto& c : done) out_.done(std::move(c));
  }
  if (!unacked_.empty())
    spdlog::info("node {}: {} result frames the head may not have committed: sent again",
                 opt_.node_id, unacked_.size());
  unacked_.clear();
}

}  // namespace spotlight::node

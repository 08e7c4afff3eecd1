#include "head/head.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <type_traits>

#include "spotlight/errors.h"
#include "transport/spin.h"
#include "wire/child_ids.h"

namespace spotlight::head {

namespace {
constexpr int kMaxFramesPerTurn = 4096;
// And at most about this many bytes: 4,096 full batches of calls are a
// million calls, whose turn took 650 ms, long enough for the head to miss
// its nodes' heartbeats and keep every other caller waiting on its commit.
// At 4 MiB such turns still took 60–130 ms to take in and 10–30 ms to
// commit, the longest stall left once compactions no longer made one.
constexpr size_t kMaxBytesPerTurn = 1u << 20;
// And it stops reading once this long has gone by (checked between frames).
// A turn then commits in a few ms, and a call or heartbeat that comes behind a
// flood of calls waits about this long to be read: at 1 MiB alone, a turn took
// 25-70 ms to take in (the frames' calls decoded, journaled and indexed at
// about 1 us each). A synchronous call beside a million-call flood took 60 ms
// (median) then, 20 ms at a 5 ms slice, and 9 ms at 2 ms with the client's
// 64 KiB frames, accepting the flood 4 % slower (docs/benchmarks.md).
constexpr std::chrono::microseconds kIntakeSlice{2000};
// A compaction's snapshot of a million changed tasks took the head 130–170 ms
// in one turn (up to 600 ms on a bad run); copied this long per turn, it
// delays no turn by more than about this.
constexpr std::chrono::microseconds kSnapshotSlice{2000};
// Keyed gets (the rendezvous KV, the object directory): keys are short
// names, waits are bounded.
constexpr size_t kMaxKey = 4096;
constexpr int64_t kMaxWaitMs = 600000;
constexpr size_t kBatchBytes = 1u << 20;  // split result/task batches at about 1 MiB
constexpr auto kAcceptDelay = std::chrono::milliseconds(5);
constexpr size_t kMaxUnannounced = 16384;
constexpr auto kHandshakeCheck = std::chrono::milliseconds(100);

// Wall-clock ms since the epoch: deadlines and accept times survive restarts.
int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool valid_market(const std::string& m, bool allow_any) {
  return m == "reserved" || m == "spot" || (allow_any && m == "any");
}

// What an existing pool keeps of the options a second create asks to change,
// as "members 4 (asked 8), prefetch 1 (asked 16)"; empty when they agree.
std::string kept_options(const store::PoolRecord& have, const wire::CreatePool& ask) {
  std::string out;
  auto differ = [&](const char* what, const auto& kept, const auto& asked) {
    if (kept == asked) return;
    auto text = [](const auto& v) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, bool>) {
        return std::string(v ? "yes" : "no");
      } else if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
        return std::to_string(v);
      } else {
        return v.empty() ? std::string("none") : "'" + v + "'";
      }
    };
    out += (out.empty() ? "" : ", ") + std::string(what) + " " + text(kept) + " (asked " +
           text(asked) + ")";
  };
  differ("market", have.market, ask.market);
  differ("members", have.size, ask.size);
  differ("slots per member", have.slots_per_actor, ask.slots_per_actor);
  differ("prefetch", have.prefetch, ask.prefetch);
  differ("strategy", have.strategy, ask.strategy);
  differ("node", have.node, ask.node);
  differ("aging ms", have.aging_ms, ask.aging_ms);
  differ("max per node", have.max_per_node, ask.max_per_node);
  differ("preferred node", have.prefer, ask.prefer);
  differ("beside pool", have.beside, ask.beside);
  differ("only near it", have.beside_soft, ask.beside_soft);
  differ("away from pool", have.away_from, ask.away_from);
  differ("preemptive", have.preempt, ask.preempt);
  return out;
}
}  // namespace

Head::Head(HeadOptions options) : opt_(std::move(options)) {
  started_ms_ = wall_ms_ = wall_now_ms();
  store_ = store::open_sqlite(opt_.store_path, opt_.durability);
  store::Loaded loaded = store_->open();
  boot_ = loaded.boot;
  size_t journal = loaded.journal.size();
  state_.recover(std::move(loaded));
  state_.clock_ms = 0;  // the replayed entries' stamp is not this boot's
  // Epochs carry the boot in their high bits: a lease of this boot can never
  // be mistaken for one of an earlier boot, compacted or not.
  state_.next_epoch = std::max(state_.next_epoch, boot_ << 32);
  next_sp_epoch_ = boot_ << 32;  // SP groups are not durable: a new boot numbers formations afresh
  for (const auto& [id, a] : state_.actors) grace_over_ &= a.rec.incarnation == 0;
  for (const auto& [id, t] : state_.tasks) {
    grace_over_ &= t.state != TaskState::kLeased;
    if (t.deadline_ms != 0 && t.state == TaskState::kQueued) deadlines_.emplace(t.deadline_ms, id);
  }
  grace_until_ = transport::Clock::now() + std::max(opt_.liveness * 3, std::chrono::milliseconds(2000));
  size_t queued = 0;
  for (const auto& [_, p] : state_.pools) queued += p.queue.size();
  spdlog::info("store {}: boot {}, {} pools, {} actors, {} live tasks ({} queued), {} journal entries replayed",
               opt_.store_path, boot_, state_.pools.size(), state_.actors.size(), state_.tasks.size(),
               queued, journal);
  key_ = transport::kept_key(opt_.cluster_key, opt_.store_path + ".key");
  router_ = transport::make_router("tcp://" + opt_.bind_host + ":" + std::to_string(opt_.port),
                                   opt_.max_frame, &port_, key_, &handshakes_);
  if (!key_.secure())
    spdlog::warn("no cluster key (--insecure): anyone who reaches port {} may use this cluster",
                 port_);
  if (opt_.metrics_port >= 0) {
    metrics_server_ = std::make_unique<MetricsServer>(opt_.metrics_host, opt_.metrics_port, [this] {
      return metrics_exchange_.request(std::chrono::seconds(2));
    });
    spdlog::info("status page on http://{}/ (metrics at /metrics)", metrics_address());
  }
  if (!opt_.port_file.empty()) {
    std::string tmp = opt_.port_file + ".tmp";
    std::ofstream(tmp) << port_ << "\n";
    std::rename(tmp.c_str(), opt_.port_file.c_str());
  }
}

Head::~Head() = default;

std::string Head::metrics_address() const {
  return metrics_server_ ? opt_.metrics_host + ":" + std::to_string(metrics_server_->port()) : "";
}

void Head::check_handshakes() {
  uint64_t refused = handshakes_->drain();
  if (refused == 0) return;
  count("handshakes_refused", refused);
  if (handshakes_->log_due()) {
    spdlog::warn("refused {} connection(s) so far at the handshake: {}", handshakes_->failed(),
                 handshakes_->last_failure());
  }
}

void Head::run() {
  now_ = transport::Clock::now();
  next_heartbeat_ = now_ + opt_.heartbeat;
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
  while (!stopping_ || (!awaiting_goodbye_.empty() && now_ < stop_deadline_)) {
    if (stop_requested_.load()) break;
    try {
      // A snapshot being taken goes on in the next turn, whether or not a frame comes.
      const int64_t wait_ms =
          state_.snapshot_pending() ? 0 : std::min<int64_t>(50, opt_.heartbeat.count() / 2 + 1);
      transport::poll(items, 1, std::chrono::milliseconds(wait_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    const auto woke = transport::Clock::now();
    // Read between polls, not polled: a refusal need not wake the loop, and a
    // call should not pay for one more socket in every poll.
    if (now_ >= next_handshake_check_) {
      check_handshakes();
      next_handshake_check_ = now_ + kHandshakeCheck;
    }
    turn();
    if (check_liveness()) turn();  // re-queued tasks and freed actors are served at once
    metrics_exchange_.serve([this] { return pack(status()); });  // rendered by the HTTP server
    if (now_ >= next_heartbeat_) {
      send_heartbeats();
      next_heartbeat_ = now_ + opt_.heartbeat;
    }
    longest_busy_ = std::max(longest_busy_, transport::Clock::now() - woke);
  }
  // Commit whatever the last turn left, and leave a compacted store behind.
  turn();
  maybe_compact(true);
  // Let the last replies (Shutdown to nodes, Ok to the caller) leave.
  router_.set(zmq::sockopt::linger, 1000);
  spdlog::info("head stopped");
}

void Head::turn() {
  const auto previous = now_;
  now_ = transport::Clock::now();
  forgive_absence(previous);
  wall_ms_ = wall_now_ms();
  size_t bytes = 0;
  const auto intake_until = now_ + kIntakeSlice;
  for (int n = 0; n < kMaxFramesPerTurn && bytes < kMaxBytesPerTurn; ++n) {
    if (n > 0 && transport::Clock::now() >= intake_until) break;
    auto m = transport::try_recv_routed(router_);
    if (!m) break;
    bytes += m->payload.size();
    handle(*m);
  }
  if (!grace_over_ && now_ >= grace_until_) end_grace();
  expire_kv_waiters();
  expire_object_waiters();
  expire_deadlines();
  expire_results();
  place();
  form_groups();
  dispatch();
  // Leases and placements may leave before the commit: they acknowledge
  // nothing to a caller, and a completion is only taken against a committed
  // task (a head that dies here forgets the lease; its node's result is then
  // refused as stale).
  flush(to_nodes_);
  if (!journal_.empty()) {
    store_->append(journal_.bytes());
    journal_.clear();
  }
  state_.clock_ms = 0;  // the next entry stamps its own accepts
  for (const std::string& id : done_pending_) {
    auto it = state_.nodes.find(id);
    if (it == state_.nodes.end()) continue;
    Node& n = it->second;
    n.done_committed = n.done_seen;
    // A draining node waits for this before it leaves: tell it now, not at
    // the next heartbeat.
    if (n.draining && n.alive) to_callers_[n.peer].frames.push_back(heartbeat_to(n));
  }
  done_pending_.clear();
  announce_accepted();
  flush(to_callers_);
  maybe_compact(false);
}

// Runs after the commit: every id here is durable.
void Head::announce_accepted() {
  for (auto it = unannounced_.begin(); it != unannounced_.end();) {
    Unannounced& u = it->second;
    if (u.ids.size() < kMaxUnannounced && now_ - u.since < kAcceptDelay) {
      ++it;
      continue;
    }
    // Done (its result is on its way) or forgotten (its result was acknowledged): no need.
    std::erase_if(u.ids, [&](uint64_t id) {
      auto t = state_.tasks.find(id);
      return t == state_.tasks.end() || t->second.state == TaskState::kDone;
    });
    if (!u.ids.empty()) to_callers_[it->first].accepted.ids = std::move(u.ids);
    it = unannounced_.erase(it);
  }
}

void Head::reply_error(const std::string& peer, wire::ErrorCode code, const std::string& msg,
                       uint64_t rid) {
  count(std::string("error_") + wire::to_string(code));
  // After the commit, with the turn's other replies: an error must not
  // overtake the answer to an earlier copy of the same request (a client
  // resends what it had in flight when the head did not know it), which
  // left before the commit would. Except unknown_peer: it answers nothing
  // that was committed, and it must reach a node before the Welcome that a
  // hello read in the same turn gets (to_nodes_ too). Behind it, the node
  // would take it for news and start yet another session, and this head
  // would send its leases back to their mailboxes.
  auto& box = code == wire::ErrorCode::kUnknownPeer ? to_nodes_ : to_callers_;
  box[peer].frames.push_back(wire::encode(wire::Error{static_cast<int32_t>(code), msg}, rid));
}

void Head::handle(transport::RoutedMessage& m) {
  const std::string& peer = m.peer;
  if (m.payload.size() > opt_.max_frame) {
    spdlog::warn("frame of {} bytes refused (limit {})", m.payload.size(), opt_.max_frame);
    reply_error(peer, wire::ErrorCode::kOversized,
                "frame of " + std::to_string(m.payload.size()) + " bytes exceeds the limit of " +
                    std::to_string(opt_.max_frame),
                0);
    return;
  }
  if (m.extra_frames > 0) {
    reply_error(peer, wire::ErrorCode::kMalformed, "a message is exactly one frame", 0);
    return;
  }
  uint64_t rid = 0;
  try {
    wire::Envelope env =
        wire::decode(std::string_view(static_cast<const char*>(m.payload.data()), m.payload.size()));
    rid = env.request_id;
    using wire::MsgType;
    auto node_it = state_.node_by_peer.find(peer);
    Node* node = node_it == state_.node_by_peer.end() ? nullptr : &state_.nodes[node_it->second];
    auto client_it = client_by_peer_.find(peer);
    Client* client = client_it == client_by_peer_.end() ? nullptr : &state_.clients[client_it->second];
    if (node) node->last_seen = now_;
    if (client) client->last_seen = now_;
    auto require = [&](bool known) {
      if (!known) {
        reply_error(peer, wire::ErrorCode::kUnknownPeer,
                    std::string(wire::to_string(env.type)) + " from a peer that has not said hello",
                    rid);
      }
      return known;
    };
    switch (env.type) {
      case MsgType::kHelloNode: on_hello_node(peer, env.body<wire::HelloNode>(), rid); break;
      case MsgType::kHelloClient: on_hello_client(peer, env.body<wire::HelloClient>(), rid); break;
      case MsgType::kHeartbeat: require(node || client); break;
      case MsgType::kCreatePool:
        if (require(client)) on_create_pool(peer, env.body<wire::CreatePool>(), rid);
        break;
      case MsgType::kRemovePool:
        if (require(client)) on_remove_pool(peer, env.body<wire::RemovePool>(), rid);
        break;
      case MsgType::kCalls:
        if (require(client)) {
          auto calls = env.body<wire::Calls>();
          on_calls(*client, calls);
        }
        break;
      case MsgType::kAckResults:
        if (require(client)) on_ack(*client, env.body<wire::AckResults>());
        break;
      case MsgType::kFetch:
        if (require(client)) on_fetch(*client, env.body<wire::Fetch>());
        break;
      case MsgType::kCancel:
        if (require(client)) on_cancel(peer, env.body<wire::Cancel>(), rid);
        break;
      case MsgType::kSync:
        // Answered after this turn's commit, which covers the calls sent before
        // it, and after this turn's results, among them refusals of those calls.
        if (require(client))
          to_callers_[peer].last.push_back(wire::encode_empty(MsgType::kOk, rid));
        break;
      case MsgType::kPlaced:
        if (require(node)) on_placed(*node, env.body<wire::Placed>());
        break;
      case MsgType::kDone:
        if (require(node)) {
          auto done = env.body<wire::Done>();
          on_done(*node, done);
        }
        break;
      case MsgType::kStatusRequest:
        // Answered after the turn's commit: what status shows is durable.
        to_callers_[peer].frames.push_back(wire::encode(status(), rid));
        break;
      case MsgType::kTasksRequest:  // no hello needed, as for status
        to_callers_[peer].frames.push_back(wire::encode(list_tasks(env.body<TaskQuery>()), rid));
        break;
      case MsgType::kStop: on_stop(peer, rid); break;
      case MsgType::kOk:  // a node's goodbye: after Shutdown, or when it drained
        awaiting_goodbye_.erase(peer);
        if (node) node_dead(*node, "said goodbye");
        break;
      case MsgType::kCommits:
        if (require(node)) on_commits(*node, env.body<wire::Commits>());
        break;
      case MsgType::kDrain: on_drain(peer, node, env.body<wire::Drain>(), rid); break;
      case MsgType::kKvSet: {  // no hello needed: SP members rendezvous from any process
        auto s = env.body<wire::KvSet>();
        on_kv_set(peer, s, rid);
        break;
      }
      case MsgType::kKvGet: on_kv_get(peer, env.body<wire::KvGet>(), rid); break;
      case MsgType::kKvDelete:
        on_kv_delete(peer, env.body<wire::KvDelete>(), rid);
        break;
      case MsgType::kObjectAdd: on_object_add(peer, env.body<wire::ObjectAdd>(), rid); break;
      case MsgType::kObjectDrop: on_object_drop(env.body<wire::ObjectDrop>()); break;
      case MsgType::kObjectWhere: on_object_where(peer, env.body<wire::ObjectWhere>(), rid); break;
      case MsgType::kProbe:  // a node answers: its actors may join SP groups again
        if (node && node->probe == rid) node->probe = 0;
        break;
      case MsgType::kError: {
        auto e = env.body<wire::Error>();
        spdlog::warn("peer reports error {}: {}", e.code, e.message);
        count("errors_reported_by_peers");
        break;
      }
      default:
        reply_error(peer, wire::ErrorCode::kBadRequest,
                    std::string(wire::to_string(env.type)) + " is not a request the head serves", rid);
    }
  } catch (const wire::WireError& e) {
    spdlog::warn("bad frame: {}", e.what());
    reply_error(peer, e.code, e.what(), rid);
  } catch (const std::exception& e) {
    spdlog::error("request failed: {}", e.what());
    reply_error(peer, wire::ErrorCode::kBadRequest, e.what(), rid);
  }
}

void Head::on_hello_node(const std::string& peer, const wire::HelloNode& h, uint64_t rid) {
  if (h.node_id.empty() || h.slots <= 0 || !valid_market(h.market, false)) {
    reply_error(peer, wire::ErrorCode::kBadRequest,
                "a node needs an id, slots > 0 and a market of reserved or spot", rid);
    return;
  }
  auto it = state_.nodes.find(h.node_id);
  wire::Welcome w{boot_, 0, static_cast<int32_t>(opt_.heartbeat.count()),
                  static_cast<int32_t>(opt_.liveness.count()), opt_.max_frame, {}};
  if (it != state_.nodes.end() && it->second.alive && it->second.session == h.session &&
      it->second.peer == peer) {
    to_nodes_[peer].frames.push_back(wire::encode(w, rid));  // a repeated hello: same answer
    return;
  }
  if (it != state_.nodes.end() && it->second.alive) {
    // The node started a new session (it lost sight of this head): its leases
    // go back to their mailboxes; adopt() below takes back what it still hosts.
    node_dead(it->second, "said hello again");
  }
  Node& n = state_.nodes[h.node_id];
  n = Node{};
  n.id = h.node_id;
  n.peer = peer;
  n.host = h.host;
  n.market = h.market;
  n.pid = h.pid;
  n.object_address = h.object_address;
  n.session = h.session;
  n.slots = h.slots;
  n.types = std::set<std::string>(h.types.begin(), h.types.end());
  n.last_seen = now_;
  state_.node_by_peer[peer] = h.node_id;
  wire::Cancel stale;
  w.adopted = adopt(n, h, stale);
  spdlog::info("node {} joined: {} {} slots on {} (pid {}), {} actor types", n.id, n.market, n.slots,
               n.host, n.pid, n.types.size());
  to_nodes_[peer].frames.push_back(wire::encode(w, rid));
  // Right behind the Welcome (the node takes nothing before it) and ahead of
  // any Tasks of this turn: a task re-queued here may be leased to this very
  // node again in the same turn, under the same id, and the node must drop
  // the old copy, not the new lease.
  if (!stale.ids.empty()) {
    count("stale_tasks_cancelled_on_nodes", stale.ids.size());
    to_nodes_[peer].frames.push_back(wire::encode(stale));
  }
}

void Head::on_hello_client(const std::string& peer, const wire::HelloClient& h, uint64_t rid) {
  if (h.client_id.empty()) {
    reply_error(peer, wire::ErrorCode::kBadRequest, "a client needs an id", rid);
    return;
  }
  auto it = state_.clients.find(h.client_id);
  if (it == state_.clients.end()) {
    const uint32_t num = free_client_number();
    if (num == 0) {
      count("clients_refused_full");
      reply_error(peer, wire::ErrorCode::kRefused,
                  "this head has no client number free (head --max-clients " +
                      std::to_string(opt_.max_clients) +
                      "): each is held by a client, or by a call a gone client made that is "
                      "still held (fetched by another); a gone driver's number comes free once "
                      "its results expire (head --result-ttl-s) and none of its calls is left",
                  rid);
      return;
    }
    store::ClientRecord rec{h.client_id, num};
    if (num < state_.next_client) {
      // Its ids go on above those of the number's earlier holders.
      count("client_numbers_reused");
      auto floor = state_.retired_seqs.find(num);
      if (floor != state_.retired_seqs.end()) rec.max_seq = floor->second;
    }
    record(EventKind::kClient, rec);
    state_.apply_client(rec);
    it = state_.clients.find(h.client_id);
  }
  Client& c = it->second;
  c.node = h.node_id;
  forget_received(c.rec.num, h.awaiting);
  if (!c.peer.empty()) client_by_peer_.erase(c.peer);
  // A connection that said hello as another client before: that one is gone
  // (check_liveness walks client_by_peer_ only, so it must not linger).
  if (auto prev = client_by_peer_.find(peer); prev != client_by_peer_.end()) {
    if (auto pc = state_.clients.find(prev->second); pc != state_.clients.end()) {
      pc->second.peer.clear();
      pc->second.gone_since = now_;
    }
  }
  c.peer = peer;
  c.last_seen = now_;
  c.gone_since.reset();
  c.expired = false;
  client_by_peer_[peer] = h.client_id;
  wire::Welcome w{boot_,
                  c.rec.num,
                  static_cast<int32_t>(opt_.heartbeat.count()),
                  static_cast<int32_t>(opt_.liveness.count()),
                  opt_.max_frame,
                  {},
                  c.rec.max_seq};
  to_callers_[peer].frames.push_back(wire::encode(w, rid));
}

void Head::forget_received(uint32_t caller, const std::vector<uint64_t>& awaiting) {
  std::vector<uint64_t> received = state_.done_ids(caller);
  if (received.empty()) return;
  std::unordered_set<uint64_t> wanted(awaiting.begin(), awaiting.end());
  std::erase_if(received, [&](uint64_t id) { return wanted.count(id) > 0; });
  if (received.empty()) return;
  count("results_received_unacknowledged", received.size());
  record(EventKind::kForget, received);
  state_.apply_forget(received);
}

void Head::on_create_pool(const std::string& peer, const wire::CreatePool& c, uint64_t rid) {
  wire::PoolCreated reply{c.name, false, ""};
  auto fail = [&](std::string why) {
    reply.error = std::move(why);
    count("rejected_pools");
    to_callers_[peer].frames.push_back(wire::encode(reply, rid));
  };
  if (c.name.empty() || c.type.empty()) return fail("a pool needs a name and an actor type");
  if (!valid_market(c.market, true)) return fail("market must be reserved, spot or any");
  if (c.size < 1 || c.size > 100000 || c.slots_per_actor < 1 || c.prefetch < 1) {
    return fail("size, slots per actor and prefetch must be positive");
  }
  if (c.aging_ms < 0 || c.aging_ms > kMaxAgingMs) {
    return fail("priority aging must be between 0 (none) and 30 days, not " +
                std::to_string(c.aging_ms) + " ms");
  }
  if (c.max_per_node < 0) {
    return fail("max members per node must be 0 (no limit) or more, not " +
                std::to_string(c.max_per_node));
  }
  if (!c.node.empty() && c.max_per_node > 0 && c.max_per_node < c.size) {
    return fail("a pool of " + std::to_string(c.size) + " pinned to node " + c.node +
                " with at most " + std::to_string(c.max_per_node) +
                " per node could never place all its members");
  }
  if (!c.node.empty() && !c.prefer.empty() && c.prefer != c.node) {
    return fail("a pool pinned to node " + c.node + " cannot prefer node " + c.prefer);
  }
  if (c.beside == c.name || c.away_from == c.name) {
    return fail(
        "a pool cannot be beside or away from itself (its members: pack, or "
        "at most 1 per node)");
  }
  if (!c.beside.empty() && c.beside == c.away_from) {
    return fail("a pool cannot be both beside and away from pool " + c.beside);
  }
  if (c.preempt && c.sp_degree > 1) {
    return fail("preemption by priority is not for pools with SP groups (degree " +
                std::to_string(c.sp_degree) + ")");
  }
  if (c.strategy != "spread" && c.strategy != "pack") {
    return fail("a placement strategy is spread or pack, not '" + c.strategy + "'");
  }
  if (c.sp_degree < 1 || c.sp_degree > c.size) {
    return fail("the SP degree must be between 1 and the pool's size (" + std::to_string(c.size) + "), not " +
                std::to_string(c.sp_degree));
  }
  auto it = state_.pools.find(c.name);
  if (it != state_.pools.end()) {
    if (it->second.rec.type != c.type) {
      return fail("'" + c.name + "' already exists with actor type " + it->second.rec.type);
    }
    if (it->second.rec.sp_degree != c.sp_degree) {
      return fail("'" + c.name + "' already exists with SP degree " + std::to_string(it->second.rec.sp_degree));
    }
    // Kept, not refused: a second driver that attaches with the defaults
    // (Ray's get_if_exists) must not fail; it is told what it did not get.
    reply.kept = kept_options(it->second.rec, c);
    if (!reply.kept.empty()) count("pools_kept_options");
  } else {
    store::PoolRecord rec{c.name,         c.type,      c.market,   c.size,      c.slots_per_actor,
                          c.prefetch,     c.sp_degree, c.strategy, c.node,      c.aging_ms,
                          c.max_per_node, c.prefer,    c.beside,   c.away_from, c.preempt,
                          c.beside_soft};
    record(EventKind::kPool, rec);
    state_.apply_pool(rec);
    for (int i = 0; i < c.size; ++i) {
      store::ActorRecord a{state_.next_actor, c.name, static_cast<uint32_t>(i), 0, false, {}};
      record(EventKind::kActor, a);
      state_.apply_actor(a);
    }
    spdlog::info("pool {}: {} x {} on {}", c.name, c.size, c.type, c.market);
  }
  reply.ok = true;
  to_callers_[peer].frames.push_back(wire::encode(reply, rid));
}

void Head::queue_result(const Task& t) {
  auto cit = state_.client_by_num.find(t.caller);
  if (cit == state_.client_by_num.end()) return;
  const Client& c = state_.clients[cit->second];
  if (c.peer.empty()) {  // sent when the caller reconnects and asks again
    if (c.expired) expired_results_pending_ = true;  // or dropped at the next sweep
    return;
  }
  queue_to_caller(c.peer, wire::Result{t.id, t.ok, t.kind, t.error_type, t.result});
}

void Head::queue_rejection(const std::string& peer, uint64_t id, const std::string& why) {
  queue_to_caller(peer, wire::Result{id, false, static_cast<int32_t>(ErrorKind::kRejected),
                                     "rejected", Blob{why}});
}

void Head::queue_to_caller(const std::string& peer, wire::Result r) {
  Outbox& box = to_callers_[peer];
  box.batch_bytes += r.payload.data.size() + 32;
  box.results.results.push_back(std::move(r));
  if (box.batch_bytes > kBatchBytes) {
    box.frames.push_back(wire::encode(box.results));
    box.results.results.clear();
    box.batch_bytes = 0;
  }
}

void Head::on_calls(Client& c, wire::Calls& calls) {
  Unannounced& accepted = unannounced_[c.peer];
  if (accepted.ids.empty()) accepted.since = now_;
  count("calls", calls.calls.size());
  for (auto& call : calls.calls) {
    auto reject = [&](const std::string& why, const char* counter) {
      count(counter);
      queue_rejection(c.peer, call.id, why);
    };
    if (wire::is_child_id(call.id) || call.parent != 0) {
      if (on_known_child_call(c, call, accepted.ids)) continue;
    } else if ((call.id >> 40) != c.rec.num) {
      // Another live client's range is a forgery; a number no client holds
      // now is this client's own from before it was retired (or a guess).
      reject(state_.client_by_num.count(static_cast<uint32_t>(call.id >> 40))
                 ? "task id is outside this client's range (or this client's results expired, "
                   "and its number went to another client)"
                 : not_held_message(call.id),
             "rejected_bad_id");
      continue;
    }
    auto existing = state_.tasks.find(call.id);
    if (existing != state_.tasks.end()) {
      if (existing->second.caller != c.rec.num) {
        reject(claimed_message(call.id), "rejected_claimed");
        continue;
      }
      // A resubmission after a reconnect: accepted once, answered again if done.
      accepted.ids.push_back(call.id);
      if (existing->second.state == TaskState::kDone) queue_result(existing->second);
      continue;
    }
    if (!wire::is_child_id(call.id) && (call.id & kSeqMask) <= c.rec.max_seq) {
      // Accepted once and no longer held: its result was received, by a
      // client that fetched it (this caller missed the news), or it was
      // refused. Accepting it again would run it again.
      reject(not_held_message(call.id), "rejected_resubmissions_gone");
      continue;
    }
    auto pit = state_.pools.find(call.mailbox);
    if (pit == state_.pools.end()) {
      reject("no actor or pool named '" + call.mailbox + "'", "rejected_unknown_actor");
      continue;
    }
    if (call.deadline_ms < 0 || call.deadline_ms > kMaxDeadlineMs) {
      reject("a deadline must be between 0 (none) and 365 days, not " +
                 std::to_string(call.deadline_ms) + " ms",
             "rejected_bad_deadline");
      continue;
    }
    if (pit->second.queue.size() >= opt_.max_mailbox) {
      reject("mailbox '" + call.mailbox + "' is full: " + std::to_string(pit->second.queue.size()) +
                 " calls wait (head --max-mailbox)",
             "rejected_mailbox_full");
      continue;
    }
    store::TaskRecord t;
    t.id = call.id;
    t.ord = state_.next_ord;
    t.caller = c.rec.num;
    t.mailbox = std::move(call.mailbox);
    t.method = std::move(call.method);
    t.args = std::move(call.args);
    t.max_attempts = call.max_attempts > 0 ? call.max_attempts : 3;
    t.parent = call.parent;
    t.priority = call.priority;
    if (state_.clock_ms != wall_ms_) {
      // Stamps this turn's accepts once (EventKind::kClock).
      record(EventKind::kClock, wall_ms_);
      state_.clock_ms = wall_ms_;
    }
    if (call.deadline_ms > 0) {
      t.deadline_ms = wall_ms_ + call.deadline_ms;
      deadlines_.emplace(t.deadline_ms, t.id);
    }
    record(EventKind::kAccept, t);
    Task& held = state_.apply_accept(std::move(t), &c.rec);
    held.accepted_at = held.since = now_;
    state_.enqueue(pit->second, held.priority, held.id);
    accepted.ids.push_back(held.id);
  }
}

bool Head::on_known_child_call(Client& c, const wire::Call& call, std::vector<uint64_t>& accepted) {
  if (call.parent == 0 || !wire::is_child_id(call.id) ||
      call.id != wire::child_call_id(call.parent, call.child_key, call.mailbox, call.method,
                                     call.args.data)) {
    count("rejected_bad_id");
    queue_rejection(c.peer, call.id,
                    "a call made by a task must carry the id derived from its parent, key and "
                    "contents (wire/child_ids.h)");
    return true;
  }
  if (!runs_on(call.parent, c.node)) {
    // A run the head has given up on (its node was taken for dead, and came
    // back) must not take calls from the run that replaced it.
    count("rejected_stale_parent");
    queue_rejection(c.peer, call.id,
                    "task " + std::to_string(call.parent) + " does not run on " +
                        (c.node.empty() ? std::string("a driver's connection") : "node " + c.node) +
                        " now: a task's calls come from the node that runs it");
    return true;
  }
  auto it = state_.tasks.find(call.id);
  if (it == state_.tasks.end()) return false;
  Task& t = it->second;
  if (t.caller != c.rec.num) {
    // The parent runs again, here: its earlier run's node is gone or gave the task back.
    claim(t, c,
          "call " + std::to_string(t.id) + " was made again by a later run of task " +
              std::to_string(call.parent) + ", which receives its result");
  }
  count("child_calls_answered_again");
  accepted.push_back(t.id);
  if (t.state == TaskState::kDone) queue_result(t);
  return true;
}

bool Head::runs_on(uint64_t task_id, const std::string& node) const {
  if (node.empty()) return false;
  auto it = state_.tasks.find(task_id);
  if (it == state_.tasks.end() || it->second.state != TaskState::kLeased) return false;
  const Task& t = it->second;
  if (t.node == node) return true;
  // Every member of an SP group runs the task; rank 0 holds the lease.
  auto pit = state_.pools.find(t.mailbox);
  if (pit == state_.pools.end() || pit->second.rec.sp_degree <= 1) return false;
  for (const auto& [_, g] : pit->second.groups) {
    if (g.task != task_id) continue;
    for (uint64_t m : g.members) {
      auto a = state_.actors.find(m);
      if (a != state_.actors.end() && a->second.node == node) return true;
    }
  }
  return false;
}

void Head::on_ack(const Client& c, const wire::AckResults& a) {
  // Only the caller's own results: a client that lost a call to a fetch acks
  // the rejection it got, and that must not forget the fetcher's result.
  // Journaled after the fact, within the same turn's entry: the event lists
  // just the ids that were dropped, so its replay does the same.
  std::vector<uint64_t> done = state_.apply_forget(a.ids, c.rec.num);
  if (!done.empty()) record(EventKind::kForget, done);
}

void Head::claim(Task& t, const Client& c, const std::string& why) {
  // The previous caller, if it is still connected, learns at once that it will
  // not get the result; if it reconnects later, its resubmission does.
  if (auto old = state_.client_by_num.find(t.caller); old != state_.client_by_num.end()) {
    const Client& prev = state_.clients[old->second];
    if (!prev.peer.empty()) queue_rejection(prev.peer, t.id, why);
  }
  ClaimEvent e{t.id, c.rec.num};
  record(EventKind::kClaim, e);
  state_.apply_claim(e);
}

void Head::on_fetch(Client& c, const wire::Fetch& f) {
  if (f.ids.size() > kMaxFetchIds) {
    throw std::invalid_argument("a Fetch may list at most " + std::to_string(kMaxFetchIds) +
                                " ids, not " + std::to_string(f.ids.size()));
  }
  count("fetches", f.ids.size());
  for (uint64_t id : f.ids) {
    auto it = state_.tasks.find(id);
    if (it == state_.tasks.end()) {
      count("rejected_fetches");
      queue_rejection(c.peer, id, not_held_message(id));
      continue;
    }
    Task& t = it->second;
    if (t.caller != c.rec.num) {
      claim(t, c, claimed_message(id));
      count("claimed_calls");
    }
    if (t.state == TaskState::kDone) queue_result(t);
  }
}

uint32_t Head::free_client_number() {
  const uint32_t most = std::clamp<uint32_t>(opt_.max_clients, 2, kMaxClients - 1);
  if (state_.next_client <= most) return state_.next_client;
  if (state_.client_by_num.size() >= most) return 0;  // every number has a client
  // Every number was given out once: a retired client's is free once no
  // task the head holds carries it as its ids' prefix (a call another
  // client fetched outlives its maker's record: State::ids_under). The new
  // holder's ids go on above the highest sequence used under it
  // (State::retired_seqs, Welcome::seq_floor), so no id is ever used twice;
  // and a call is checked against the number of the connection that sends
  // it, so an earlier holder's late frames cannot pass for the new one's.
  // The search goes on from where the last one stopped.
  for (uint32_t k = 0; k < most; ++k) {  // numbers 1 .. most
    const uint32_t num = 1 + (reuse_cursor_ - 1 + k) % most;
    if (!state_.client_by_num.count(num) && !state_.ids_under.count(num)) {
      reuse_cursor_ = 1 + num % most;
      return num;
    }
  }
  return 0;
}

std::string Head::not_held_message(uint64_t id) const {
  const std::string head = "call " + std::to_string(id) + " is not held by this head: ";
  if (wire::is_child_id(id)) {
    return head +
           "a task made it, and it was never accepted, or its parent is done and its "
           "result was received";
  }
  const auto num = static_cast<uint32_t>(id >> 40);
  auto owner = state_.client_by_num.find(num);
  if (owner == state_.client_by_num.end()) {
    // A number below the next, held by nobody now, was retired.
    if (num != 0 && num < state_.next_client) {
      return head + "its caller was gone for longer than head --result-ttl-s, so its results " +
             "expired and the head forgot that client";
    }
    return head + "no client of this head made it";
  }
  if ((id & kSeqMask) > state_.clients.at(owner->second).rec.max_seq) {
    return head + "it was never accepted (its caller had not sent it, or the head died before " +
           "committing it)";
  }
  return head + "it was accepted, and its result was received (by its caller or a client that " +
         "fetched it), or expired (its caller was gone for longer than head --result-ttl-s), or " +
         "it was refused";
}

void Head::expire_results() {
  if (opt_.result_ttl.count() <= 0 || now_ < next_result_sweep_) return;
  // A quarter of the TTL late at most, and never a scan per turn.
  next_result_sweep_ =
      now_ + std::clamp<transport::Clock::duration>(
                 opt_.result_ttl / 4, std::chrono::milliseconds(50), std::chrono::seconds(60));
  bool due = expired_results_pending_;
  expired_results_pending_ = false;
  std::unordered_set<uint32_t> expired;
  for (auto& [uuid, c] : state_.clients) {
    if (!c.peer.empty()) continue;
    if (!c.gone_since) c.gone_since = now_;  // gone since this boot, as far as this head knows
    if (now_ - *c.gone_since < opt_.result_ttl) continue;
    if (!c.expired) {
      due = c.expired = true;
      count("clients_expired");
    }
    expired.insert(c.rec.num);
  }
  // Looked at only when a client has just expired, or a result came for one
  // since the last sweep.
  if (due && !expired.empty()) {
    std::vector<uint64_t> ids;
    for (uint32_t caller : expired) {
      for (uint64_t id : state_.done_ids(caller)) {
        // A task's calls go with their parent (State::apply_forget), not with a connection.
        if (state_.tasks.at(id).parent == 0) ids.push_back(id);
      }
    }
    if (!ids.empty()) {
      record(EventKind::kForget, ids);
      state_.apply_forget(ids);
      count("results_expired", ids.size());
      spdlog::info("{} stored results expired: their callers have been gone for over {} s",
                   ids.size(),
                   std::chrono::duration_cast<std::chrono::seconds>(opt_.result_ttl).count());
    }
  }
  // An expired client that holds no call any more is retired: a head that
  // serves short-lived drivers for months keeps no record of each.
  std::vector<std::string> retire;
  for (uint32_t caller : expired) {
    if (state_.calls_by(caller) == 0) retire.push_back(state_.client_by_num.at(caller));
  }
  for (const std::string& uuid : retire) {
    record(EventKind::kRetireClient, uuid);
    state_.apply_retire_client(uuid);
  }
  count("clients_retired", retire.size());
}

void Head::time_out(Task& t) {
  FinishEvent f{
      t.id, false, static_cast<int32_t>(ErrorKind::kTimedOut), "timed_out",
      Blob{std::string("the call did not start before its deadline (CallOptions::deadline)") +
           (t.attempts > 0 || t.has_checkpoint ? ", so it was not started again"
                                               : ", and never ran")}};
  record(EventKind::kFinish, f);
  state_.apply_finish(f);
  count("tasks_timed_out");
  queue_result(t);
}

void Head::expire_deadlines() {
  std::map<std::string, std::unordered_set<uint64_t>> expired;  // by mailbox
  while (!deadlines_.empty() && deadlines_.begin()->first <= wall_ms_) {
    const uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = state_.tasks.find(id);
    if (it == state_.tasks.end() || it->second.state != TaskState::kQueued)
      continue;  // not expected
    expired[it->second.mailbox].insert(id);
    time_out(it->second);
  }
  for (auto& [mailbox, ids] : expired) {
    state_.pools[mailbox].queue.erase_if([&](uint64_t id) { return ids.count(id) > 0; });
  }
}

void Head::on_placed(Node& n, const wire::Placed& p) {
  auto it = state_.actors.find(p.actor_id);
  if (it == state_.actors.end()) return;
  Actor& a = it->second;
  if (a.node != n.id || a.rec.incarnation != p.incarnation || a.phase != ActorPhase::kPlacing) {
    count("stale_placements");
    return;
  }
  Pool& pool = state_.pools[a.rec.pool];
  if (p.ok) {
    state_.set_phase(a, ActorPhase::kReady);
    a.credit = pool.rec.prefetch;
    return;
  }
  spdlog::error("node {} cannot host {} ({}): {}", n.id, pool.rec.type, a.rec.pool, p.error);
  count("placement_failures");
  n.types.erase(pool.rec.type);
  n.used -= pool.rec.slots_per_actor;
  n.actors.erase(a.rec.id);
  state_.set_phase(a, ActorPhase::kPending);
  a.node.clear();
}

void Head::on_done(Node& n, wire::Done& d) {
  if (d.seq > n.done_seen) {
    if (n.done_seen == n.done_committed) done_pending_.push_back(n.id);
    n.done_seen = d.seq;
  }
  std::vector<Task*> handed_back;
  std::vector<std::pair<Pool*, uint64_t>> broken;  // SP groups whose task was handed back
  for (auto& c : d.done) {
    if (on_member_done(c)) continue;
    auto it = state_.tasks.find(c.id);
    if (it == state_.tasks.end() || it->second.state != TaskState::kLeased ||
        it->second.epoch != c.epoch || it->second.actor != c.actor_id) {
      count("stale_completions");  // an older lease: its task was re-queued, or finished already
      continue;
    }
    Task& t = it->second;
    // Yielded or never started: back to the front of the mailbox, not a result.
    const bool handed = !c.ok && c.kind == static_cast<int32_t>(ErrorKind::kPreempted);
    if (n.leased > 0) n.leased -= 1;
    auto ait = state_.actors.find(c.actor_id);
    if (ait != state_.actors.end()) {
      Actor& a = ait->second;
      // Credit comes back only to an actor that may take more work here.
      if (a.node == n.id && a.phase == ActorPhase::kReady && !n.draining) a.credit += 1;
      if (a.leased > 0) a.leased -= 1;
      if (!handed) a.completed += 1;
      if (c.has_actor_state) {  // the actor's checkpoint: a later incarnation starts from it
        store::ActorRecord rec = a.rec;
        rec.has_state = true;
        rec.state = std::move(c.actor_state);
        record(EventKind::kActor, rec);
        state_.apply_actor(rec);
      }
    }
    lease_ended_on(n, ait != state_.actors.end() ? &ait->second : nullptr);
    Pool& pool = state_.pools[t.mailbox];
    if (pool.leased > 0) pool.leased -= 1;
    if (ait != state_.actors.end() && pool.rec.sp_degree > 1) {
      auto git = pool.groups.find(ait->second.group);
      if (git != pool.groups.end() && git->second.task == c.id && git->second.lease == c.epoch) {
        git->second.task = 0;  // free for the next task
        // A yield or a failed collective: a member is going or gone.
        if (handed) broken.emplace_back(&pool, git->first);
      }
    }
    if (handed) {
      if (c.error_type == wire::kYieldedToPriority) count("tasks_yielded_to_priority");
      handed_back.push_back(&t);
      continue;
    }
    // A result (lease holders only: an SP member's completion is not one).
    pool.latency.ran.observe(t.since, now_);
    pool.latency.answered.observe(t.accepted_at, now_);
    FinishEvent e{c.id, c.ok, c.kind, std::move(c.error_type), std::move(c.payload)};
    record(EventKind::kFinish, e);
    state_.apply_finish(e);
    count(t.ok ? "results_ok" : "results_error");
    if (!t.ok && t.kind == static_cast<int32_t>(ErrorKind::kRejected)) count("rejected_by_node");
    queue_result(t);
  }
  hand_back(handed_back);
  for (auto [pool, group] : broken) break_group(*pool, group, "its task was handed back");
}

void Head::lease_ended_on(Node& n, Actor* a) {
  if (!n.draining) return;
  if (n.leased == 0 && !n.emptied_at) n.emptied_at = now_;
  // An actor on a draining node moves once it holds no lease there.
  if (a && a->node == n.id && a->leased == 0) move_actor(*a);
}

void Head::hand_back(std::vector<Task*>& tasks) {
  requeue_front(tasks, true);
  count("tasks_handed_back", tasks.size());
}

void Head::requeue_front(std::vector<Task*>& tasks, bool handed_back) {
  // Pushed to the front of their priority in reverse arrival order: the
  // mailbox keeps its FIFO within each priority.
  std::sort(tasks.begin(), tasks.end(), [](Task* a, Task* b) { return a->ord > b->ord; });
  for (Task* t : tasks) {
    RequeueEvent e{t->id, handed_back};
    record(EventKind::kRequeue, e);
    state_.apply_requeue(e);
    state_.enqueue(state_.pools[t->mailbox], t->priority, t->id, true);
    t->since = now_;
    if (t->deadline_ms != 0)
      deadlines_.emplace(t->deadline_ms, t->id);  // may be past: expires next turn
  }
}

std::vector<uint64_t> Head::adopt(Node& n, const wire::HelloNode& hello, wire::Cancel& stale) {
  std::vector<uint64_t> adopted;
  // Leases the node still holds, by actor. A lease it does not list ended
  // with a result this head never saw: it goes back to its mailbox below.
  std::unordered_set<uint64_t> held(hello.held.begin(), hello.held.end());
  std::unordered_map<uint64_t, uint64_t> leases;
  for (uint64_t id : state_.leased_ids(n.id)) {
    if (held.count(id)) leases[state_.tasks.at(id).actor]++;
  }
  for (const auto& h : hello.hosted) {
    auto it = state_.actors.find(h.actor_id);
    if (it == state_.actors.end()) continue;
    Actor& a = it->second;
    Pool& pool = state_.pools[a.rec.pool];
    if (a.phase != ActorPhase::kPending || a.rec.incarnation != h.incarnation ||
        n.slots - n.used < pool.rec.slots_per_actor) {
      continue;
    }
    state_.set_phase(a, ActorPhase::kReady);
    a.node = n.id;
    a.leased = leases[a.rec.id];
    // Below 0 when it holds a lease beyond its credit (Placement::preempt).
    a.credit = pool.rec.prefetch - static_cast<int32_t>(a.leased);
    n.used += pool.rec.slots_per_actor;
    n.actors.insert(a.rec.id);
    n.leased += a.leased;
    pool.leased += a.leased;
    adopted.push_back(a.rec.id);
  }
  if (!adopted.empty()) {
    spdlog::info("node {} came back with {} actors and their leases", n.id, adopted.size());
    count("actors_adopted", adopted.size());
  }
  // Leases of actors it no longer has (or that moved) go back to their mailboxes.
  std::vector<Task*> orphans;
  for (uint64_t id : state_.leased_ids(n.id)) {
    Task& t = state_.tasks.at(id);
    if (!n.actors.count(t.actor) || !held.count(id)) orphans.push_back(&t);
  }
  requeue_front(orphans, false);
  count("tasks_requeued", orphans.size());
  // Tasks it holds that are no longer its leases here (finished meanwhile,
  // cancelled by a head that died before telling it, or re-queued above): it
  // drops or stops them (the caller sends `stale` after the Welcome). Their
  // results would be stale.
  for (uint64_t id : hello.held) {
    auto it = state_.tasks.find(id);
    if (it == state_.tasks.end() || it->second.state != TaskState::kLeased ||
        it->second.node != n.id)
      stale.ids.push_back(id);
  }
  return adopted;
}

void Head::end_grace() {
  grace_over_ = true;
  std::vector<Task*> orphans;
  for (const auto& [node, ids] : state_.leased_on) {
    auto n = state_.nodes.find(node);
    if (n != state_.nodes.end() && n->second.alive) continue;
    for (uint64_t id : ids) orphans.push_back(&state_.tasks.at(id));
  }
  requeue_front(orphans, false);
  count("tasks_requeued", orphans.size());
  if (!orphans.empty()) {
    spdlog::info("{} leases of nodes that did not come back after the restart: re-queued", orphans.size());
  }
}

void Head::on_commits(Node& n, const wire::Commits& c) {
  for (const auto& commit : c.commits) {
    auto it = state_.tasks.find(commit.id);
    if (it == state_.tasks.end() || it->second.state != TaskState::kLeased ||
        it->second.epoch != commit.epoch || it->second.actor != commit.actor_id) {
      count("stale_commits");
      continue;
    }
    CommitEvent e{commit.id, commit.epoch, commit.state};
    record(EventKind::kCommit, e);
    state_.apply_commit(e);
    count("commits");
  }
}

void Head::on_remove_pool(const std::string& peer, const wire::RemovePool& r, uint64_t rid) {
  auto pit = state_.pools.find(r.name);
  if (pit == state_.pools.end()) {
    reply_error(peer, wire::ErrorCode::kBadRequest, "no actor or pool named '" + r.name + "'", rid);
    return;
  }
  const Pool& pool = pit->second;
  // Its open calls fail, the running ones too: a result that comes later is
  // stale. They are those in its mailbox and those leased (State::leased_on),
  // not a walk over every task the head holds.
  std::vector<uint64_t> open;
  for (uint64_t id : pool.queue.ids()) {
    if (auto t = state_.tasks.find(id);
        t != state_.tasks.end() && t->second.state == TaskState::kQueued)
      open.push_back(id);
  }
  for (const auto& [node, ids] : state_.leased_on) {
    for (uint64_t id : ids) {
      if (state_.tasks.at(id).mailbox == r.name) open.push_back(id);
    }
  }
  for (uint64_t id : open) {
    Task& t = state_.tasks.at(id);
    if (t.state == TaskState::kLeased) {
      if (auto n = state_.nodes.find(t.node); n != state_.nodes.end() && n->second.leased > 0) {
        n->second.leased -= 1;
      }
    }
    FinishEvent f{id, false, static_cast<int32_t>(ErrorKind::kRejected), "rejected",
                  Blob{"actor or pool '" + r.name + "' was removed"}};
    record(EventKind::kFinish, f);
    state_.apply_finish(f);
    queue_result(t);
  }
  // Its actors leave their nodes, whose slots are free at once.
  std::map<std::string, wire::Unplace> unplace;  // by the node's routing id
  for (uint64_t id : pool.members) {
    auto a = state_.actors.find(id);
    if (a == state_.actors.end() || a->second.node.empty()) continue;
    auto n = state_.nodes.find(a->second.node);
    if (n == state_.nodes.end()) continue;
    n->second.used -= pool.rec.slots_per_actor;
    n->second.actors.erase(id);
    if (n->second.alive) unplace[n->second.peer].actors.push_back(id);
  }
  for (auto& [node_peer, u] : unplace) to_nodes_[node_peer].frames.push_back(wire::encode(u));
  spdlog::info("pool {} removed: {} calls failed, {} actors unplaced", r.name, open.size(),
               pool.members.size());
  for (const auto& [gid, g] : pool.groups) drop_rendezvous(group_name(r.name, gid), g.epoch);
  count("pools_removed");
  count("tasks_failed_pool_removed", open.size());
  record(EventKind::kRemovePool, r.name);
  state_.apply_remove_pool(r.name);
  to_callers_[peer].frames.push_back(wire::encode_empty(wire::MsgType::kOk, rid));
}

void Head::on_drain(const std::string& peer, Node* from_node, const wire::Drain& d, uint64_t rid) {
  if (from_node) {  // the node itself had notice (SIGTERM, a cloud notice)
    spdlog::info("node {} has notice: draining, deadline {} ms", from_node->id, d.deadline_ms);
    start_drain(*from_node);
    return;
  }
  auto it = state_.nodes.find(d.node_id);
  if (it == state_.nodes.end() || !it->second.alive) {
    reply_error(peer, wire::ErrorCode::kBadRequest, "no live node named '" + d.node_id + "'", rid);
    return;
  }
  Node& n = it->second;
  spdlog::info("drain of node {} requested, deadline {} ms", n.id, d.deadline_ms);
  to_nodes_[n.peer].frames.push_back(wire::encode(d));
  start_drain(n);
  to_callers_[peer].frames.push_back(wire::encode_empty(wire::MsgType::kOk, rid));
}

void Head::start_drain(Node& n) {
  if (n.draining) return;
  n.draining = true;
  n.notice_at = now_;
  if (n.leased == 0) n.emptied_at = now_;
  count("drains");
  std::vector<uint64_t> ids(n.actors.begin(), n.actors.end());
  for (uint64_t id : ids) {
    Actor& a = state_.actors[id];
    a.credit = 0;  // nothing new for it here
    // A member of an SP group that runs a task stays until the group yields
    // the task (every member sees the notice through its group, sp_groups.cc).
    if (a.leased == 0 && !in_busy_group(a)) move_actor(a);
  }
}

void Head::move_actor(Actor& a) {
  auto nit = state_.nodes.find(a.node);
  if (nit != state_.nodes.end()) {
    nit->second.actors.erase(a.rec.id);
    nit->second.used -= state_.pools[a.rec.pool].rec.slots_per_actor;
  }
  state_.set_phase(a, ActorPhase::kPending);
  a.node.clear();
  a.credit = 0;
  count("actors_moved");
}

void Head::on_stop(const std::string& peer, uint64_t rid) {
  spdlog::info("stop requested: shutting down {} nodes", state_.node_by_peer.size());
  for (const auto& [p, _] : state_.node_by_peer) {
    to_nodes_[p].frames.push_back(wire::encode_empty(wire::MsgType::kShutdown));
    awaiting_goodbye_.insert(p);
  }
  to_callers_[peer].frames.push_back(wire::encode_empty(wire::MsgType::kOk, rid));
  stopping_ = true;
  stop_deadline_ = now_ + std::chrono::seconds(2);
}

// KV replies leave with the node-bound frames, before the commit: the KV is
// not journaled, so there is nothing to wait for.
void Head::on_kv_set(const std::string& peer, wire::KvSet& s, uint64_t rid) {
  if (!check_keyed_get(peer, rid, "a KV set", s.key, 0)) return;
  count("kv_sets");
  auto [first, last] = kv_waiters_.equal_range(s.key);
  for (auto it = first; it != last; ++it)
    to_nodes_[it->second.peer].frames.push_back(wire::encode(wire::KvValue{true, s.value}, it->second.rid));
  kv_waiters_.erase(first, last);
  auto [it, added] = kv_.try_emplace(s.key);
  kv_bytes_ += s.value.size() + (added ? s.key.size() : 0) - it->second.size();
  it->second = std::move(s.value);
  to_nodes_[peer].frames.push_back(wire::encode_empty(wire::MsgType::kOk, rid));
}

void Head::on_kv_delete(const std::string& peer, const wire::KvDelete& d, uint64_t rid) {
  if (!check_keyed_get(peer, rid, "a KV delete", d.key, 0)) return;
  count("kv_deletes");
  auto it = kv_.find(d.key);
  const bool found = it != kv_.end();
  if (found) erase_kv(it);
  to_nodes_[peer].frames.push_back(wire::encode(wire::KvValue{found, {}}, rid));
}

void Head::on_kv_get(const std::string& peer, const wire::KvGet& g, uint64_t rid) {
  if (!check_keyed_get(peer, rid, "a KV get", g.key, g.wait_ms)) return;
  count("kv_gets");
  auto it = kv_.find(g.key);
  std::optional<wire::KvValue> found;
  if (it != kv_.end()) found = wire::KvValue{true, it->second};
  answer_or_wait(kv_waiters_, peer, rid, g.key, g.wait_ms, found, wire::KvValue{false, {}});
}

bool Head::check_keyed_get(const std::string& peer, uint64_t rid, const char* what, const std::string& key,
                           int64_t wait_ms) {
  if (!key.empty() && key.size() <= kMaxKey && wait_ms >= 0 && wait_ms <= kMaxWaitMs) return true;
  reply_error(peer, wire::ErrorCode::kBadRequest,
              std::string(what) + " needs a key of 1 to " + std::to_string(kMaxKey) + " bytes and a wait of 0 to " +
                  std::to_string(kMaxWaitMs) + " ms",
              rid);
  return false;
}

void Head::expire_kv_waiters() { expire_waiters(kv_waiters_, wire::KvValue{false, {}}); }

Task* Head::lease(Pool& pool, Actor& a, Node& n, const SpGroupState* group) {
  const uint64_t id = pool.queue.pop_front(pool.rec.aging_ms, [&](uint64_t queued) {
    auto q = state_.tasks.find(queued);
    return q == state_.tasks.end() ? wall_ms_ : accepted_ms(q->second);
  });
  auto it = state_.tasks.find(id);
  if (it == state_.tasks.end() || it->second.state != TaskState::kQueued) return nullptr;
  Task& t = it->second;
  if (t.deadline_ms != 0) deadlines_.erase({t.deadline_ms, id});  // no longer queued
  if (t.attempts >= t.max_attempts) {
    // Every run so far was lost with its node: give up, and say why.
    FinishEvent f{id, false, static_cast<int32_t>(ErrorKind::kCrashed), "crashed",
                  Blob{"gave up after " + std::to_string(t.attempts) +
                       " attempt(s): the node running the task was lost each time"}};
    record(EventKind::kFinish, f);
    state_.apply_finish(f);
    count("tasks_failed_attempts");
    queue_result(t);
    return nullptr;
  }
  if (t.deadline_ms != 0 && t.deadline_ms <= wall_ms_) {
    time_out(t);
    return nullptr;
  }
  LeaseEvent e{id, state_.next_epoch, a.rec.id, n.id};
  record(EventKind::kLease, e);
  state_.apply_lease(e);
  pool.latency.waited.observe(t.since, now_);
  t.since = now_;
  a.credit -= 1;
  a.leased += 1;
  pool.leased += 1;
  n.leased += 1;
  auto send = [&](uint64_t actor, const Node& to, SpGroup g) {
    Outbox& box = to_nodes_[to.peer];
    box.tasks.done_acked = to.done_committed;
    // SP members get no deadline of their own: a group starts together.
    const int64_t within =
        t.deadline_ms == 0 || g.size > 0 ? 0 : std::max<int64_t>(1, t.deadline_ms - wall_ms_);
    box.tasks.tasks.push_back(wire::Task{id, actor, e.epoch, t.method, t.args, t.attempts,
                                         t.has_checkpoint, t.checkpoint, std::move(g), within,
                                         t.priority, pool.rec.aging_ms,
                                         std::max<int64_t>(0, wall_ms_ - accepted_ms(t)),
                                         // Placement::preempt: dispatch() gives every idle member
                                         // a call first, so a lease that reaches a busy member is
                                         // one no idle member could take.
                                         pool.rec.preempt});
    box.batch_bytes += t.args.data.size() + t.method.size() + 32;
    if (box.batch_bytes > kBatchBytes) {
      box.frames.push_back(wire::encode(box.tasks));
      box.tasks.tasks.clear();
      box.batch_bytes = 0;
    }
  };
  if (!group) {
    send(a.rec.id, n, {});
    return &t;
  }
  // Every member runs the task, under the same lease epoch; rank 0 holds the lease.
  const int32_t size = static_cast<int32_t>(group->members.size());
  for (int32_t r = 0; r < size; ++r) {
    const Actor& m = state_.actors[group->members[r]];
    send(m.rec.id, state_.nodes[m.node],
         SpGroup{group_name(pool.rec.name, group->id), group->epoch, r, size, group->members});
  }
  return &t;
}

void Head::dispatch() {
  for (auto wit = state_.waiting.begin(); wit != state_.waiting.end();) {
    auto pit = state_.pools.find(*wit);
    if (pit == state_.pools.end() || pit->second.queue.empty()) {
      wit = state_.waiting.erase(wit);
      continue;
    }
    Pool& pool = pit->second;
    ++wit;
    if (pool.rec.sp_degree > 1) {
      dispatch_groups(pool);
      continue;
    }
    size_t n = pool.members.size();
    if (pool.rec.preempt) {
      // Idle members first: a call dealt to a busy one would wait behind its
      // running call, or have it yield, while another member sat idle.
      for (size_t k = 0; k < n && !pool.queue.empty(); ++k) {
        Actor& a = state_.actors[pool.members[(pool.cursor + k) % n]];
        if (a.phase != ActorPhase::kReady || a.credit <= 0 || a.leased > 0) continue;
        lease(pool, a, state_.nodes[a.node]);
      }
    }
    while (!pool.queue.empty()) {
      bool leased_any = false;
      for (size_t k = 0; k < n && !pool.queue.empty(); ++k) {
        Actor& a = state_.actors[pool.members[(pool.cursor + k) % n]];
        if (a.phase != ActorPhase::kReady || a.credit <= 0) continue;
        lease(pool, a, state_.nodes[a.node]);
        leased_any = true;
      }
      pool.cursor = (pool.cursor + 1) % std::max<size_t>(n, 1);
      if (!leased_any) break;
    }
    if (pool.rec.preempt && !pool.queue.empty()) preempt_for(pool);
  }
}

void Head::node_dead(Node& n, const char* why) {
  if (!n.alive) return;
  spdlog::info("node {} is gone ({})", n.id, why);
  count(n.draining ? "nodes_drained" : "nodes_lost");
  n.alive = false;
  n.gone_at = now_;
  drop_objects_of(n.id);
  n.leased = 0;
  state_.node_by_peer.erase(n.peer);
  // Tasks leased to its actors go back to the front of their mailboxes, in arrival order.
  std::vector<Task*> leased;
  for (uint64_t id : state_.leased_ids(n.id)) leased.push_back(&state_.tasks.at(id));
  for (Task* t : leased) {
    Pool& pool = state_.pools[t->mailbox];
    if (pool.leased > 0) pool.leased -= 1;
  }
  requeue_front(leased, false);
  count("tasks_requeued", leased.size());
  if (!leased.empty()) spdlog::warn("node {}: {} leased tasks back to their mailboxes", n.id, leased.size());
  for (uint64_t id : n.actors) {
    Actor& a = state_.actors[id];
    state_.set_phase(a, ActorPhase::kPending);
    a.node.clear();
    a.credit = 0;
    a.leased = 0;
  }
  n.actors.clear();
  n.used = 0;
}

bool Head::check_liveness() {
  bool lost = false;
  for (auto& [id, n] : state_.nodes) {
    if (n.alive && now_ - n.last_seen > opt_.liveness) {
      node_dead(n, "missed heartbeats");
      lost = true;
    }
  }
  // The connected clients only: the records of every client the cluster
  // ever had stay in state_.clients.
  for (auto it = client_by_peer_.begin(); it != client_by_peer_.end();) {
    auto cit = state_.clients.find(it->second);
    if (cit == state_.clients.end() || now_ - cit->second.last_seen <= opt_.liveness * 3) {
      ++it;
      continue;
    }
    Client& c = cit->second;
    const std::string uuid = it->second;
    it = client_by_peer_.erase(it);
    c.peer.clear();
    c.gone_since = now_;
    // Its process is gone, or cut off: its object copies cannot be served
    // (a driver that comes back announces them again).
    drop_objects_of(wire::kDriverHolderPrefix + uuid);
  }
  return lost;
}

void Head::forgive_absence(transport::Clock::time_point previous) {
  // Turns follow each other within a poll timeout (≤ 50 ms) plus a turn's
  // work. A longer gap means the head was not reading: its peers' heartbeats
  // of that time may still be in the sockets or the kernel, unread. Without
  // this, a head stopped for a second wakes up, reads nothing yet and
  // declares every node dead (Preemption.AHeadPausedPastTheLivenessBlamesNoNode).
  if (previous == transport::Clock::time_point{}) return;
  const auto gap = now_ - previous;
  longest_turn_gap_ = std::max(longest_turn_gap_, gap);
  if (gap <= opt_.heartbeat) return;
  const auto away = gap - opt_.heartbeat;
  count("head_stalls");
  if (gap > opt_.liveness / 2) {
    spdlog::warn("the head was away from its socket for {} ms; its peers' liveness waits as long",
                 std::chrono::duration_cast<std::chrono::milliseconds>(gap).count());
  }
  for (auto& [id, n] : state_.nodes) {
    if (n.alive) n.last_seen = std::min(now_, n.last_seen + away);
  }
  for (const auto& [peer, uuid] : client_by_peer_) {
    auto it = state_.clients.find(uuid);
    if (it != state_.clients.end())
      it->second.last_seen = std::min(now_, it->second.last_seen + away);
  }
}

void Head::send_heartbeats() {
  for (const auto& [peer, id] : state_.node_by_peer) {
    auto it = state_.nodes.find(id);
    if (it != state_.nodes.end()) to_nodes_[peer].frames.push_back(heartbeat_to(it->second));
  }
  std::string hb = wire::encode(wire::Heartbeat{boot_});
  for (const auto& [peer, _] : client_by_peer_) to_nodes_[peer].frames.push_back(hb);
}

// Also acknowledges the node's results that the last commit covered.
std::string Head::heartbeat_to(const Node& n) const {
  return wire::encode(wire::Heartbeat{boot_, n.done_committed});
}

void Head::flush(std::map<std::string, Outbox>& boxes) {
  for (auto& [peer, box] : boxes) {
    if (!box.accepted.ids.empty()) box.frames.push_back(wire::encode(box.accepted));
    if (!box.results.results.empty()) box.frames.push_back(wire::encode(box.results));
    if (!box.tasks.tasks.empty()) box.frames.push_back(wire::encode(box.tasks));
    for (auto& f : box.last) box.frames.push_back(std::move(f));
    for (const auto& f : box.frames) {
      spdlog::trace("head: {} bytes to peer {}", f.size(), peer);
      if (!transport::send_routed(router_, peer, f)) {
        count("sends_to_gone_peers");
        break;
      }
    }
  }
  boxes.clear();
}

void Head::maybe_compact(bool force) {
  const auto t0 = transport::Clock::now();
  if (!state_.snapshot_pending()) {
    if (!force && store_->compacting()) return;
    // Reaps the last compaction's thread; throws if it failed, which stops the
    // head now rather than at its next commit (the store takes no more).
    store_->finish_compaction();
    if (!force && store_->journal_entries() < opt_.compact_every &&
        store_->journal_bytes() < opt_.compact_bytes) {
      return;
    }
    if (store_->journal_entries() == 0 && !state_.meta_dirty() && state_.dirty_tasks.empty() &&
        state_.erased_tasks.empty()) {
      return;  // nothing to fold (the store was finished above)
    }
    // The cut: this turn's commit is the last entry the tables will hold.
    spdlog::debug("compaction of {} journal entries ({} bytes) begun; {} tasks to copy",
                  store_->journal_entries(), store_->journal_bytes(), state_.dirty_tasks.size());
    store_->begin_compaction();
    state_.begin_snapshot();
    count("compactions");
  }
  // Taken over several turns: this one copies its share, a stopping head all.
  const bool done =
      force ? state_.snapshot_step(std::chrono::microseconds::max())
            : state_.snapshot_step(kSnapshotSlice,
                                   opt_.snapshot_records > 0 ? opt_.snapshot_records : SIZE_MAX);
  if (done) {
    store_->compact(state_.take_snapshot());
    spdlog::debug("compaction snapshot taken; the tables are being written");
  }
  note_compaction_pause(t0);
  if (done && force) store_->finish_compaction();  // a stopping head leaves the tables written
}

// The head's own part of a compaction, per turn: the cut, then a share of the
// snapshot (the store writes the tables on its own thread). Status shows the
// longest.
void Head::note_compaction_pause(transport::Clock::time_point t0) {
  const uint64_t ms = static_cast<uint64_t>(transport::ms_since(t0));
  auto& longest = counters_["compaction_ms_max"];
  longest = std::max(longest, ms);
}

ClusterStatus Head::status() const {
  ClusterStatus s;
  s.boot = boot_;
  s.store = opt_.store_path;
  s.tasks_live = state_.tasks.size();
  s.counters = counters_;
  // The longest time between two reads of the socket (a turn's work and the
  // poll's wait), in this head's life.
  // What the rendezvous KV holds now (in memory: keys of live SP
  // formations and the programs' own).
  s.counters["kv_keys"] = kv_.size();
  s.counters["kv_bytes"] = kv_bytes_;
  // Client records held: connected, or gone and not yet retired.
  s.counters["clients_known"] = state_.clients.size();
  // Tasks a compaction's snapshot has yet to look at (0: none being taken).
  s.counters["snapshot_tasks_left"] = state_.snapshot_left();
  // ... and those copied before they changed or went (State::will_change).
  s.counters["snapshot_tasks_copied_early"] = state_.snapshot_copied_early;
  s.counters["turn_gap_ms_max"] = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(longest_turn_gap_).count());
  s.counters["turn_busy_ms_max"] = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(longest_busy_).count());
  s.metrics_address = metrics_address();
  auto ago = [&](const std::optional<transport::Clock::time_point>& t) -> int64_t {
    return t ? std::chrono::duration_cast<std::chrono::milliseconds>(now_ - *t).count() : -1;
  };
  for (const auto& [id, n] : state_.nodes) {
    NodeStatus ns;
    ns.id = n.id;
    ns.host = n.host;
    ns.market = n.market;
    ns.state = !n.alive ? "dead" : n.draining ? "draining" : "alive";
    ns.slots = n.slots;
    ns.used = n.used;
    ns.pid = n.pid;
    ns.object_address = n.object_address;
    ns.last_heartbeat_ms = ago(n.last_seen);
    ns.running = n.leased;
    ns.notice_ms_ago = ago(n.notice_at);
    ns.emptied_ms_ago = ago(n.emptied_at);
    ns.gone_ms_ago = ago(n.gone_at);
    s.nodes.push_back(std::move(ns));
  }
  // Each explanation visits every node: a status of ten thousand waiting
  // pools explains the first kExplainedPools.
  size_t explained = 0;
  for (const auto& [name, p] : state_.pools) {
    int placed = 0;
    for (uint64_t id : p.members) {
      const Actor& a = state_.actors.at(id);
      if (a.phase == ActorPhase::kReady) ++placed;
      s.actors.push_back(ActorStatus{id, name, a.node, to_string(a.phase), a.rec.incarnation, a.leased,
                                     a.completed});
    }
    s.pools.push_back(PoolStatus{name, p.rec.type, p.rec.market, p.rec.size, placed, p.queue.size(),
                                 p.leased, p.queue.depths(), p.latency.waited.status(),
                                 p.latency.ran.status(), p.latency.answered.status(),
                                 p.rec.aging_ms, "", placement_rules(p.rec)});
    auto u = state_.unplaced.find(name);
    if (u != state_.unplaced.end() && !u->second.empty()) {
      s.pools.back().waiting_for = ++explained <= kExplainedPools
                                       ? why_waiting(name, p.rec, u->second)
                                       : std::to_string(u->second.size()) +
                                             " member(s) wait (reasons are given for the first " +
                                             std::to_string(kExplainedPools) + " waiting pools)";
    }
    for (const auto& [gid, g] : p.groups) {
      s.groups.push_back(SpGroupStatus{name, group_name(name, gid), g.epoch, g.members, g.task});
    }
  }
  return s;
}

}  // namespace spotlight::head

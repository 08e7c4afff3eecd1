#include "objects/node_object_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "common/ids.h"
#include "spotlight/errors.h"
#include "wire/envelope.h"

namespace spotlight::objects {

namespace {
constexpr int kWindow = 4;  // chunks requested ahead while copying

// The local address this machine uses toward `head` (HOST:PORT): the one
// other nodes of the cluster can reach. No packet is sent.
std::string host_toward(const std::string& head) {
  std::string host = head.substr(0, head.rfind(':'));
  std::string port = head.substr(head.rfind(':') + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  std::string out = "127.0.0.1";
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return out;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char buf[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf))) out = buf;
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  return out;
}
}  // namespace

uint64_t digest_step(uint64_t acc, std::string_view block) {
  return (acc ^ std::hash<std::string_view>{}(block)) * 0x100000001B3ull;
}

uint64_t digest_of(std::string_view bytes) {
  uint64_t acc = bytes.size();
  for (size_t off = 0; off < bytes.size(); off += kDigestBlock) acc = digest_step(acc, bytes.substr(off, kDigestBlock));
  return acc;
}

NodeObjectStore::NodeObjectStore(StoreOptions options)
    : opt_(std::move(options)), head_(opt_.head, "objects-", opt_.key) {
  if (opt_.advertise_host.empty()) opt_.advertise_host = host_toward(opt_.head);
  opt_.chunk = std::max<size_t>(opt_.chunk, 4096);
  stats_.capacity = opt_.capacity;
  int port = 0;
  server_ = transport::make_router("tcp://0.0.0.0:0", opt_.chunk + 4096, &port, opt_.key);
  address_ = opt_.advertise_host + ":" + std::to_string(port);
  server_thread_ = std::thread([this] { serve(); });
}

NodeObjectStore::~NodeObjectStore() {
  if (opt_.forget_on_close) forget_all();
  stop_.store(true);
  server_thread_.join();
}

void NodeObjectStore::forget_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard l(mu_);
    for (const auto& [id, _] : entries_) ids.push_back(id);
  }
  if (ids.empty()) return;
  for (const auto& id : ids)
    head_.send(wire::MsgType::kObjectDrop, pack(wire::ObjectDrop{id, opt_.node_id}));
  // The head answers frames of one connection in order: once this is
  // answered, the drops are in. A head that is gone forgets them anyway.
  try {
    head_.request(wire::MsgType::kObjectWhere, pack(wire::ObjectWhere{ids.front(), 0}),
                  std::chrono::milliseconds(2000), "object directory");
  } catch (const std::exception& e) {
    spdlog::warn("objects of {}: the head did not confirm that they are forgotten: {}",
                 opt_.node_id, e.what());
  }
}

void NodeObjectStore::serve() {
  zmq::pollitem_t items[] = {{server_.handle(), 0, ZMQ_POLLIN, 0}};
  while (!stop_.load()) {
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    while (auto m = transport::try_recv_routed(server_)) {
      std::string reply;
      ObjectRef data;  // the copy a chunk is sent from, without copying it first
      uint64_t offset = 0, length = 0;
      try {
        wire::Envelope env =
            wire::decode(std::string_view(static_cast<const char*>(m->payload.data()), m->payload.size()));
        if (env.type != wire::MsgType::kObjectFetch) {
          throw wire::WireError(wire::ErrorCode::kBadRequest,
                                std::string("an object server serves ObjectFetch, not ") + wire::to_string(env.type));
        }
        auto f = env.body<wire::ObjectFetch>();
        {
          std::lock_guard l(mu_);
          auto it = entries_.find(f.id);
          if (it != entries_.end()) data = it->second.data;  // the copy stays alive while we read it
        }
        // The chunk's bytes follow the envelope as a second frame, straight
        // from the stored copy (the envelope's own data stays empty).
        wire::ObjectChunk c{static_cast<bool>(data), f.offset, data ? data->size() : 0};
        if (data) {
          if (f.offset > data->size() || f.length > opt_.chunk) {
            throw wire::WireError(wire::ErrorCode::kBadRequest, "chunk out of range or over the chunk size");
          }
          offset = f.offset;
          length = std::min<uint64_t>(f.length, data->size() - f.offset);
        }
        reply = wire::encode(c, env.request_id);
      } catch (const wire::WireError& e) {
        data.reset();
        reply = wire::encode(wire::Error{static_cast<int32_t>(e.code), e.what()});
      } catch (const std::exception& e) {
        data.reset();
        reply = wire::encode(wire::Error{static_cast<int32_t>(wire::ErrorCode::kMalformed), e.what()});
      }
      send_chunk(m->peer, reply, std::move(data), offset, length);
    }
  }
}

void NodeObjectStore::send_chunk(const std::string& peer, const std::string& envelope, ObjectRef data,
                                  uint64_t offset, uint64_t length) {
  try {
    if (!server_.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return;
    if (!data) {
      server_.send(zmq::buffer(envelope), zmq::send_flags::dontwait);
      return;
    }
    server_.send(zmq::buffer(envelope), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    // Zero copy: ZeroMQ reads the stored bytes and drops our reference when sent.
    auto* keep = new ObjectRef(std::move(data));
    zmq::message_t bytes(
        const_cast<char*>((*keep)->data() + offset), length,
        [](void*, void* hint) { delete static_cast<ObjectRef*>(hint); }, keep);
    server_.send(bytes, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    if (e.num() != EHOSTUNREACH) throw;  // the fetching node went away
  }
}

ObjectRef NodeObjectStore::insert(const std::string& id, std::shared_ptr<const std::string> data, uint64_t digest,
                                  bool pinned, std::vector<std::string>& evicted) {
  const uint64_t size = data->size();
  if (bytes_ + size > opt_.capacity) {
    std::vector<std::pair<uint64_t, std::string>> candidates;  // (last use, id)
    for (const auto& [key, e] : entries_) {
      if (!e.pinned && e.data.use_count() == 1) candidates.emplace_back(e.last_use, key);
    }
    std::sort(candidates.begin(), candidates.end());
    for (const auto& [_, key] : candidates) {
      if (bytes_ + size <= opt_.capacity) break;
      bytes_ -= entries_[key].data->size();
      entries_.erase(key);
      evicted.push_back(key);
      stats_.evictions += 1;
    }
    if (bytes_ + size > opt_.capacity) {
      throw RejectedError("object store full: '" + id + "' needs " + std::to_string(size) + " bytes, " +
                          std::to_string(opt_.capacity - bytes_) + " of " + std::to_string(opt_.capacity) +
                          " are free and the rest are pinned or being read (join --object-store-mb)");
    }
  }
  Entry& e = entries_[id];
  e.data = std::move(data);
  e.digest = digest;
  e.pinned = pinned;
  e.last_use = ++tick_;
  bytes_ += size;
  return e.data;
}

void NodeObjectStore::tell_evicted(const std::vector<std::string>& ids) {
  for (const auto& id : ids) head_.send(wire::MsgType::kObjectDrop, pack(wire::ObjectDrop{id, opt_.node_id}));
}

std::string NodeObjectStore::added(const std::string& id, uint64_t size, uint64_t digest) const {
  return pack(wire::ObjectAdd{id, opt_.node_id, address_, size, digest});
}

void NodeObjectStore::put(const std::string& id, std::string bytes) {
  if (id.empty()) throw RejectedError("an object needs an id");
  const uint64_t digest = digest_of(bytes);
  const uint64_t size = bytes.size();
  std::vector<std::string> evicted;
  {
    std::lock_guard l(mu_);
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      if (it->second.digest != digest || it->second.data->size() != size) {
        throw RejectedError("object '" + id + "' already exists with other bytes; objects are immutable");
      }
      it->second.pinned = true;
      return;
    }
    insert(id, std::make_shared<const std::string>(std::move(bytes)), digest, true, evicted);
  }
  tell_evicted(evicted);
  try {
    head_.request(wire::MsgType::kObjectAdd, added(id, size, digest), opt_.request_timeout, "object directory");
  } catch (...) {
    std::lock_guard l(mu_);  // the head refused it (another node holds other bytes): not ours to keep
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      bytes_ -= it->second.data->size();
      entries_.erase(it);
    }
    throw;
  }
}

ObjectRef NodeObjectStore::get(const std::string& id, std::chrono::milliseconds timeout) {
  std::promise<ObjectRef> mine;
  {
    std::unique_lock l(mu_);
    auto it = entries_.find(id);
    if (it != entries_.end()) {  // this node's memory: every slot reads the same bytes
      it->second.last_use = ++tick_;
      stats_.local_hits += 1;
      return it->second.data;
    }
    auto f = inflight_.find(id);
    if (f != inflight_.end()) {  // a sibling slot is copying it: wait for that copy
      std::shared_future<ObjectRef> copying = f->second;
      stats_.local_hits += 1;
      l.unlock();
      return copying.get();
    }
    inflight_.emplace(id, mine.get_future().share());
  }
  try {
    ObjectRef r = fetch(id, timeout);
    mine.set_value(r);
    std::lock_guard l(mu_);
    inflight_.erase(id);
    return r;
  } catch (...) {
    mine.set_exception(std::current_exception());
    std::lock_guard l(mu_);
    inflight_.erase(id);
    throw;
  }
}

ObjectRef NodeObjectStore::fetch(const std::string& id, std::chrono::milliseconds timeout) {
  // Its own channel: a long wait must not hold up this node's other requests.
  client::HeadRequester where(opt_.head, "where-");
  auto env = where.request(wire::MsgType::kObjectWhere, pack(wire::ObjectWhere{id, timeout.count()}),
                           timeout + opt_.request_timeout, "object directory");
  auto loc = env.body<wire::ObjectLocations>();
  if (!loc.found) {
    throw TimeoutError("no copy of object '" + id + "' was put within " + std::to_string(timeout.count()) + " ms");
  }
  std::string failures;
  for (size_t i = 0; i < loc.addresses.size(); ++i) {
    if (loc.node_ids[i] == opt_.node_id) continue;  // evicted here since the head heard of it
    try {
      ObjectRef data = copy_from(loc.addresses[i], id, loc.size, loc.digest);
      std::vector<std::string> evicted;
      ObjectRef kept;
      {
        std::lock_guard l(mu_);
        auto it = entries_.find(id);
        kept = it != entries_.end() ? it->second.data : insert(id, data, loc.digest, false, evicted);
        stats_.fetches += 1;
        stats_.fetched_bytes += data->size();
      }
      tell_evicted(evicted);
      head_.send(wire::MsgType::kObjectAdd, added(id, loc.size, loc.digest));
      return kept;
    } catch (const RejectedError&) {
      throw;  // no room here: another holder would not help
    } catch (const std::exception& e) {
      spdlog::warn("object '{}': copy from {} failed: {}", id, loc.addresses[i], e.what());
      failures += std::string(failures.empty() ? "" : "; ") + loc.addresses[i] + ": " + e.what();
    }
  }
  throw ConnectionError("could not copy object '" + id + "' from any of its " + std::to_string(loc.addresses.size()) +
                        " holder(s): " + failures);
}

ObjectRef NodeObjectStore::copy_from(const std::string& address, const std::string& id, uint64_t size,
                                     uint64_t digest) {
  zmq::socket_t s = transport::make_dealer(transport::endpoint(address),
                                           "fetch-" + common::random_id(), opt_.key, false);
  s.set(zmq::sockopt::linger, 0);
  auto out = std::make_shared<std::string>(size, '\0');
  const uint64_t chunks = size == 0 ? 1 : (size + opt_.chunk - 1) / opt_.chunk;
  uint64_t sent = 0, received = 0;
  auto request = [&] {
    const uint64_t offset = sent * opt_.chunk;
    transport::send(s, wire::encode(wire::ObjectFetch{id, offset, std::min<uint64_t>(opt_.chunk, size - offset)},
                                    sent + 1));
    ++sent;
  };
  while (sent < chunks && sent < static_cast<uint64_t>(kWindow)) request();
  // The digest goes block by block as chunks arrive in order, while the
  // next ones are on the wire; anything else is checked at the end.
  uint64_t acc = size, digested = 0;
  const bool incremental = opt_.chunk == kDigestBlock;
  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
  while (received < chunks) {
    if (zmq::poll(items, 1, opt_.request_timeout) == 0) {
      throw ConnectionError("no chunk within " + std::to_string(opt_.request_timeout.count()) + " ms");
    }
    zmq::message_t m;
    while (s.recv(m, zmq::recv_flags::dontwait)) {
      wire::Envelope env = wire::decode(std::string_view(static_cast<const char*>(m.data()), m.size()));
      zmq::message_t bytes;  // the chunk's bytes: the frame after the envelope
      if (m.more()) (void)s.recv(bytes, zmq::recv_flags::none);
      if (env.type == wire::MsgType::kError) throw ConnectionError(env.body<wire::Error>().message);
      auto c = env.body<wire::ObjectChunk>();
      if (!c.found) throw ConnectionError("the holder no longer has it");
      if (c.total != size || c.offset + bytes.size() > size) throw ConnectionError("a chunk does not fit");
      std::memcpy(out->data() + c.offset, bytes.data(), bytes.size());
      if (incremental && c.offset == digested) {
        acc = digest_step(acc, std::string_view(out->data() + c.offset, bytes.size()));
        digested += bytes.size();
      }
      ++received;
      if (sent < chunks) request();
    }
  }
  if ((digested == size ? acc : digest_of(*out)) != digest) {
    throw ConnectionError("the copy's digest does not match");
  }
  return out;
}

bool NodeObjectStore::contains(const std::string& id) const {
  std::lock_guard l(mu_);
  return entries_.count(id) > 0;
}

void NodeObjectStore::release(const std::string& id) {
  std::lock_guard l(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.pinned = false;
}

ObjectStats NodeObjectStore::stats() const {
  std::lock_guard l(mu_);
  ObjectStats s = stats_;
  s.objects = entries_.size();
  s.bytes = bytes_;
  return s;
}

void NodeObjectStore::announce_all() {
  std::lock_guard l(mu_);
  for (const auto& [id, e] : entries_) head_.send(wire::MsgType::kObjectAdd, added(id, e.data->size(), e.digest));
}

}  // namespace spotlight::objects

// The head's object directory: which nodes hold a copy of each object, and
// the address of their object servers. Bytes never pass through the head.
// Like the KV it lives in memory: nodes announce their copies again when a
// (restarted) head welcomes them.
#include <spdlog/spdlog.h>

#include "head/head.h"

namespace spotlight::head {

namespace {

wire::ObjectLocations locations(uint64_t size, uint64_t digest, const std::map<std::string, std::string>& holders) {
  wire::ObjectLocations l{true, size, digest, {}, {}};
  for (const auto& [node, address] : holders) {
    l.node_ids.push_back(node);
    l.addresses.push_back(address);
  }
  return l;
}
}  // namespace

bool Head::holder_alive(const std::string& holder) const {
  const std::string_view prefix = wire::kDriverHolderPrefix;
  if (holder.rfind(prefix, 0) == 0) {
    // A driver's store: while the driver's connection is taken as alive.
    auto c = state_.clients.find(holder.substr(prefix.size()));
    return c != state_.clients.end() && !c->second.peer.empty() && c->second.node.empty();
  }
  auto n = state_.nodes.find(holder);
  return n != state_.nodes.end() && n->second.alive;
}

void Head::on_object_add(const std::string& peer, const wire::ObjectAdd& a, uint64_t rid) {
  if (!check_keyed_get(peer, rid, "an ObjectAdd", a.id, 0)) return;
  if (a.address.empty()) {
    reply_error(peer, wire::ErrorCode::kBadRequest, "an ObjectAdd needs the address of an object server", rid);
    return;
  }
  if (!holder_alive(a.node_id)) {
    reply_error(peer, wire::ErrorCode::kBadRequest,
                "no live node or connected driver named '" + a.node_id + "'", rid);
    return;
  }
  ObjectEntry& e = objects_[a.id];
  if (!e.holders.empty() && (e.size != a.size || e.digest != a.digest)) {
    count("object_conflicts");
    reply_error(peer, wire::ErrorCode::kBadRequest,
                "object '" + a.id + "' already exists with other bytes (" + std::to_string(e.size) +
                    " bytes); objects are immutable: put a new version under a new id",
                rid);
    return;
  }
  e.size = a.size;
  e.digest = a.digest;
  e.holders[a.node_id] = a.address;
  count("object_adds");
  auto [first, last] = object_waiters_.equal_range(a.id);
  if (first != last) {
    for (auto it = first; it != last; ++it) {
      to_nodes_[it->second.peer].frames.push_back(wire::encode(locations(e.size, e.digest, e.holders), it->second.rid));
    }
    object_waiters_.erase(first, last);
  }
  to_nodes_[peer].frames.push_back(wire::encode_empty(wire::MsgType::kOk, rid));
}

void Head::on_object_drop(const wire::ObjectDrop& d) {
  auto it = objects_.find(d.id);
  if (it == objects_.end()) return;
  it->second.holders.erase(d.node_id);
  count("object_drops");
  if (it->second.holders.empty()) objects_.erase(it);  // its last copy is gone
}

void Head::on_object_where(const std::string& peer, const wire::ObjectWhere& w, uint64_t rid) {
  if (!check_keyed_get(peer, rid, "an ObjectWhere", w.id, w.wait_ms)) return;
  count("object_wheres");
  auto it = objects_.find(w.id);
  std::optional<wire::ObjectLocations> found;
  if (it != objects_.end()) found = locations(it->second.size, it->second.digest, it->second.holders);
  answer_or_wait(object_waiters_, peer, rid, w.id, w.wait_ms, found, wire::ObjectLocations{});
}

void Head::expire_object_waiters() { expire_waiters(object_waiters_, wire::ObjectLocations{}); }

void Head::drop_objects_of(const std::string& node_id) {
  size_t dropped = 0;
  for (auto it = objects_.begin(); it != objects_.end();) {
    dropped += it->second.holders.erase(node_id);
    it = it->second.holders.empty() ? objects_.erase(it) : std::next(it);
  }
  if (dropped > 0) {
    count("object_copies_lost", dropped);
    spdlog::info("{}: its {} object copies are forgotten", node_id, dropped);
  }
}

}  // namespace spotlight::head

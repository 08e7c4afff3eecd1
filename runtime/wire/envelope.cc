#include "wire/envelope.h"

namespace spotlight::wire {

const char* to_string(MsgType t) {
  switch (t) {
    case MsgType::kError: return "Error";
    case MsgType::kHelloNode: return "HelloNode";
    case MsgType::kHelloClient: return "HelloClient";
    case MsgType::kWelcome: return "Welcome";
    case MsgType::kHeartbeat: return "Heartbeat";
    case MsgType::kCreatePool: return "CreatePool";
    case MsgType::kPoolCreated: return "PoolCreated";
    case MsgType::kRemovePool:
      return "RemovePool";
    case MsgType::kCalls: return "Calls";
    case MsgType::kAccepted: return "Accepted";
    case MsgType::kResults: return "Results";
    case MsgType::kAckResults: return "AckResults";
    case MsgType::kFetch:
      return "Fetch";
    case MsgType::kSync:
      return "Sync";
    case MsgType::kCancel:
      return "Cancel";
    case MsgType::kCancelReply:
      return "CancelReply";
    case MsgType::kPlace: return "Place";
    case MsgType::kPlaced: return "Placed";
    case MsgType::kTasks: return "Tasks";
    case MsgType::kDone: return "Done";
    case MsgType::kCommits: return "Commits";
    case MsgType::kDrain: return "Drain";
    case MsgType::kUnplace:
      return "Unplace";
    case MsgType::kStatusRequest: return "StatusRequest";
    case MsgType::kStatus: return "Status";
    case MsgType::kStop: return "Stop";
    case MsgType::kShutdown: return "Shutdown";
    case MsgType::kOk: return "Ok";
    case MsgType::kProbe: return "Probe";
    case MsgType::kTasksRequest:
      return "TasksRequest";
    case MsgType::kTaskList:
      return "TaskList";
    case MsgType::kKvSet: return "KvSet";
    case MsgType::kKvGet: return "KvGet";
    case MsgType::kKvValue: return "KvValue";
    case MsgType::kKvDelete:
      return "KvDelete";
    case MsgType::kObjectAdd: return "ObjectAdd";
    case MsgType::kObjectDrop: return "ObjectDrop";
    case MsgType::kObjectWhere: return "ObjectWhere";
    case MsgType::kObjectLocations: return "ObjectLocations";
    case MsgType::kObjectFetch: return "ObjectFetch";
    case MsgType::kObjectChunk: return "ObjectChunk";
  }
  return "unknown";
}

bool is_known(uint16_t type) {
  return std::string_view(to_string(static_cast<MsgType>(type))) != "unknown";
}

const char* to_string(ErrorCode c) {
  switch (c) {
    case ErrorCode::kMalformed: return "malformed";
    case ErrorCode::kBadVersion: return "bad_version";
    case ErrorCode::kUnknownType: return "unknown_type";
    case ErrorCode::kOversized: return "oversized";
    case ErrorCode::kUnknownPeer: return "unknown_peer";
    case ErrorCode::kBadRequest: return "bad_request";
    case ErrorCode::kRefused:
      return "refused";
  }
  return "unknown";
}

Envelope decode(std::string_view frame) {
  Envelope env;
  // No message of ours nests deeper than a few levels (arguments and results
  // travel as opaque bytes), so deeper frames are refused before msgpack-c
  // builds their objects (see unpack_bounded).
  try {
    env.handle_ = detail::unpack_bounded(frame, kMaxFrameDepth);
  } catch (const msgpack::depth_size_overflow&) {
    throw WireError(ErrorCode::kMalformed,
                    "frame nests deeper than " + std::to_string(kMaxFrameDepth) + " levels");
  } catch (const std::exception& e) {
    throw WireError(ErrorCode::kMalformed, std::string("frame is not msgpack: ") + e.what());
  }
  const msgpack::object& o = env.handle_.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 4) {
    throw WireError(ErrorCode::kMalformed, "frame is not an envelope [version, type, id, body]");
  }
  const msgpack::object* f = o.via.array.ptr;
  if (f[0].type != msgpack::type::POSITIVE_INTEGER || f[1].type != msgpack::type::POSITIVE_INTEGER ||
      f[2].type != msgpack::type::POSITIVE_INTEGER) {
    throw WireError(ErrorCode::kMalformed, "envelope fields have the wrong types");
  }
  uint64_t version = f[0].via.u64;
  if (version != kProtocolVersion) {
    throw WireError(ErrorCode::kBadVersion, "protocol version " + std::to_string(version) +
                                                " is not spoken here (this side speaks " +
                                                std::to_string(kProtocolVersion) + ")");
  }
  uint64_t type = f[1].via.u64;
  if (type > 0xffff || !is_known(static_cast<uint16_t>(type))) {
    throw WireError(ErrorCode::kUnknownType, "unknown message type " + std::to_string(type));
  }
  env.version = static_cast<uint16_t>(version);
  env.type = static_cast<MsgType>(type);
  env.request_id = f[2].via.u64;
  env.body_ = &f[3];
  return env;
}

std::string encode_raw(MsgType type, uint64_t request_id, std::string_view packed_body) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(kProtocolVersion);
  pk.pack(static_cast<uint16_t>(type));
  pk.pack(request_id);
  buf.write(packed_body.data(), packed_body.size());
  return std::string(buf.data(), buf.size());
}

std::string encode_empty(MsgType type, uint64_t request_id) {
  return encode_raw(type, request_id, std::string_view("\x90", 1));  // empty array
}

}  // namespace spotlight::wire

// The envelope around every message: [version, type, request id, body].
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "wire/messages.h"

namespace spotlight::wire {

// The deepest nesting a frame may have (the envelope counts as one level).
inline constexpr size_t kMaxFrameDepth = 32;

// A frame that could not be taken apart; carries the code to answer with.
struct WireError : std::runtime_error {
  WireError(ErrorCode c, const std::string& m) : std::runtime_error(m), code(c) {}
  ErrorCode code;
};

// A decoded envelope; the body stays a msgpack object until body<T>().
class Envelope {
 public:
  uint16_t version = 0;
  MsgType type = MsgType::kError;
  uint64_t request_id = 0;

  template <class T>
  T body() const {
    try {
      return body_->as<T>();
    } catch (const std::exception& e) {
      throw WireError(ErrorCode::kMalformed,
                      std::string("body of ") + to_string(type) + " does not decode: " + e.what());
    }
  }

 private:
  friend Envelope decode(std::string_view frame);
  msgpack::object_handle handle_;
  const msgpack::object* body_ = nullptr;
};

// Throws WireError for a frame that is not msgpack, not an envelope, of another
// protocol version or of an unknown type.
Envelope decode(std::string_view frame);

// Appends the envelope for an already packed body.
std::string encode_raw(MsgType type, uint64_t request_id, std::string_view packed_body);

template <class T>
std::string encode(const T& body, uint64_t request_id = 0) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(kProtocolVersion);
  pk.pack(static_cast<uint16_t>(type_of<T>::value));
  pk.pack(request_id);
  pk.pack(body);
  return std::string(buf.data(), buf.size());
}

// For message types whose body is empty.
std::string encode_empty(MsgType type, uint64_t request_id = 0);

}  // namespace spotlight::wire

// Values crossing the wire: every argument and result is msgpack. User structs
// take part by declaring MSGPACK_DEFINE(fields...) (see examples/hello).
#pragma once

#include <msgpack.hpp>

#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "spotlight/errors.h"

namespace spotlight {

// Opaque bytes, packed as msgpack `bin` (never `str`), so payloads of any
// content pass through the head untouched and undecoded.
struct Blob {
  std::string data;
  bool operator==(const Blob&) const = default;
};

// Packs a value into msgpack bytes.
template <class T>
std::string pack(const T& value) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, value);
  return std::string(buf.data(), buf.size());
}

namespace detail {
// How deep an argument or result may nest: far beyond any real struct.
inline constexpr size_t kMaxValueDepth = 1024;

// msgpack::unpack with the limits the input's size implies. msgpack-c builds
// an object per element before it finds the input truncated, so unbounded,
// 8 MiB of nested one-element arrays cost about 400 MB; here no container may
// claim more elements than there are bytes, and nesting stops at `depth`.
inline msgpack::object_handle unpack_bounded(std::string_view bytes, size_t depth = kMaxValueDepth) {
  const size_t n = bytes.size();
  return msgpack::unpack(bytes.data(), n, nullptr, nullptr, msgpack::unpack_limit(n, n, n, n, n, depth));
}
}  // namespace detail

// Unpacks msgpack bytes into T; a type mismatch, truncated input or a value
// nested deeper than detail::kMaxValueDepth throws CodecError with what was expected.
template <class T>
T unpack(std::string_view bytes) {
  try {
    msgpack::object_handle oh = detail::unpack_bounded(bytes);
    return oh.get().as<T>();
  } catch (const std::exception& e) {
    throw CodecError(std::string("cannot decode value: ") + e.what());
  }
}

}  // namespace spotlight

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <>
  struct convert<spotlight::Blob> {
    const msgpack::object& operator()(const msgpack::object& o, spotlight::Blob& v) const {
      if (o.type == msgpack::type::BIN) {
        v.data.assign(o.via.bin.ptr, o.via.bin.size);
      } else if (o.type == msgpack::type::STR) {
        v.data.assign(o.via.str.ptr, o.via.str.size);
      } else {
        throw msgpack::type_error();
      }
      return o;
    }
  };
  template <>
  struct pack<spotlight::Blob> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& o, const spotlight::Blob& v) const {
      o.pack_bin(static_cast<uint32_t>(v.data.size()));
      o.pack_bin_body(v.data.data(), static_cast<uint32_t>(v.data.size()));
      return o;
    }
  };
  }  // namespace adaptor
}
}  // namespace msgpack

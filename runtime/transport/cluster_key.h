// The cluster key: who may talk to a cluster, and with what encryption.
//
// Every process of a cluster holds the same 32-byte secret, written as 64 hex
// digits. It is a CURVE secret key; its public key is derived from it. Every
// socket of the cluster runs ZeroMQ's CURVE mechanism with that one key pair:
// servers (the head's ROUTER, the nodes' object servers) take it as their
// server key, clients as both their own key and the server's. So:
//   - traffic is encrypted (CurveZMQ: Curve25519, XSalsa20-Poly1305) and a
//     peer that lacks the secret can neither read it nor pass the handshake
//     (it cannot open the client's hello, and cannot vouch for the key pair);
//   - a server accepts only peers that prove they hold the same key pair: a
//     ZAP handler (zap.cc) compares the client's public key with its own.
// Members of one cluster trust one another, as Ray's token does; the key is
// what keeps everyone else out. `spotlight head` makes one on first start and
// keeps it beside its store; `spotlight join` and drivers get it from
// --key or $SPOTLIGHT_CLUSTER_KEY. A key of "none" (a head with --insecure)
// turns CURVE off.
#pragma once

#include <string>

namespace spotlight::transport {

class ClusterKey {
 public:
  // No key: plain TCP (a head started with --insecure).
  ClusterKey() = default;
  // A fresh random key.
  static ClusterKey generate();
  // 64 hex digits, or "none"/"" for no key; throws std::invalid_argument otherwise.
  static ClusterKey parse(const std::string& text);

  bool secure() const { return !secret_.empty(); }
  std::string hex() const;  // "none" when not secure
  // Binary (32 bytes each); empty when not secure.
  const std::string& secret() const { return secret_; }
  const std::string& public_key() const { return public_; }
  bool operator==(const ClusterKey& o) const { return secret_ == o.secret_; }

 private:
  std::string secret_, public_;
};

// The environment variable every process reads its key from.
inline constexpr const char* kKeyVariable = "SPOTLIGHT_CLUSTER_KEY";

// The process's key: set_process_key()'s, else $SPOTLIGHT_CLUSTER_KEY's
// (read at first use; a value that does not parse throws std::invalid_argument,
// and so on every later use), else none. Nodes, one-shot requests and the
// head's KV use it; a driver's connection may name its own (ConnectOptions).
ClusterKey process_key();
void set_process_key(const ClusterKey& key);
// The process's key, or, when it has none, a new one that becomes it (what a
// local cluster starts with, so that this process's connections need no key).
ClusterKey process_key_or_new();

// "" -> process_key(); anything else -> ClusterKey::parse.
ClusterKey resolve_key(const std::string& option);

std::string to_hex(const std::string& bytes);

// Writes `key` to `path` (replacing it whole), readable by its owner only;
// throws std::runtime_error when it cannot.
void write_key_file(const std::string& path, const ClusterKey& key);

// A head's key: `given` ("none": no key), else the one kept in `file`, else a
// new one written there. A key given is kept there too. A file that exists
// but cannot be read or does not hold a key throws (std::invalid_argument):
// making a new key in its place would lock out every node and driver.
ClusterKey kept_key(const std::string& given, const std::string& file);

}  // namespace spotlight::transport

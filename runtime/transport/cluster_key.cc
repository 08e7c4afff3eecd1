#include "transport/cluster_key.h"

#include <fcntl.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace spotlight::transport {

namespace {
constexpr size_t kKeyBytes = 32;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The CURVE public key of a binary secret (libzmq derives it in Z85 only).
std::string public_of(const std::string& secret) {
  char z85_secret[41], z85_public[41];
  zmq_z85_encode(z85_secret, reinterpret_cast<const uint8_t*>(secret.data()), kKeyBytes);
  if (zmq_curve_public(z85_public, z85_secret) != 0) {
    throw std::runtime_error("this libzmq has no CURVE support (built without libsodium)");
  }
  std::string pub(kKeyBytes, '\0');
  zmq_z85_decode(reinterpret_cast<uint8_t*>(pub.data()), z85_public);
  return pub;
}

std::mutex g_mu;
std::optional<ClusterKey> g_key;
}  // namespace

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

ClusterKey ClusterKey::generate() {
  char z85_public[41], z85_secret[41];
  if (zmq_curve_keypair(z85_public, z85_secret) != 0) {
    throw std::runtime_error("this libzmq has no CURVE support (built without libsodium)");
  }
  ClusterKey k;
  k.secret_.assign(kKeyBytes, '\0');
  zmq_z85_decode(reinterpret_cast<uint8_t*>(k.secret_.data()), z85_secret);
  k.public_ = public_of(k.secret_);
  return k;
}

ClusterKey ClusterKey::parse(const std::string& text) {
  if (text.empty() || text == "none") return ClusterKey();
  if (text.size() != 2 * kKeyBytes) {
    throw std::invalid_argument("a cluster key is 64 hex digits (or \"none\"); got " +
                                std::to_string(text.size()) + " characters");
  }
  ClusterKey k;
  k.secret_.resize(kKeyBytes);
  for (size_t i = 0; i < kKeyBytes; ++i) {
    int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      throw std::invalid_argument("a cluster key is 64 hex digits (or \"none\"); character " +
                                  std::to_string(hi < 0 ? 2 * i + 1 : 2 * i + 2) + " is not one");
    }
    k.secret_[i] = static_cast<char>(hi << 4 | lo);
  }
  k.public_ = public_of(k.secret_);
  return k;
}

std::string ClusterKey::hex() const {
  return secure() ? to_hex(secret_) : "none";
}

void write_key_file(const std::string& path, const ClusterKey& key) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error("cannot write the key file " + tmp + ": " + std::strerror(errno));
  std::string line = key.hex() + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
            ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write the key file " + path + ": " + std::strerror(errno));
  }
}

ClusterKey kept_key(const std::string& given, const std::string& file) {
  if (given == "none") return ClusterKey();
  auto read_kept = [&]() -> std::optional<ClusterKey> {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec) && !ec) return std::nullopt;
    std::ifstream in(file);
    std::string kept;
    try {
      if (!in) throw std::invalid_argument(std::string("cannot read it: ") + std::strerror(errno));
      in >> kept;
      if (kept.empty() || kept == "none") throw std::invalid_argument("it holds no key");
      return ClusterKey::parse(kept);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("the key file " + file + " is damaged (" + e.what() +
                                  "): restore it, or remove it to make a new key");
    }
  };
  if (!given.empty()) {
    ClusterKey k = ClusterKey::parse(given);
    std::ifstream in(file);
    std::string kept;
    if (!(in >> kept) || kept != k.hex()) write_key_file(file, k);
    return k;
  }
  if (auto k = read_kept()) return *k;
  ClusterKey k = ClusterKey::generate();
  write_key_file(file, k);
  return k;
}

ClusterKey process_key() {
  std::lock_guard<std::mutex> l(g_mu);
  if (g_key) return *g_key;
  const char* env = std::getenv(kKeyVariable);
  ClusterKey k;
  if (env) {
    try {
      k = ClusterKey::parse(env);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("$") + kKeyVariable + ": " + e.what());
    }
  }
  g_key = k;
  return k;
}

void set_process_key(const ClusterKey& key) {
  std::lock_guard<std::mutex> l(g_mu);
  g_key = key;
}

ClusterKey process_key_or_new() {
  process_key();  // reads the environment once, if nobody set a key
  std::lock_guard<std::mutex> l(g_mu);
  if (!g_key->secure()) g_key = ClusterKey::generate();
  return *g_key;
}

ClusterKey resolve_key(const std::string& option) {
  return option.empty() ? process_key() : ClusterKey::parse(option);
}

}  // namespace spotlight::transport

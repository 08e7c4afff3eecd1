// What every backend shares: the two KvStores for tests and thread groups
// (one in memory, one in a directory: a file per key, published by rename so
// a reader never sees half a value), and size_of.
#include <unistd.h>

#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "spotlight/collective.h"

namespace spotlight::collective {
namespace {

class MemoryKv : public KvStore {
 public:
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard lock(mu_);
      map_[key] = value;
    }
    cv_.notify_all();
  }
  std::optional<std::string> wait(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return map_.count(key) > 0; })) return std::nullopt;
    return map_.at(key);
  }
  bool erase(const std::string& key) override {
    std::lock_guard lock(mu_);
    return map_.erase(key) > 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

class FileKv : public KvStore {
 public:
  explicit FileKv(std::filesystem::path dir) : dir_(std::move(dir)) { std::filesystem::create_directories(dir_); }
  void set(const std::string& key, const std::string& value) override {
    const auto final_path = path_of(key);
    const auto tmp = final_path.string() + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), std::streamsize(value.size()));
      if (!out) throw CollectiveError("file kv: cannot write " + tmp);
    }
    std::filesystem::rename(tmp, final_path);
  }
  std::optional<std::string> wait(const std::string& key, std::chrono::milliseconds timeout) override {
    // A test fake: polls the file system every millisecond until the deadline.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const auto p = path_of(key);
    for (;;) {
      std::ifstream in(p, std::ios::binary);
      if (in) {
        std::ostringstream ss;
        ss << in.rdbuf();
        return ss.str();
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  bool erase(const std::string& key) override { return std::filesystem::remove(path_of(key)); }

 private:
  std::filesystem::path path_of(const std::string& key) const {
    // Other characters as %XX, so that distinct keys stay distinct files.
    static const char* hex = "0123456789abcdef";
    std::string name;
    for (unsigned char c : key) {
      if (std::isalnum(c) || c == '-' || c == '_') {
        name += char(c);
      } else {
        name += '%';
        name += hex[c >> 4];
        name += hex[c & 15];
      }
    }
    return dir_ / name;
  }
  std::filesystem::path dir_;
};

}  // namespace

size_t size_of(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt64: return 8;
  }
  return 0;
}

std::shared_ptr<KvStore> make_memory_kv() { return std::make_shared<MemoryKv>(); }
std::shared_ptr<KvStore> make_file_kv(const std::string& directory) { return std::make_shared<FileKv>(directory); }

}  // namespace spotlight::collective

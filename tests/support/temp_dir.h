// A fresh directory under /tmp for one test, removed with everything in it
// when the test's scope ends (files other processes write: gates, ids).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace spotlight::testing {

// Lines in a file (0 if it does not exist): what other processes appended.
inline size_t lines_in(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    std::string tmpl = "/tmp/spotlight-" + name + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace spotlight::testing

// A fresh directory under /tmp for one test, removed with everything in it
// when the test's scope ends (files other processes write: gates, ids).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace spotlight::testing {

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

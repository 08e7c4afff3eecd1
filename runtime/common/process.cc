#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace spotlight::common {

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!log_path.empty()) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

bool signal_process(pid_t pid, int sig) { return pid > 0 && kill(pid, sig) == 0; }

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto step = std::chrono::milliseconds(1);
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return 0;  // not our child or already reaped
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(step);  // polling a child's exit; no event to wait on
    step = std::min(step * 2, std::chrono::milliseconds(20));
  }
}

std::string self_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

std::string find_spotlight_bin() {
  if (const char* env = std::getenv("SPOTLIGHT_BIN")) return env;
  namespace fs = std::filesystem;
  fs::path dir = self_dir();
  for (fs::path p : {dir / "spotlight", dir / ".." / "bin" / "spotlight"}) {
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  }
  throw std::runtime_error("cannot find the spotlight binary beside " + dir.string() +
                           "; set SPOTLIGHT_BIN");
}

std::string wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto step = std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream f(path);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      std::string s = ss.str();
      if (!s.empty() && s.back() == '\n') return s.substr(0, s.size() - 1);
    }
    std::this_thread::sleep_for(step);  // waiting on another process's file; no shared event
    step = std::min(step * 2, std::chrono::milliseconds(20));
  }
  return "";
}

}  // namespace spotlight::common

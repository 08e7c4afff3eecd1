#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace spotlight::common {

namespace {

// One pipe per process, made on the first spawn. Nobody ever writes to it: its
// only message is the end of file a reader sees once every write end is
// closed, which happens when this process exits, however it exits. Both ends
// are close-on-exec, so a child keeps only the read end spawn() hands it.
struct Lifeline {
  int read_fd = -1;
  int write_fd = -1;
};

const Lifeline& lifeline() {
  static const Lifeline line = [] {
    Lifeline l;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) {
      l.read_fd = fds[0];
      l.write_fd = fds[1];
    }
    return l;
  }();
  return line;
}

// The child's environment: ours, with the lifeline's descriptor named and `extra` set.
std::vector<std::string> child_environment(int lifeline_fd, std::vector<std::string> extra) {
  if (lifeline_fd >= 0)
    extra.push_back(std::string(kLifelineEnv) + "=" + std::to_string(lifeline_fd));
  auto replaced = [&](const char* e) {
    return std::any_of(extra.begin(), extra.end(), [&](const std::string& x) {
      size_t name = x.find('=');
      return name != std::string::npos && std::strncmp(e, x.c_str(), name + 1) == 0;
    });
  };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    if (!replaced(*e)) env.emplace_back(*e);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path,
            const std::vector<std::string>& extra_env) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls are allowed in a threaded process.
  const int line = lifeline().read_fd;
  const auto env = child_environment(line, extra_env);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (line >= 0) fcntl(line, F_SETFD, 0);  // this child keeps the read end across exec
    if (!log_path.empty()) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  return pid;
}

bool watch_lifeline(std::function<void()> on_lost) {
  const char* value = std::getenv(kLifelineEnv);
  if (!value) return false;
  int fd = -1;
  const char* end = value + std::strlen(value);
  auto [rest, ec] = std::from_chars(value, end, fd);
  unsetenv(kLifelineEnv);  // our own children get their own lifeline from spawn()
  if (ec != std::errc() || rest != end || fd < 0 || fcntl(fd, F_GETFD) < 0) return false;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  std::thread([fd, on_lost = std::move(on_lost)] {
    char byte;
    while (true) {
      const ssize_t n = read(fd, &byte, 1);
      if (n == 0) break;                    // end of file: the starter has exited
      if (n < 0 && errno != EINTR) return;  // cannot watch; leave the process be
    }
    close(fd);
    on_lost();
  }).detach();
  return true;
}

bool signal_process(pid_t pid, int sig) {
  return pid > 0 && kill(pid, sig) == 0;
}

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

void stop_with_starter(std::chrono::milliseconds grace) {
  watch_lifeline([grace] {
    spdlog::warn("the process that started this one has exited: stopping");
    kill(getpid(), SIGINT);
    std::this_thread::sleep_for(grace);  // a deadline for the clean stop, not a wait for an event
    spdlog::error("no clean stop within {} ms of losing the starter: exiting", grace.count());
    _exit(3);
  });
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

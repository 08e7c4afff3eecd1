#include "tools/train/population.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace spotlight::tools {

namespace fs = std::filesystem;

namespace {

// Readers see the old contents or the new, never a part.
void write_atomically(const std::string& path, const std::string& text) {
  const auto tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.flush()) throw std::runtime_error("population: cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

Population::Population(std::string dir, int size) : dir_(std::move(dir)), size_(size) {
  if (size < 1) throw std::invalid_argument("population: size must be at least 1");
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  parent_ = ::getpid();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);  // nothing buffered is written twice after the fork
  for (int k = 1; k < size_; ++k) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("population: fork failed");
    if (pid == 0) {
      member_ = k;
      pids_.clear();
      break;
    }
    pids_.push_back(pid);
  }
  write_atomically(file(member_, "pid"), std::to_string(::getpid()));
}

Population::~Population() {
  if (member_ != 0 || gathered_) return;
  for (pid_t pid : pids_) ::kill(pid, SIGTERM);
  for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
}

std::string Population::file(int k, const std::string& what) const {
  return dir_ + "/member" + std::to_string(k) + "." + what;
}

std::string Population::state_path(int k, int iter) const {
  return file(k, std::to_string(iter) + ".state");
}

std::string Population::report_path(int k, int iter) const {
  return file(k, std::to_string(iter) + ".report");
}

bool Population::alive(int k) const {
  if (fs::exists(file(k, "done"))) return false;
  const auto pid = read_file(file(k, "pid"));
  if (!pid) return true;  // not started yet
  // A process that exited without its marker (killed) is gone or a zombie.
  const auto stat = read_file("/proc/" + *pid + "/stat");
  if (!stat) return false;
  const auto close = stat->rfind(')');
  return close == std::string::npos || close + 2 >= stat->size() ||
         ((*stat)[close + 2] != 'Z' && (*stat)[close + 2] != 'X');
}

Population::Best Population::meet(int iter, double reward) {
  // One report per meeting, never rewritten: a member that has moved on to
  // the next meeting cannot hide this one's from a slower reader.
  std::ostringstream report;
  report.precision(17);
  report << reward << "\n";
  write_atomically(report_path(member_, iter), report.str());
  published_.push_back(iter);
  Best best{member_, reward};
  for (int k = 0; k < size_; ++k) {
    if (k == member_) continue;
    for (;;) {
      if (const auto text = read_file(report_path(k, iter))) {
        std::istringstream in(*text);
        double their_reward = 0;
        if (!(in >> their_reward))
          throw std::runtime_error("population: unreadable " + report_path(k, iter));
        if (their_reward > best.reward) best = {k, their_reward};  // ties keep their own
        break;
      }
      if (!alive(k)) break;
      // Members meet at the same iteration; the wait is the other's remaining
      // part of the same work, so a short poll costs nothing measurable.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Every live member has now reported `iter`, so it has read whatever it
  // took from this member's earlier meetings.
  for (auto it = published_.begin(); it != published_.end();) {
    if (*it < iter) {
      fs::remove(state_path(member_, *it));
      fs::remove(report_path(member_, *it));
      it = published_.erase(it);
    } else {
      ++it;
    }
  }
  return best;
}

void Population::finish(double best_reward, const std::string& kept_path) {
  std::ostringstream best;
  best.precision(17);
  best << best_reward << "\n" << kept_path << "\n";
  write_atomically(file(member_, "best"), best.str());
  write_atomically(file(member_, "done"), "");
}

std::optional<Population::Outcome> Population::gather() {
  if (member_ != 0) return std::nullopt;
  gathered_ = true;
  bool failed = false;
  for (pid_t pid : pids_) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed = failed || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed) return std::nullopt;
  std::optional<Outcome> out;
  for (int k = 0; k < size_; ++k) {
    const auto text = read_file(file(k, "best"));
    if (!text) return std::nullopt;
    std::istringstream in(*text);
    Outcome o{k, 0, {}};
    in >> o.reward;
    in.ignore(1);  // the reward's line ends; the path may hold spaces
    std::getline(in, o.kept_path);
    if (!out || o.reward > out->reward) out = o;
  }
  return out;
}

}  // namespace spotlight::tools

// Child processes for local clusters and tests: spawn, signal, wait.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace spotlight::common {

// Starts `argv` with stdout and stderr appended to `log_path` (or inherited when empty).
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path);
// Sends `sig`; true if the process existed.
bool signal_process(pid_t pid, int sig);
// Waits up to `timeout` for the child to exit; returns its exit status, or -1 if still running.
int wait_exit(pid_t pid, std::chrono::milliseconds timeout);
// Directory of the running executable.
std::string self_dir();
// The `spotlight` binary: $SPOTLIGHT_BIN, else beside this executable, else ../bin of its lib.
std::string find_spotlight_bin();
// Waits for a file to exist and be non-empty; returns its content or "" after the timeout.
std::string wait_for_file(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace spotlight::common

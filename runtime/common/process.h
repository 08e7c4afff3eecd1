// Child processes for local clusters and tests: spawn, signal, wait.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace spotlight::common {

// Starts `argv` with stdout and stderr appended to `log_path` (or inherited when empty).
// The child inherits this process's lifeline (see watch_lifeline): the read end
// of a pipe whose write end only this process holds. `env` ("NAME=value")
// adds to or replaces variables of this process's environment, for the child
// only (a secret there stays out of `ps`).
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path,
            const std::vector<std::string>& env = {});
// In a process that spawn() started: watches the lifeline from a background
// thread and calls `on_lost` once the process that started this one has exited
// (killed, crashed or finished without stopping it). Without this a driver
// killed by SIGKILL, a crash or a test timeout leaves its local cluster's head
// and nodes running forever, holding ports and stores. Returns false (and
// does nothing) when this process was not started by spawn().
bool watch_lifeline(std::function<void()> on_lost);
// What `spotlight head` and `spotlight join` do with their lifeline: once it
// is lost, log it and raise SIGINT (their clean stop); if the process still
// runs `grace` later, it exits with status 3. Call it early, while the process
// has one thread (it edits the environment); a lifeline lost before the
// SIGINT handler is installed ends the process at once, which is all there is
// to do before it serves anything.
void stop_with_starter(std::chrono::milliseconds grace = std::chrono::seconds(30));
// The environment variable that names the lifeline's descriptor.
inline constexpr const char* kLifelineEnv = "SPOTLIGHT_LIFELINE_FD";
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

// A local cluster ends with the process that started it: a driver killed by
// SIGKILL (or a crash, or a test runner's timeout) leaves no head or node
// running. The test starts this same executable as that driver
// (`lifeline_test --own-cluster FILE`), kills it, and watches its head and
// node exit on their own.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "common/process.h"
#include "support/cluster.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// True once `pid` has exited (or is gone), waiting on a pidfd up to `timeout`:
// the head and node are not our children, so waitpid cannot see them.
bool exits_within(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone (and reaped)
  pollfd p{fd, POLLIN, 0};
  const int r = poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return r == 1;
}

TEST(Lifeline, AWatcherHearsItsStarterExit) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(setenv(common::kLifelineEnv, std::to_string(fds[0]).c_str(), 1), 0);
  auto lost =
      std::make_shared<std::promise<void>>();  // shared: the watcher may outlive this test's frame
  auto heard = lost->get_future();
  ASSERT_TRUE(common::watch_lifeline([lost] { lost->set_value(); }));
  EXPECT_EQ(std::getenv(common::kLifelineEnv), nullptr) << "grandchildren must not inherit it";
  close(fds[1]);  // what the starter's exit does
  EXPECT_EQ(heard.wait_for(10s), std::future_status::ready);
}

TEST(Lifeline, NoOrABadDescriptorIsNotWatched) {
  unsetenv(common::kLifelineEnv);
  EXPECT_FALSE(common::watch_lifeline([] {}));
  for (const char* bad : {"", "x", "-1", "3x", "999999"}) {
    ASSERT_EQ(setenv(common::kLifelineEnv, bad, 1), 0);
    EXPECT_FALSE(common::watch_lifeline([] { ADD_FAILURE() << "watched a bad descriptor"; }))
        << "'" << bad << "'";
  }
}

TEST(Lifeline, KillingTheDriverStopsItsClusterCleanly) {
  char tmpl[] = "/tmp/spotlight-lifeline-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t driver = common::spawn({self, "--own-cluster", dir + "/pids"}, dir + "/driver.log");
  const std::string line = common::wait_for_file(dir + "/pids", 60s);
  ASSERT_FALSE(line.empty()) << read_file(dir + "/driver.log");
  std::istringstream in(line);
  pid_t head = -1, node = -1;
  std::string logs;
  in >> head >> node >> logs;
  ASSERT_GT(head, 0);
  ASSERT_GT(node, 0);

  ASSERT_TRUE(common::signal_process(driver, SIGKILL));
  EXPECT_NE(common::wait_exit(driver, 10s), -1);
  // Generous deadlines: the clean stop takes milliseconds; a loaded CI machine may be slow.
  for (auto [pid, what] : {std::pair{head, "head"}, std::pair{node, "node"}}) {
    const bool exited = exits_within(pid, 30s);
    EXPECT_TRUE(exited) << "the " << what << " outlived its driver";
    if (!exited) kill(pid, SIGKILL);  // a failing run leaves no process behind
  }
  // They stopped because they heard the driver go, through their own clean stop.
  const std::string head_log = read_file(logs + "/head.log"),
                    node_log = read_file(logs + "/node-0.log");
  EXPECT_NE(head_log.find("the process that started this one has exited"), std::string::npos)
      << head_log;
  EXPECT_NE(node_log.find("the process that started this one has exited"), std::string::npos)
      << node_log;
  EXPECT_EQ(head_log.find("no clean stop"), std::string::npos) << head_log;
  EXPECT_EQ(node_log.find("no clean stop"), std::string::npos) << node_log;
  // Nothing else cleans up after a killed driver: its logs stay for a post-mortem.
  std::error_code ec;
  std::filesystem::remove_all(logs, ec);
  std::filesystem::remove_all(dir, ec);
}

// The driver of the last test: starts a cluster, says where it is, and waits to be killed.
int own_cluster(const std::string& pids_file) {
  LocalCluster cluster(testing::cluster_options(1, 1));  // quiet: logs go to files the test reads
  {
    std::ofstream out(pids_file + ".tmp");
    out << cluster.head_pid() << " " << cluster.node_pid(0) << " " << cluster.log_dir() << "\n";
  }
  std::filesystem::rename(pids_file + ".tmp", pids_file);
  while (true) pause();
}

}  // namespace
}  // namespace spotlight

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--own-cluster") return spotlight::own_cluster(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

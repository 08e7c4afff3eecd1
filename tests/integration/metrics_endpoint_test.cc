// The head's HTTP endpoint (`spotlight head --metrics-port`): GET /metrics,
// the status page (GET /) and /status.json show what the head holds now,
// GET /healthz answers while its loop turns, and requests that are not a
// scrape get a clear status without stopping it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/cluster.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing_actors::Worker;

// A TCP connection to HOST:PORT on loopback.
class Conn {
 public:
  explicit Conn(const std::string& address) {
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{30, 0};  // a test that would hang fails instead
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Conn() { ::close(fd_); }
  bool connected() const { return connected_; }
  // Sends `request` and reads until the server closes the connection.
  std::string exchange(const std::string& request) {
    for (size_t sent = 0; sent < request.size();) {
      const ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;)
      out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string get(const std::string& address, const std::string& line) {
  Conn c(address);
  EXPECT_TRUE(c.connected());
  return c.exchange(line + "\r\nHost: test\r\nConnection: close\r\n\r\n");
}

// The pool's "waited" count in a /status.json reply, with its quantiles there.
int64_t j_after_pool_waited_count(const std::string& reply) {
  auto j = nlohmann::json::parse(reply.substr(reply.find("\r\n\r\n") + 4));
  const auto& w = j["pools"][0]["waited"];
  EXPECT_LE(w["p50_s"].get<double>(), w["p99_s"].get<double>());
  EXPECT_EQ(w["buckets"].size(), kLatencyBoundsS.size() + 1);
  return w["count"].get<int64_t>();
}

TEST(MetricsEndpoint, ShowsTheClusterAndRefusesWhatIsNotAScrape) {
  auto opts = cluster_options(0);  // no node: the calls wait in their mailbox
  opts.head_args = {"--metrics-port", "0"};
  LocalCluster cluster(opts);
  auto rt = cluster.connect();
  auto w = rt.spawn<Worker>("metrics-waiting");
  std::vector<Future<int64_t>> calls;
  for (int i = 0; i < 5; ++i) calls.push_back(w.call(&Worker::twice, int64_t{i}));
  rt.wait_accepted();
  const auto accepted_by = std::chrono::steady_clock::now();
  const std::string at = rt.status().metrics_address;
  ASSERT_FALSE(at.empty()) << "status names the endpoint";
  EXPECT_EQ(at.rfind("127.0.0.1:", 0), 0u) << "only this machine by default: " << at;

  // A connection that says nothing does not hold up the others.
  Conn idle(at);
  ASSERT_TRUE(idle.connected());

  const std::string m = get(at, "GET /metrics HTTP/1.1");
  EXPECT_EQ(m.rfind("HTTP/1.1 200", 0), 0u) << m;
  EXPECT_NE(m.find("text/plain; version=0.0.4"), std::string::npos) << m;
  EXPECT_NE(m.find("spotlight_pool_queued{pool=\"metrics-waiting\"} 5\n"), std::string::npos) << m;
  EXPECT_NE(m.find("spotlight_nodes{state=\"alive\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("spotlight_calls_total 5\n"), std::string::npos) << m;

  // The page for people, and the same status for programs.
  const std::string page = get(at, "GET / HTTP/1.1");
  EXPECT_EQ(page.rfind("HTTP/1.1 200", 0), 0u) << page.substr(0, 300);
  EXPECT_NE(page.find("text/html; charset=utf-8"), std::string::npos);
  EXPECT_NE(page.find("<td>metrics-waiting</td>"), std::string::npos) << page;
  EXPECT_NE(page.find("<b>5</b>calls waiting"), std::string::npos) << page;
  const std::string js = get(at, "GET /status.json HTTP/1.1");
  EXPECT_NE(js.find("application/json"), std::string::npos) << js.substr(0, 300);
  auto j = nlohmann::json::parse(js.substr(js.find("\r\n\r\n") + 4));
  ASSERT_EQ(j["pools"].size(), 1u) << js;
  EXPECT_EQ(j["pools"][0]["name"], "metrics-waiting");
  EXPECT_EQ(j["pools"][0]["queued"], 5);
  EXPECT_EQ(j["metrics_address"], at);

  EXPECT_EQ(get(at, "GET /healthz HTTP/1.1").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(get(at, "HEAD /metrics HTTP/1.1").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(get(at, "GET /nope HTTP/1.1").rfind("HTTP/1.1 404", 0), 0u);
  const std::string post = get(at, "POST /metrics HTTP/1.1");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  EXPECT_NE(post.find("Allow: GET, HEAD"), std::string::npos) << post;
  {
    Conn c(at);
    const std::string garbage = c.exchange(std::string("\x01\x02 not http\r\n\r\n"));
    EXPECT_EQ(garbage.rfind("HTTP/1.1 400", 0), 0u) << garbage;
  }
  const std::string huge =
      get(at, "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(16 * 1024, 'x'));
  EXPECT_EQ(huge.rfind("HTTP/1.1 400", 0), 0u) << huge.substr(0, 200);

  // Still serving, and what it shows follows the head: a node runs the calls.
  // They waited at least from their acceptance to the node's start.
  const auto waited_at_least = std::chrono::steady_clock::now() - accepted_by;
  cluster.add_node(1, "reserved");
  for (auto& f : calls) f.get(std::chrono::seconds(60));
  const std::string after = get(at, "GET /metrics HTTP/1.1");
  EXPECT_NE(after.find("spotlight_pool_queued{pool=\"metrics-waiting\"} 0\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("spotlight_nodes{state=\"alive\"} 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("spotlight_results_ok_total 5\n"), std::string::npos) << after;
  const std::string p = R"(pool="metrics-waiting")";
  EXPECT_NE(after.find("spotlight_pool_call_wait_seconds_count{" + p + "} 5\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("spotlight_pool_call_run_seconds_count{" + p + "} 5\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("spotlight_pool_call_seconds_count{" + p + "} 5\n"), std::string::npos)
      << after;
  // No call is counted in a bucket below what it must have waited.
  const PoolStatus pool = rt.status().pools.at(0);
  const double floor_s = std::chrono::duration<double>(waited_at_least).count();
  for (const Latency* l : {&pool.waited, &pool.answered}) {
    ASSERT_EQ(l->count, 5u);
    ASSERT_EQ(l->buckets.size(), kLatencyBoundsS.size() + 1);
    for (size_t i = 0; i < kLatencyBoundsS.size() && kLatencyBoundsS[i] < floor_s; ++i)
      EXPECT_EQ(l->buckets[i], 0u)
          << "a call counted at most " << kLatencyBoundsS[i] << " s, waited " << floor_s;
    // The median reads at least the lower bound of the floor's bucket.
    double lower = 0;
    for (double b : kLatencyBoundsS) {
      if (b < floor_s) lower = b;
    }
    EXPECT_GE(l->quantile(0.5), lower);
  }
  EXPECT_EQ(j_after_pool_waited_count(get(at, "GET /status.json HTTP/1.1")), 5);
  const std::string page_after = get(at, "GET /index.html HTTP/1.1");
  EXPECT_NE(page_after.find("<b>1</b>nodes alive"), std::string::npos) << page_after;
}

TEST(MetricsEndpoint, OffByDefault) {
  LocalCluster cluster(cluster_options(0));
  EXPECT_TRUE(cluster.connect().status().metrics_address.empty());
}

}  // namespace
}  // namespace spotlight

// A spot interruption notice polled from a metadata endpoint (a local HTTP
// stub in the AWS style) drains the node: its tasks move before it leaves.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "node/notice_poller.h"
#include "support/cluster.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using testing::cluster_options;
using testing::wait_for_status;
using testing_actors::StepReport;
using testing_actors::Stepper;

TEST(Notice, ReadsAwsAndGcpAnswers) {
  auto now = std::chrono::system_clock::from_time_t(1764466800);  // 2025-11-30T01:40:00Z
  EXPECT_FALSE(node::read_notice(404, "Not Found", now));
  EXPECT_FALSE(node::read_notice(200, "FALSE", now));
  EXPECT_FALSE(node::read_notice(200, " \n", now));
  EXPECT_EQ(node::read_notice(200, "TRUE", now), 0);
  EXPECT_EQ(node::read_notice(200, R"({"action": "terminate", "time": "2025-11-30T01:42:00Z"})", now),
            120000);
  EXPECT_EQ(node::read_notice(200, R"({"action": "stop", "time": "2025-11-30T01:00:00Z"})", now), 0);
  auto u = node::parse_notice_url("http://169.254.169.254/latest/meta-data/spot/instance-action");
  EXPECT_EQ(u.host, "169.254.169.254");
  EXPECT_EQ(u.port, "80");
  EXPECT_EQ(u.target, "/latest/meta-data/spot/instance-action");
  EXPECT_EQ(node::parse_notice_url("http://127.0.0.1:8080").target, "/");
  EXPECT_THROW(node::parse_notice_url("https://x/y"), std::invalid_argument);
  EXPECT_THROW(node::parse_notice_url("ftp"), std::invalid_argument);
}

// 404 until `notice` is set, then the AWS answer.
class MetadataStub {
 public:
  MetadataStub() : acceptor_(ioc_, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~MetadataStub() {
    stop_ = true;
    boost::system::error_code ec;
    tcp::socket s(ioc_);
    s.connect(acceptor_.local_endpoint(), ec);  // wakes the blocking accept
    thread_.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/latest/meta-data/spot/instance-action";
  }
  std::atomic<bool> notice{false};
  std::atomic<int> polls{0};

 private:
  void serve() {
    while (!stop_) {
      tcp::socket s(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (ec || stop_) continue;
      boost::beast::flat_buffer buf;
      http::request<http::string_body> req;
      http::read(s, buf, req, ec);
      if (ec) continue;
      ++polls;
      http::response<http::string_body> res{notice ? http::status::ok : http::status::not_found, 11};
      res.body() = notice ? R"({"action": "terminate", "time": "2099-01-01T00:00:00Z"})" : "Not Found";
      res.prepare_payload();
      http::write(s, res, ec);
    }
  }
  boost::asio::io_context ioc_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(Notice, MetadataNoticeDrainsTheNode) {
  MetadataStub stub;
  LocalCluster cluster(cluster_options(1, 2));
  int spot = cluster.start_node(2, "spot", {"--notice-url", stub.url(), "--notice-poll-ms", "20"});
  auto rt = cluster.connect();
  auto pool = rt.pool<Stepper>("noticed", on_market("any").members(4).ahead(1));
  std::vector<Future<StepReport>> fs;
  for (int i = 0; i < 4; ++i) fs.push_back(pool.call(&Stepper::run, i, 20, 25));
  int64_t pid = cluster.node_pid(spot);
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    for (const auto& n : s.nodes) {
      if (n.pid == pid) return n.running > 0 && stub.polls > 0;
    }
    return false;
  }));
  stub.notice = true;
  ASSERT_TRUE(wait_for_status(cluster.address(), [&](const ClusterStatus& s) {
    for (const auto& n : s.nodes) {
      if (n.pid == pid) return n.state == "dead" && n.notice_ms_ago >= 0;
    }
    return false;
  })) << "the node drained and left";
  for (int i = 0; i < 4; ++i) {
    StepReport r = fs[i].get(std::chrono::seconds(30));
    EXPECT_EQ(r.started_at + r.ran, 20);
    EXPECT_NE(r.pid, pid);
  }
  ClusterStatus s = rt.status();
  EXPECT_EQ(s.counters["commits"], 80u) << "no step computed twice";
  EXPECT_EQ(s.counters["nodes_drained"], 1u);
}

}  // namespace
}  // namespace spotlight

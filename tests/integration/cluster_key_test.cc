// The cluster key (transport/cluster_key.h): a secured cluster serves only
// peers that hold its key, says so at once to those that do not, counts them,
// and keeps serving its members; an --insecure cluster takes no key.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "common/process.h"
#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing::counter;
using testing_actors::Worker;

// Connecting with `key` fails; returns what it said, and checks it said so at
// once rather than after the connect timeout.
std::string refusal(const LocalCluster& cluster, const std::string& key) {
  ConnectOptions o;
  o.cluster_key = key;
  o.connect_timeout = 20s;
  auto start = std::chrono::steady_clock::now();
  try {
    cluster.connect(o);
  } catch (const ConnectionError& e) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "connected with key " << key;
  return "";
}

TEST(ClusterKey, ACallerWithoutTheKeyIsRefusedAtOnceAndMembersAreServed) {
  LocalCluster cluster(cluster_options(1));
  ASSERT_EQ(cluster.key().size(), 64u);
  auto rt = cluster.connect();
  auto w = rt.pool<Worker>("w", on_market("any"));
  EXPECT_EQ(w.call(&Worker::twice, 21).get(), 42);

  std::string none = refusal(cluster, "none");
  EXPECT_NE(none.find("refused the handshake"), std::string::npos) << none;
  std::string wrong = refusal(cluster, transport::ClusterKey::generate().hex());
  EXPECT_NE(wrong.find("refused the handshake"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("SPOTLIGHT_CLUSTER_KEY"), std::string::npos) << wrong;

  // The head counted them, and its members go on as before.
  // (libzmq does not retry a connection refused for a reason it was told: the
  // keyless one tried once, the other three times.)
  EXPECT_TRUE(testing::wait_for_status(cluster.address(), [](const ClusterStatus& st) {
    return counter(st, "handshakes_refused") >= 4;
  }));
  EXPECT_EQ(w.call(&Worker::twice, 5).get(), 10);
}

// A peer that knows the head's public key but not the secret: it passes
// CURVE's own checks with a key pair of its own, and only the ZAP handler
// stands between it and the cluster. It gets no answer, and is counted.
TEST(ClusterKey, APeerWithAnotherKeyPairGetsNoAnswer) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  transport::ClusterKey cluster_key = transport::ClusterKey::parse(cluster.key());
  transport::ClusterKey own = transport::ClusterKey::generate();

  zmq::socket_t s(transport::context(), zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::curve_serverkey, zmq::buffer(cluster_key.public_key()));
  s.set(zmq::sockopt::curve_publickey, zmq::buffer(own.public_key()));
  s.set(zmq::sockopt::curve_secretkey, zmq::buffer(own.secret()));
  s.connect(transport::endpoint(cluster.address()));
  transport::send(s, wire::encode_empty(wire::MsgType::kStatusRequest, 1));

  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
  EXPECT_EQ(zmq::poll(items, 1, 1500ms), 0) << "the head answered a peer outside the cluster";
  EXPECT_TRUE(testing::wait_for_status(cluster.address(), [](const ClusterStatus& st) {
    return counter(st, "handshakes_refused") >= 1;
  }));
}

TEST(ClusterKey, ANodeWithTheWrongKeyStopsAndSaysWhy) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  int i = cluster.start_node(1, "spot", {"--key", transport::ClusterKey::generate().hex()});
  EXPECT_EQ(common::wait_exit(cluster.node_pid(i), 20s), 1 << 8);  // exit code 1
  std::stringstream log;
  log << std::ifstream(cluster.log_dir() + "/node-" + std::to_string(i) + ".log").rdbuf();
  EXPECT_NE(log.str().find("refused the handshake"), std::string::npos) << log.str();
  EXPECT_TRUE(rt.status().nodes.empty());
  // One with the right key (its environment's) joins.
  cluster.add_node(1, "spot");
  EXPECT_EQ(rt.status().nodes.size(), 1u);
}

// The head comes back with another key (its key file was lost, say): a
// driver's calls in flight fail saying why, and so does its next call,
// instead of waiting for ever.
TEST(ClusterKey, ADriverWhoseHeadComesBackWithAnotherKeyIsToldWhy) {
  LocalCluster cluster(cluster_options(0));  // no node: the call waits in its mailbox
  auto rt = cluster.connect();
  auto w = rt.pool<Worker>("w", on_market("any"));
  Future<int64_t> waiting = w.call(&Worker::twice, 1);
  rt.wait_accepted();

  cluster.kill_head(SIGKILL);
  testing::TempDir dir("rekeyed");
  const std::string other = transport::ClusterKey::generate().hex();
  const std::string port = cluster.address().substr(cluster.address().rfind(':') + 1);
  pid_t head = common::spawn({SPOTLIGHT_TEST_BIN, "head", "--bind", "127.0.0.1", "--port", port,
                              "--store", cluster.store_path()},
                             dir.path() + "/head.log", {"SPOTLIGHT_CLUSTER_KEY=" + other});
  try {
    waiting.get(std::chrono::seconds(20));
    ADD_FAILURE() << "the call returned through a head with another key";
  } catch (const ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find("refused the handshake"), std::string::npos) << e.what();
  }
  EXPECT_THROW(w.call(&Worker::twice, 2).get(std::chrono::seconds(5)), ConnectionError);

  ConnectOptions o;
  o.cluster_key = other;
  connect(cluster.address(), o).stop_cluster();
  EXPECT_EQ(common::wait_exit(head, 10s), 0);
}

TEST(ClusterKey, AnInsecureClusterTakesNoKey) {
  ClusterOptions o = cluster_options(1);
  o.insecure = true;
  LocalCluster cluster(o);
  EXPECT_EQ(cluster.key(), "none");
  auto rt = cluster.connect();
  EXPECT_EQ(rt.pool<Worker>("w", on_market("any")).call(&Worker::twice, 4).get(), 8);
  std::string keyed = refusal(cluster, transport::ClusterKey::generate().hex());
  EXPECT_NE(keyed.find("refused the handshake"), std::string::npos) << keyed;
}

TEST(ClusterKey, MalformedKeysAreRefusedClearly) {
  EXPECT_THROW(transport::ClusterKey::parse("abc"), std::invalid_argument);
  EXPECT_THROW(transport::ClusterKey::parse(std::string(63, 'a') + "g"), std::invalid_argument);
  EXPECT_THROW(use_cluster_key("xyz"), std::invalid_argument);
  transport::ClusterKey k = transport::ClusterKey::generate();
  EXPECT_EQ(transport::ClusterKey::parse(k.hex()), k);
  EXPECT_EQ(transport::ClusterKey::parse(k.hex()).public_key(), k.public_key());
  EXPECT_FALSE(transport::ClusterKey::parse("none").secure());
}

}  // namespace
}  // namespace spotlight

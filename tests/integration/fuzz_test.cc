// Mutated frames against a live head and a live node: valid frames of every
// kind a client, a node or a head sends, with bytes flipped, cut, inserted or
// set to msgpack's awkward markers, and bodies sent under another type. The
// head and the node must answer or drop each one and keep serving: nothing
// may crash them. The mutations come from a fixed seed, so a failure repeats.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/process.h"
#include "support/cluster.h"
#include "support/fake_head.h"
#include "support/raw_peer.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"
#include "transport/socket.h"
#include "wire/envelope.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::RawPeer;
using testing_actors::Worker;

constexpr uint64_t kSeed = 20261202;

// One mutation of `f`: what a broken or hostile peer might send.
std::string mutate(std::string f, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static const unsigned char kAwkward[] = {0x00, 0x7f, 0x80, 0x90, 0xa0, 0xc0, 0xc1,
                                           0xc2, 0xc4, 0xcc, 0xcf, 0xd0, 0xd3, 0xdb,
                                           0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff};
  switch (rng() % 5) {
    case 0:  // flip a few bits
      for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n && !f.empty(); ++i) {
        f[pick(f.size())] ^= static_cast<char>(1 + rng() % 255);
      }
      break;
    case 1:  // cut short
      f.resize(pick(f.size()));
      break;
    case 2: {  // bytes inserted
      std::string junk(1 + rng() % 8, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      f.insert(pick(f.size() + 1), junk);
      break;
    }
    case 3:  // a byte set to a marker that changes what follows it
      if (!f.empty()) f[pick(f.size())] = static_cast<char>(kAwkward[pick(sizeof kAwkward)]);
      break;
    default: {  // a slice repeated
      const size_t at = pick(f.size()), len = pick(f.size() - at + 1);
      f.insert(at, f.substr(at, len));
    }
  }
  return f;
}

// The packed body of a valid frame ([version, type, request id, body]).
std::string body_of(const std::string& frame) {
  msgpack::object_handle h = msgpack::unpack(frame.data(), frame.size());
  msgpack::sbuffer b;
  msgpack::pack(b, h.get().via.array.ptr[3]);
  return std::string(b.data(), b.size());
}

// A body under another message type of the same corpus.
std::string confuse(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  const wire::MsgType type = wire::decode(corpus[rng() % corpus.size()]).type;
  return wire::encode_raw(type, rng() % 4, body_of(corpus[rng() % corpus.size()]));
}

// Frames that would end the test's cluster for a good reason if a mutation
// happened to produce them well formed: stop, drain, remove, shut down.
bool ends_the_cluster(const std::string& frame) {
  try {
    const wire::MsgType t = wire::decode(frame).type;
    return t == wire::MsgType::kStop || t == wire::MsgType::kDrain ||
           t == wire::MsgType::kRemovePool || t == wire::MsgType::kShutdown;
  } catch (const std::exception&) {
    return false;  // not decodable: exactly what is meant to be sent
  }
}

bool running(pid_t pid) {
  return common::wait_exit(pid, std::chrono::milliseconds(0)) == -1;
}

// Under SPOTLIGHT_SANITIZE a process that survives may still have logged a
// report (UBSan's go on running): none is allowed either.
void expect_no_sanitizer_report(const std::string& log) {
  std::ifstream in(log);
  EXPECT_TRUE(in.is_open()) << "no log at " << log;
  for (std::string line; std::getline(in, line);) {
    EXPECT_EQ(line.find("runtime error:"), std::string::npos) << log << ": " << line;
    EXPECT_EQ(line.find("Sanitizer"), std::string::npos) << log << ": " << line;
  }
}

TEST(Fuzz, TheHeadSurvivesMutatedFramesFromClientsAndNodes) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto w = rt.spawn<Worker>("fuzz-worker");
  auto done = w.call(&Worker::twice, int64_t{1});
  ASSERT_EQ(done.get(), 2);
  const uint64_t task = done.task_id();

  // One peer speaks as a client, one as a node that hosts no type the
  // cluster uses (nothing is placed on it), one never says hello.
  RawPeer client(cluster.address()), node(cluster.address()), stranger(cluster.address());
  const uint64_t num = client.hello_client("client-fuzz");
  ASSERT_NE(num, 0u);
  node.send(
      wire::encode(wire::HelloNode{"node-fuzz", "h", 1, "spot", 4, {"Nothing"}, 0, {}, {}, ""}));
  ASSERT_TRUE(node.reply().has_value());

  const uint64_t id = (num << 40) | 1;
  const Blob args{pack(std::make_tuple(int64_t{21}))};
  const std::vector<std::string> client_frames = {
      wire::encode(wire::HelloClient{"client-fuzz", {id}, {}}),
      wire::encode(wire::CreatePool{"fuzz-pool", "Nothing", "any", 2, 1, 16, 1, "spread", ""}),
      wire::encode(
          wire::Calls{{wire::Call{id, "fuzz-worker", "twice", args, 0},
                       wire::Call{id + 1, "fuzz-worker", "twice", args, 2, 1500, 0, 0, 3}}}),
      wire::encode(wire::AckResults{{id, task}}),
      wire::encode(wire::Fetch{{task, id}}),
      wire::encode(wire::Cancel{{id + 1, task}, true}),
      wire::encode_empty(wire::MsgType::kSync, 7),
      wire::encode_empty(wire::MsgType::kStatusRequest, 8),
      wire::encode(TaskQuery{"fuzz-worker", "done", 10}, 9),
      wire::encode(wire::KvSet{"k", "v"}, 10),
      wire::encode(wire::KvGet{"k", 5}, 11),
      wire::encode(wire::ObjectWhere{"obj", 5}, 12),
      wire::encode(wire::Heartbeat{1, 0}),
  };
  const std::vector<std::string> node_frames = {
      wire::encode(wire::HelloNode{
          "node-fuzz", "h", 1, "spot", 4, {"Nothing"}, 1, {{1, 1}}, {task}, "127.0.0.1:1"}),
      wire::encode(wire::Placed{1, 1, true, ""}),
      wire::encode(
          wire::Done{{wire::Completion{task, 1, 1, true, 0, "", Blob{pack(2)}, false, {}}}, 1}),
      wire::encode(wire::Commits{{wire::Commit{task, 1, 1, Blob{"state"}}}}),
      wire::encode(wire::ObjectAdd{"obj", "node-fuzz", "127.0.0.1:1", 10, 3}, 13),
      wire::encode(wire::ObjectDrop{"obj", "node-fuzz"}),
      wire::encode(wire::Heartbeat{1, 0}),
  };
  std::vector<std::string> all = client_frames;
  all.insert(all.end(), node_frames.begin(), node_frames.end());

  std::mt19937_64 rng(kSeed);
  int sent = 0;
  for (int i = 0; i < 3000; ++i) {
    const int who = static_cast<int>(rng() % 3);
    const auto& corpus = who == 1 ? node_frames : client_frames;
    std::string frame =
        rng() % 8 == 0 ? confuse(all, rng) : mutate(corpus[rng() % corpus.size()], rng);
    if (ends_the_cluster(frame)) continue;
    (who == 0 ? client : who == 1 ? node : stranger).send_all(frame);
    ++sent;
    if (i % 100 == 99) {  // read what came back, as a peer does
      client.drain();
      node.drain();
      stranger.drain();
    }
  }
  ASSERT_GT(sent, 2500);

  // Still serving: a status, a call on the pool from before, a new actor.
  ClusterStatus s = rt.status();
  EXPECT_GT(s.counters["error_malformed"], 0u);
  EXPECT_EQ(w.call(&Worker::twice, int64_t{4}).get(std::chrono::seconds(30)), 8);
  auto fresh = rt.spawn<Worker>("fuzz-after");
  EXPECT_EQ(fresh.call(&Worker::twice, int64_t{5}).get(std::chrono::seconds(30)), 10);
  EXPECT_TRUE(running(cluster.head_pid())) << "the head exited";
  EXPECT_TRUE(running(cluster.node_pid(0))) << "the node exited";
  expect_no_sanitizer_report(cluster.log_dir() + "/head.log");
  expect_no_sanitizer_report(cluster.log_dir() + "/node-0.log");
}

TEST(Fuzz, ANodeSurvivesMutatedFramesFromItsHead) {
  testing::FakeHead head;
  testing::TempDir logs("fuzz-node");  // a warning per bad frame: kept out of the test's output
  pid_t node = common::spawn({SPOTLIGHT_TEST_BIN, "join", head.address(), "--market", "spot",
                              "--slots", "2", "--heartbeat-ms", "50"},
                             logs.path() + "/node.log", testing::key_env());
  ASSERT_FALSE(head.wait_for_hello().empty());
  head.send(wire::encode(wire::Welcome{1, 0, 50, 5000, 1 << 20, {}}));
  // An actor the mutated tasks can reach: the bench's Echo, built into the binary.
  const std::string echo = "spotlight::bench::Echo";
  head.send(wire::encode(wire::Place{1, "echo", echo, 1, 16, false, {}}));

  const Blob args{pack(std::make_tuple(int64_t{7}))};
  const std::vector<std::string> corpus = {
      wire::encode(wire::Welcome{1, 0, 50, 5000, 1 << 20, {1}}),
      wire::encode(wire::Heartbeat{1, 3}),
      wire::encode(wire::Place{2, "echo", echo, 1, 16, true, Blob{"saved"}}),
      wire::encode(wire::Tasks{{wire::Task{1, 1, 1, "ping", args, 1, false, {}, {}},
                                wire::Task{2, 1, 2, "ping", args, 2, true, Blob{"step"}, {}}},
                               1}),
      wire::encode(wire::Cancel{{1, 2}, true}),
      wire::encode(wire::Unplace{{2}}),
      wire::encode_empty(wire::MsgType::kProbe, 5),
      wire::encode(wire::Error{1, "bad"}),
  };
  std::mt19937_64 rng(kSeed + 1);
  for (int i = 0; i < 2000; ++i) {
    std::string frame =
        rng() % 8 == 0 ? confuse(corpus, rng) : mutate(corpus[rng() % corpus.size()], rng);
    if (ends_the_cluster(frame)) continue;
    head.send(frame);
    while (head.recv(std::chrono::milliseconds(0))) {
    }
  }
  // Still alive: it keeps its heartbeat, answers a probe, and a clean
  // shutdown is still a clean exit.
  head.send(wire::encode_empty(wire::MsgType::kProbe, 4242));
  bool probed = false;
  int heartbeats = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline && (!probed || heartbeats < 3)) {
    auto m = head.recv(std::chrono::milliseconds(100));
    if (!m) continue;
    try {
      wire::Envelope env = wire::decode(m->second);
      probed |= env.type == wire::MsgType::kProbe && env.request_id == 4242;
      heartbeats += env.type == wire::MsgType::kHeartbeat;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the node sent a frame that does not decode: " << e.what();
    }
  }
  EXPECT_TRUE(probed) << "the node did not answer a probe after the fuzzing";
  EXPECT_GE(heartbeats, 3);
  EXPECT_TRUE(running(node)) << "the node exited";
  head.send(wire::encode_empty(wire::MsgType::kShutdown));
  EXPECT_EQ(common::wait_exit(node, std::chrono::seconds(10)), 0) << "shutdown is a clean exit";
  expect_no_sanitizer_report(logs.path() + "/node.log");
}

}  // namespace
}  // namespace spotlight

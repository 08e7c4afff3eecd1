// Bad input to the head and to a node: each gets a clear error, is counted,
// and the process keeps serving.
#include <gtest/gtest.h>

#include "common/process.h"
#include "support/cluster.h"
#include "support/fake_head.h"
#include "support/raw_peer.h"
#include "support/test_actors.h"
#include "transport/socket.h"
#include "wire/child_ids.h"
#include "wire/envelope.h"

namespace spotlight {
namespace {

using testing::cluster_options;
using testing::RawPeer;
using testing_actors::Worker;

TEST(BadInput, HeadAnswersEachBadFrameAndKeepsServing) {
  auto opts = cluster_options(1);
  opts.head_args = {"--max-frame-mib", "0.0625"};  // 64 KiB
  LocalCluster cluster(opts);
  RawPeer peer(cluster.address());
  using wire::ErrorCode;
  EXPECT_EQ(peer.error_for("\xc1 not msgpack"), ErrorCode::kMalformed);
  EXPECT_EQ(peer.error_for(pack(std::make_tuple(1, 2))), ErrorCode::kMalformed);
  EXPECT_EQ(peer.error_for(std::string(60 * 1024, '\x91')), ErrorCode::kMalformed);  // nested 60 K deep
  EXPECT_EQ(peer.error_for(pack(std::make_tuple(wire::kProtocolVersion + 7, 2, 0, 0))),
            ErrorCode::kBadVersion);
  EXPECT_EQ(peer.error_for(pack(std::make_tuple(wire::kProtocolVersion, 4242, 0, 0))),
            ErrorCode::kUnknownType);
  std::string big = wire::encode(wire::HelloClient{std::string(200 * 1024, 'x'), {}, {}});
  EXPECT_EQ(peer.error_for(big), ErrorCode::kOversized);
  // A body of the wrong shape for its type.
  EXPECT_EQ(peer.error_for(wire::encode_raw(wire::MsgType::kHelloNode, 0, pack(std::string("x")))),
            ErrorCode::kMalformed);
  // Calls before hello: the head does not know this peer.
  EXPECT_EQ(peer.error_for(wire::encode(wire::Calls{})), ErrorCode::kUnknownPeer);
  // A node hello with nonsense fields.
  EXPECT_EQ(peer.error_for(wire::encode(wire::HelloNode{"n", "h", 1, "moon", 0, {}, 0, {}, {}, ""})),
            ErrorCode::kBadRequest);

  // Still serving: a real client works, and the counters show each refusal.
  auto rt = cluster.connect();
  auto w = rt.spawn<Worker>("after-bad-input");
  EXPECT_EQ(w.call(&Worker::twice, 21).get(), 42);
  ClusterStatus s = rt.status();
  EXPECT_GE(s.counters["error_malformed"], 3u);
  EXPECT_EQ(s.counters["error_bad_version"], 1u);
  EXPECT_EQ(s.counters["error_unknown_type"], 1u);
  EXPECT_EQ(s.counters["error_oversized"], 1u);
  EXPECT_GE(s.counters["error_unknown_peer"], 1u);
  EXPECT_GE(s.counters["error_bad_request"], 1u);
}

// Not bad input: the head's side of a call as a raw peer sees it. A call that
// waits (no node can run it) is announced as accepted once committed, even
// though the head holds announcements back a few milliseconds in case the
// result comes first.
TEST(HeadProtocol, AWaitingCallIsAnnouncedAsAccepted) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  rt.spawn<Worker>("no-node-yet");
  RawPeer peer(cluster.address());
  uint64_t id = (peer.hello_client("raw-accepted") << 40) | 1;
  peer.send(wire::encode(wire::Calls{{wire::Call{id, "no-node-yet", "twice", Blob{pack(std::make_tuple(int64_t{21}))}, 0}}}));
  auto accepted = peer.reply();
  ASSERT_TRUE(accepted.has_value());
  ASSERT_EQ(accepted->type, wire::MsgType::kAccepted);
  EXPECT_EQ(accepted->body<wire::Accepted>().ids, std::vector<uint64_t>{id});
  // Durable before it was announced: the pool's mailbox holds it.
  ClusterStatus s = rt.status();
  const PoolStatus* pool = testing::find_pool(s, "no-node-yet");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->queued, 1u);
}

// A node that says hello holding tasks the head does not lease to it (they
// finished, or were cancelled by a head that died before telling the node)
// is told to drop them, after its welcome.
TEST(HeadProtocol, ANodeIsToldToDropTasksThatAreNoLongerItsLeases) {
  LocalCluster cluster(cluster_options(0));
  RawPeer node(cluster.address());
  node.send(
      wire::encode(wire::HelloNode{"raw-node", "h", 1, "spot", 1, {}, 7, {}, {123, 456}, ""}));
  auto welcome = node.reply();
  ASSERT_TRUE(welcome.has_value());
  ASSERT_EQ(welcome->type, wire::MsgType::kWelcome);
  auto cancel = node.reply();
  ASSERT_TRUE(cancel.has_value());
  ASSERT_EQ(cancel->type, wire::MsgType::kCancel);
  EXPECT_EQ(cancel->body<wire::Cancel>().ids, (std::vector<uint64_t>{123, 456}));
  EXPECT_EQ(testing::counter(cluster.connect().status(), "stale_tasks_cancelled_on_nodes"), 2u);
}

// A node that finds a restarted head sent it frames before its hello (a
// heartbeat, results): each is refused as coming from an unknown peer. Those
// refusals must reach the node before the Welcome its hello gets, even when
// the head reads them all in one turn: a refusal that came after the
// Welcome made the node start yet another session, and the head then took
// the node for one that had lost sight of it and sent its leases back to
// their mailboxes (Preemption.HeadKilledUnderLoadLosesNothing, 2 runs in 30
// under load).
TEST(HeadProtocol, RefusalsOfFramesSentBeforeAHelloArriveBeforeItsWelcome) {
  LocalCluster cluster(cluster_options(0));
  const pid_t head = cluster.head_pid();
  for (int round = 0; round < 3; ++round) {
    RawPeer node(cluster.address());
    node.send_all(wire::encode(wire::Heartbeat{}));
    // The head is stopped while both frames arrive, so that one turn reads them.
    common::signal_process(head, SIGSTOP);
    node.send_all(wire::encode(wire::Heartbeat{}));
    node.send_all(wire::encode(wire::HelloNode{"raw-node-" + std::to_string(round),
                                               "h",
                                               1,
                                               "spot",
                                               1,
                                               {},
                                               static_cast<uint32_t>(round + 1),
                                               {},
                                               {},
                                               ""}));
    common::signal_process(head, SIGCONT);
    std::vector<wire::MsgType> got;
    while (got.size() < 3) {
      auto env = node.reply();
      if (!env) break;
      got.push_back(env->type);
      if (env->type == wire::MsgType::kError) {
        EXPECT_EQ(env->body<wire::Error>().code,
                  static_cast<int32_t>(wire::ErrorCode::kUnknownPeer));
      }
    }
    EXPECT_EQ(got, (std::vector<wire::MsgType>{wire::MsgType::kError, wire::MsgType::kError,
                                               wire::MsgType::kWelcome}))
        << "round " << round;
  }
}

// Ids a client may not use: another client's, and a task's call whose id
// does not derive from its parent, key and contents. A well-formed task's
// call from a driver's connection is refused too (task 77 runs nowhere).
// Each is refused with a rejected result and counted, and the head serves on.
// A node that says hello again (it lost sight of the head) while it holds a
// leased task: the head re-queues the task and, in the same turn, may lease
// it to the same node again under the same id. The node must hear "drop
// your old copy" before the new lease, or it drops the new lease and the
// call waits for ever (found by `spotlight bench scale`: a million queued
// calls hung after the head declared a busy node dead).
TEST(HeadProtocol, ANodeThatSaysHelloAgainGetsItsTaskBackAfterTheCancelOfTheOldCopy) {
  LocalCluster cluster(cluster_options(0));
  const std::string type = actor_type_name<Worker>();
  RawPeer node(cluster.address());
  node.send(wire::encode(wire::HelloNode{"raw-node", "h", 1, "spot", 1, {type}, 1, {}, {}, ""}));
  ASSERT_EQ(node.reply()->type, wire::MsgType::kWelcome);

  auto rt = cluster.connect();
  auto w = rt.spawn<Worker>("re-hello");
  auto place = node.reply();
  ASSERT_TRUE(place && place->type == wire::MsgType::kPlace);
  const auto p = place->body<wire::Place>();
  node.send(wire::encode(wire::Placed{p.actor_id, p.incarnation, true, ""}));
  auto call = w.call(&Worker::twice, int64_t{21});
  auto leased = node.reply();
  ASSERT_TRUE(leased && leased->type == wire::MsgType::kTasks);
  const wire::Task first = leased->body<wire::Tasks>().tasks.at(0);

  // A new session, still hosting the actor and holding the task.
  node.send(wire::encode(wire::HelloNode{
      "raw-node", "h", 1, "spot", 1, {type}, 2, {{p.actor_id, p.incarnation}}, {first.id}, ""}));
  ASSERT_EQ(node.reply()->type, wire::MsgType::kWelcome);
  auto cancel = node.reply();
  ASSERT_TRUE(cancel.has_value());
  ASSERT_EQ(cancel->type, wire::MsgType::kCancel) << "the cancel of the old copy comes first";
  EXPECT_EQ(cancel->body<wire::Cancel>().ids, (std::vector<uint64_t>{first.id}));
  auto again = node.reply();
  ASSERT_TRUE(again && again->type == wire::MsgType::kTasks);
  const wire::Task second = again->body<wire::Tasks>().tasks.at(0);
  EXPECT_EQ(second.id, first.id);
  EXPECT_NE(second.epoch, first.epoch) << "a new lease";

  // The node runs the new lease: the call gets its result.
  node.send(wire::encode(wire::Done{
      {wire::Completion{
          second.id, p.actor_id, second.epoch, true, 0, "", Blob{pack(int64_t{42})}, false, {}}},
      1}));
  EXPECT_EQ(call.get(std::chrono::seconds(10)), 42);
}

TEST(BadInput, ForgedCallIdsAreRefused) {
  LocalCluster cluster(cluster_options(0));
  auto rt = cluster.connect();
  rt.spawn<Worker>("w");
  RawPeer peer(cluster.address());
  const uint64_t num = peer.hello_client("raw-forger");
  const Blob args{pack(std::make_tuple(int64_t{21}))};
  const uint64_t derived = wire::child_call_id(77, 0, "w", "twice", args.data);
  std::vector<wire::Call> calls{
      wire::Call{((num + 1) << 40) | 1, "w", "twice", args, 0, 0, 0, 0},   // another client's range
      wire::Call{wire::kChildIdBit | 5, "w", "twice", args, 0, 0, 77, 0},  // not derived
      wire::Call{derived, "w", "twice", args, 0, 0, 0, 0},                 // no parent
      wire::Call{derived, "w", "twice", args, 0, 0, 77, 0}};               // not from its node
  peer.send(wire::encode(wire::Calls{calls}));
  std::vector<uint64_t> rejected;
  while (rejected.size() < calls.size()) {
    auto env = peer.reply();
    ASSERT_TRUE(env.has_value()) << "the head stopped answering";
    ASSERT_EQ(env->type, wire::MsgType::kResults) << "only refusals were due";
    for (const auto& r : env->body<wire::Results>().results) {
      EXPECT_FALSE(r.ok);
      EXPECT_FALSE(r.payload.data.empty());
      rejected.push_back(r.id);
    }
  }
  EXPECT_EQ(rejected, (std::vector<uint64_t>{calls[0].id, calls[1].id, calls[2].id, calls[3].id}));
  const ClusterStatus s = rt.status();
  EXPECT_EQ(testing::counter(s, "rejected_bad_id"), 3u);
  EXPECT_EQ(testing::counter(s, "rejected_stale_parent"), 1u);
  const PoolStatus* w = testing::find_pool(s, "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->queued, 0u) << "a refused call was queued";
}

// The object directory in the head, and a node's object server.
TEST(BadInput, CancelRequestsAreRefusedClearly) {
  LocalCluster cluster(cluster_options(0));
  RawPeer peer(cluster.address());
  using wire::ErrorCode;
  EXPECT_EQ(peer.error_for(wire::encode(wire::Cancel{{1}, true}, 1)), ErrorCode::kUnknownPeer);
  peer.hello_client("cancel-raw");
  EXPECT_EQ(peer.error_for(wire::encode_raw(wire::MsgType::kCancel, 2, pack(std::string("x")))),
            ErrorCode::kMalformed);
  wire::Cancel many{std::vector<uint64_t>((size_t{1} << 20) + 1, 7), true};
  EXPECT_EQ(peer.error_for(wire::encode(many, 3)), ErrorCode::kBadRequest);
  // Still serving it: an id nobody made is answered as not held.
  peer.send(wire::encode(wire::Cancel{{42}, true}, 4));
  auto r = peer.reply();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->type, wire::MsgType::kCancelReply);
  EXPECT_EQ(r->request_id, 4u);
  EXPECT_EQ(r->body<wire::CancelReply>().outcomes,
            std::vector<int32_t>{static_cast<int32_t>(CancelOutcome::kNotHeld)});
}

TEST(BadInput, ObjectRequestsAreRefusedClearly) {
  LocalCluster cluster(cluster_options(1));
  RawPeer head(cluster.address());
  using wire::ErrorCode;
  EXPECT_EQ(head.error_for(wire::encode(wire::ObjectAdd{"", "n", "a:1", 1, 1})), ErrorCode::kBadRequest);
  EXPECT_EQ(head.error_for(wire::encode(wire::ObjectAdd{"x", "no-such-node", "a:1", 1, 1})), ErrorCode::kBadRequest);
  EXPECT_EQ(head.error_for(wire::encode(wire::ObjectWhere{"x", -5})), ErrorCode::kBadRequest);
  EXPECT_EQ(head.error_for(wire::encode(wire::ObjectWhere{std::string(5000, 'k'), 0})), ErrorCode::kBadRequest);
  head.send(wire::encode(wire::ObjectWhere{"nobody-put-it", 0}, 7));
  auto none = head.reply();
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->request_id, 7u);
  EXPECT_FALSE(none->body<wire::ObjectLocations>().found);

  ClusterStatus s = cluster.connect().status();
  ASSERT_EQ(s.nodes.size(), 1u);
  ASSERT_FALSE(s.nodes[0].object_address.empty());
  RawPeer server(s.nodes[0].object_address);
  EXPECT_EQ(server.error_for("\xc1 not msgpack"), ErrorCode::kMalformed);
  EXPECT_EQ(server.error_for(wire::encode(wire::Calls{})), ErrorCode::kBadRequest);
  server.send(wire::encode(wire::ObjectFetch{"not-here", 0, 10}, 3));
  auto chunk = server.reply();
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->type, wire::MsgType::kObjectChunk);
  EXPECT_FALSE(chunk->body<wire::ObjectChunk>().found);

  // Both still serve: a put and a get through them work.
  auto rt = cluster.connect();
  auto a = rt.spawn<testing_actors::ObjectUser>("after-bad-objects");
  a.call(&testing_actors::ObjectUser::put, std::string("ok"), int64_t{10}, int64_t{1}).get();
  EXPECT_EQ(a.call(&testing_actors::ObjectUser::get, std::string("ok"), int64_t{100}).get().size, 10u);
}

TEST(BadInput, OversizedArgumentsAndResultsBecomeErrors) {
  auto opts = cluster_options(1);
  opts.head_args = {"--max-frame-mib", "0.0625"};  // 64 KiB
  LocalCluster cluster(opts);
  auto rt = cluster.connect();
  auto w = rt.spawn<Worker>("sizes");
  std::vector<std::string> small(10, std::string(1000, 's'));
  EXPECT_EQ(w.call(&Worker::echo_many, small).get(), small);
  try {
    w.call(&Worker::echo_many, std::vector<std::string>{std::string(100000, 'x')}).get();
    FAIL() << "oversized arguments were sent";
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find("frame limit"), std::string::npos) << e.what();
  }
  try {
    w.call(&Worker::blob, 100000).get();
    FAIL() << "an oversized result was sent";
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find("result takes"), std::string::npos) << e.what();
  }
  // Many calls whose total is far over the limit travel in several frames.
  std::vector<Future<std::string>> fs;
  for (int i = 0; i < 50; ++i) fs.push_back(w.call(&Worker::blob, 20000));
  for (auto& f : fs) EXPECT_EQ(f.get().size(), 20000u);
  EXPECT_EQ(rt.status().counters["error_oversized"], 0u);
}

TEST(BadInput, UnknownActorMethodAndArgumentsAreCounted) {
  LocalCluster cluster(cluster_options(1));
  auto rt = cluster.connect();
  rt.spawn<Worker>("w");
  EXPECT_THROW(rt.call<int64_t>("ghost", "twice", 1).get(), RejectedError);
  EXPECT_THROW(rt.call<int64_t>("w", "ghost_method").get(), RejectedError);
  EXPECT_THROW(rt.call<int64_t>("w", "twice", "x", "y").get(), RejectedError);
  ClusterStatus s = rt.status();
  EXPECT_EQ(s.counters["rejected_unknown_actor"], 1u);
  EXPECT_EQ(s.counters["rejected_by_node"], 2u);
  EXPECT_EQ(rt.call<int64_t>("w", "twice", 2).get(), 4);
}

// A node facing a head that sends garbage answers with errors and stays up.
TEST(BadInput, NodeSurvivesBadFramesFromItsHead) {
  testing::FakeHead head;
  pid_t node = common::spawn({SPOTLIGHT_TEST_BIN, "join", head.address(), "--market", "spot",
                              "--slots", "1", "--heartbeat-ms", "50"},
                             "", testing::key_env());
  ASSERT_FALSE(head.wait_for_hello().empty());
  head.send(wire::encode(wire::Welcome{1, 0, 50, 1000, 1 << 20, {}}));
  head.send("\xc1\xc1 garbage");
  head.send(pack(std::make_tuple(wire::kProtocolVersion + 1, 5, 0, 0)));
  head.send(wire::encode(wire::Tasks{{wire::Task{1, 99, 1, "x", {}, 1, false, {}, {}}}}));
  head.send(wire::encode(wire::Place{7, "p", "NoSuchType", 1, 1, false, {}}));
  int errors = 0, placed_failures = 0, heartbeats_after = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline && (errors < 2 || placed_failures < 1 || heartbeats_after < 3)) {
    auto m = head.recv(std::chrono::milliseconds(100));
    if (!m) continue;
    wire::Envelope env = wire::decode(m->second);
    if (env.type == wire::MsgType::kError) ++errors;
    if (env.type == wire::MsgType::kPlaced && !env.body<wire::Placed>().ok) ++placed_failures;
    if (env.type == wire::MsgType::kHeartbeat) ++heartbeats_after;
  }
  EXPECT_EQ(errors, 2) << "one error per bad frame";
  EXPECT_EQ(placed_failures, 1) << "placing an unknown type is refused, not fatal";
  EXPECT_GE(heartbeats_after, 3) << "the node is still alive";
  EXPECT_EQ(common::wait_exit(node, std::chrono::milliseconds(0)), -1) << "the node exited";
  head.send(wire::encode_empty(wire::MsgType::kShutdown));
  EXPECT_EQ(common::wait_exit(node, std::chrono::seconds(10)), 0) << "shutdown is a clean exit";
}

}  // namespace
}  // namespace spotlight

// The wire codec: every message type survives a round trip; bad frames are
// refused with the right error code.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "wire/child_ids.h"
#include "wire/envelope.h"

namespace spotlight::wire {
namespace {

template <class T>
void round_trip(const T& body, uint64_t rid = 42) {
  std::string frame = encode(body, rid);
  Envelope env = decode(frame);
  EXPECT_EQ(env.version, kProtocolVersion);
  EXPECT_EQ(env.type, type_of<T>::value);
  EXPECT_EQ(env.request_id, rid);
  T back = env.body<T>();
  EXPECT_EQ(pack(back), pack(body)) << to_string(type_of<T>::value);
}

TEST(Codec, EveryMessageTypeRoundTrips) {
  round_trip(Error{static_cast<int32_t>(ErrorCode::kOversized), "too big"});
  round_trip(HelloNode{"node-1", "host", 1234, "spot", 8, {"Counter", "Square"}, 3, {{4, 2}}, {9}, "10.0.0.2:4100"});
  round_trip(ObjectAdd{"policy@3", "node-1", "10.0.0.2:4100", 5 << 20, 77});
  round_trip(ObjectDrop{"policy@3", "node-1"});
  round_trip(ObjectWhere{"policy@3", 1000});
  round_trip(ObjectLocations{true, 5 << 20, 77, {"node-1", "node-2"}, {"a:1", "b:2"}});
  round_trip(ObjectFetch{"policy@3", 8 << 20, 8 << 20});
  round_trip(ObjectChunk{true, 8 << 20, 3 << 20});
  round_trip(HelloClient{"client-abc", {1, 2}, "node-7"});
  round_trip(Welcome{7, 3, 250, 1000, 64u << 20, {4}});
  round_trip(Heartbeat{9, 41});
  round_trip(CreatePool{"squares", "Square", "any", 4, 2, 16, 2, "pack", "node-1", 30000, 1,
                        "node-2", "explorers", "trainer", true, true});
  round_trip(PoolCreated{"squares", false, "exists with another type"});
  round_trip(PoolCreated{"squares", true, "", "members 4 (asked 8)"});
  round_trip(RemovePool{"squares"});
  round_trip(KvSet{"spotlight/sp/g/sp1/epoch/5/0", std::string("a\0b", 3)});
  round_trip(KvGet{"weights/version", 250});
  round_trip(KvDelete{"weights/version"});
  round_trip(KvValue{true, "41"});
  round_trip(Unplace{{5, 6}});
  round_trip(
      Calls{{Call{(3ull << 40) | 1, "counter", "add", Blob{pack(std::make_tuple(5))}, 0},
             Call{(3ull << 40) | 2, "counter", "get", Blob{std::string("\0\xff", 2)}, 3, 1500},
             Call{kChildIdBit | 7, "counter", "get", Blob{}, 0, 0, (3ull << 40) | 1, 2, -7}}});
  round_trip(Accepted{{1, 2, 3}});
  round_trip(Results{{Result{1, true, 0, "", Blob{pack(55)}},
                      Result{2, false, 1, "std::domain_error", Blob{"negative"}}}});
  round_trip(AckResults{{1, 2}});
  round_trip(Fetch{{(3ull << 40) | 1, (5ull << 40) | 9}});
  round_trip(Cancel{{(3ull << 40) | 1, (5ull << 40) | 9}, false});
  round_trip(CancelReply{{1, 2, 3}});
  round_trip(TaskQuery{"explorers", "leased", 10});
  round_trip(TaskQuery{"explorers", "", 10, "explore", "node-1", "", 3});
  round_trip(TaskQuery{.outcome = "error"});
  round_trip(TaskList{{TaskInfo{(3ull << 40) | 1, "explorers", "rollout", "leased", 2, 1, 3, 3, 0,
                                "node-1", 4, true, 1764000000000, "", 120}},
                      7});
  round_trip(Place{5, "squares", "Square", 2, 16, true, Blob{"saved"}});
  round_trip(Placed{5, 2, false, "type not loaded"});
  round_trip(
      Tasks{{Task{1, 5, 77, "add", Blob{pack(std::make_tuple(1))}, 2, true, Blob{"step 3"}, {}},
             Task{2,
                  6,
                  78,
                  "step",
                  Blob{pack(std::make_tuple(2))},
                  1,
                  false,
                  {},
                  SpGroup{"explorers/sp3", (4ull << 32) + 9, 1, 2, {5, 6}},
                  250,
                  3,
                  1000,
                  420,
                  true}},
            12});
  round_trip(Commits{{Commit{1, 5, 77, Blob{"step 4"}}}});
  round_trip(Drain{"node-1", 30000});
  round_trip(Done{{Completion{1, 5, 77, true, 0, "", Blob{pack(1)}, true, Blob{"state"}}}, 13});
  ClusterStatus st;
  st.boot = 3;
  st.nodes.push_back(NodeStatus{"n", "h", "spot", "alive", 2, 1, 99, 12, 4, -1, -1, -1, "10.0.0.2:4100"});
  st.pools.push_back(PoolStatus{"p", "T", "any", 2, 1, 10, 3, {{2, 4}, {0, 6}}});
  st.pools.back().placement = "pack, beside pool q";
  st.actors.push_back(ActorStatus{1, "p", "n", "ready", 2, 3, 4});
  st.counters["calls"] = 10;
  st.groups.push_back(SpGroupStatus{"p", "p/sp1", (3ull << 32) + 1, {1, 2}, 7});
  round_trip(st);
}

TEST(Codec, EmptyBodies) {
  for (MsgType t : {MsgType::kStatusRequest, MsgType::kStop, MsgType::kShutdown, MsgType::kOk,
                    MsgType::kProbe, MsgType::kSync}) {
    Envelope env = decode(encode_empty(t, 5));
    EXPECT_EQ(env.type, t);
    EXPECT_EQ(env.request_id, 5u);
    EXPECT_NO_THROW(env.body<Empty>());
  }
}

ErrorCode code_of(std::string_view frame) {
  try {
    decode(frame);
  } catch (const WireError& e) {
    return e.code;
  }
  ADD_FAILURE() << "frame was accepted";
  return ErrorCode::kBadRequest;
}

TEST(Codec, RefusesBadFrames) {
  EXPECT_EQ(code_of("\xc1\xc1\xc1"), ErrorCode::kMalformed);  // 0xc1 is never valid msgpack
  EXPECT_EQ(code_of(""), ErrorCode::kMalformed);
  EXPECT_EQ(code_of(pack(std::string("hello"))), ErrorCode::kMalformed);       // not an array
  EXPECT_EQ(code_of(pack(std::make_tuple(1, 2, 3))), ErrorCode::kMalformed);  // 3 fields
  EXPECT_EQ(code_of(pack(std::make_tuple(kProtocolVersion + 1, 5, 0, 0))), ErrorCode::kBadVersion);
  EXPECT_EQ(code_of(pack(std::make_tuple(kProtocolVersion, 999, 0, 0))), ErrorCode::kUnknownType);
  EXPECT_EQ(code_of(pack(std::make_tuple("1", 5, 0, 0))), ErrorCode::kMalformed);
  // Truncated: a valid frame cut short.
  std::string frame = encode(HelloClient{"abc", {}, {}});
  EXPECT_EQ(code_of(std::string_view(frame).substr(0, frame.size() - 2)), ErrorCode::kMalformed);
}

long max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

// `levels` nested one-element arrays around a nil.
std::string nested(size_t levels) { return std::string(levels, '\x91') + '\xc0'; }

TEST(Codec, DeepNestingIsRefusedBeforeItCostsMemory) {
  // 8 MiB of 0x91: msgpack-c alone would build 8 M nested objects (about
  // 400 MB) before finding the frame truncated.
  const long before = max_rss_mib();
  EXPECT_EQ(code_of(std::string(8 << 20, '\x91')), ErrorCode::kMalformed);
  EXPECT_LT(max_rss_mib() - before, 64) << "MiB of memory to refuse an 8 MiB frame";
  // An envelope whose body nests to the limit decodes (its shape is checked
  // later, by body<T>()); one level more is refused, saying why.
  auto envelope = [](size_t body_levels) {
    return std::string("\x94", 1) + pack(kProtocolVersion) + pack(uint16_t(MsgType::kHeartbeat)) + pack(0) +
           nested(body_levels);
  };
  EXPECT_NO_THROW(decode(envelope(kMaxFrameDepth - 1)));
  try {
    decode(envelope(kMaxFrameDepth));
    FAIL() << "a frame nested past the limit decoded";
  } catch (const WireError& e) {
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_NE(std::string(e.what()).find("nests deeper than"), std::string::npos) << e.what();
  }
  // Headers that promise more elements than the frame has bytes are refused too.
  EXPECT_EQ(code_of(std::string("\xdd\x05\xf5\xe1\x00", 5)), ErrorCode::kMalformed);  // array of 100 M
  EXPECT_EQ(code_of(std::string("\xdf\xff\xff\xff\xff", 5)), ErrorCode::kMalformed);  // map of 4 G
}

// Arguments and results (opaque bytes inside a frame) are bounded the same
// way, with room for any real struct.
TEST(Codec, ValuesNestedPastTheirLimitAreRefused) {
  EXPECT_NO_THROW(spotlight::detail::unpack_bounded(nested(spotlight::detail::kMaxValueDepth - 1)));
  EXPECT_THROW(spotlight::unpack<int>(nested(spotlight::detail::kMaxValueDepth)), CodecError);
  const long before = max_rss_mib();
  EXPECT_THROW(spotlight::unpack<int>(std::string(8 << 20, '\x91')), CodecError);
  EXPECT_LT(max_rss_mib() - before, 64) << "MiB of memory to refuse an 8 MiB value";
}

TEST(Codec, BodyOfTheWrongShapeIsMalformed) {
  Envelope env = decode(encode(Heartbeat{1}));
  try {
    env.body<HelloNode>();
    FAIL() << "a heartbeat body decoded as a hello";
  } catch (const WireError& e) {
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
  }
}

TEST(Codec, BlobKeepsArbitraryBytes) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(unpack<Blob>(pack(Blob{bytes})).data, bytes);
  EXPECT_THROW(unpack<int>(pack(std::string("x"))), CodecError);
}

}  // namespace
}  // namespace spotlight::wire

// The head's KV: set, get, waiting gets, bad requests; and SP groups that
// rendezvous through it (Gloo communicators of 3 and then 2 members) with no
// other store or server.
#include "spotlight/head_kv.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "common/process.h"
#include "spotlight/collective.h"
#include "spotlight/spotlight.h"
#include "support/cluster.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;

// A real `spotlight head` on loopback for one test.
class HeadKvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spotlight-kv-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    head_ = common::spawn({SPOTLIGHT_TEST_BIN, "head", "--port", "0", "--bind", "127.0.0.1",
                           "--store", dir_ + "/head.db", "--port-file", dir_ + "/port"},
                          dir_ + "/head.log", testing::key_env());
    const std::string port = common::wait_for_file(dir_ + "/port", 10s);
    ASSERT_FALSE(port.empty());
    address_ = "127.0.0.1:" + port;
  }
  void TearDown() override {
    stop_cluster(address_);
    EXPECT_EQ(common::wait_exit(head_, 10s), 0);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_, address_;
  pid_t head_ = -1;
};

TEST_F(HeadKvTest, SetGetAndWaitingGets) {
  auto kv = head_kv(address_);
  kv->set("a", std::string("one\0two", 7));
  EXPECT_EQ(kv->wait("a", 0ms), std::string("one\0two", 7));
  kv->set("a", "three");  // a later set replaces the value
  EXPECT_EQ(kv->wait("a", 0ms), "three");
  EXPECT_EQ(kv->wait("missing", 0ms), std::nullopt);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(kv->wait("missing", 200ms), std::nullopt);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  // A get that waits is answered when another client sets the key.
  std::optional<std::string> got;
  std::thread waiter([&] { got = head_kv(address_)->wait("later", 10s); });
  head_kv(address_)->set("later", "here");
  waiter.join();
  EXPECT_EQ(got, "here");
}

// A key a program set stays until it erases it; erasing says whether it was set.
TEST_F(HeadKvTest, AnErasedKeyIsGoneAndCanBeSetAgain) {
  auto kv = head_kv(address_);
  kv->set("weights/version", "41");
  EXPECT_TRUE(kv->erase("weights/version"));
  EXPECT_EQ(kv->wait("weights/version", 0ms), std::nullopt);
  EXPECT_FALSE(kv->erase("weights/version")) << "erased already";
  EXPECT_FALSE(kv->erase("never-set"));
  EXPECT_THROW(kv->erase(""), RejectedError);
  EXPECT_THROW(kv->erase(std::string(5000, 'k')), RejectedError);
  // A get that waits for an erased key is answered by the next set.
  std::optional<std::string> got;
  std::thread waiter([&] { got = head_kv(address_)->wait("weights/version", 10s); });
  head_kv(address_)->set("weights/version", "42");
  waiter.join();
  EXPECT_EQ(got, "42");
}

TEST_F(HeadKvTest, BadRequestsAreRefusedAndTheHeadStaysUp) {
  auto kv = head_kv(address_);
  EXPECT_THROW(kv->set("", "x"), RejectedError);
  EXPECT_THROW(kv->set(std::string(5000, 'k'), "x"), RejectedError);
  EXPECT_THROW(kv->wait("k", -5ms), RejectedError);
  kv->set("k", "v");
  EXPECT_EQ(kv->wait("k", 0ms), "v");
}

TEST_F(HeadKvTest, SpGroupsRendezvousThroughTheHead) {
  // Three members form epoch 1, then two of them form epoch 2.
  auto member = [&](int rank, int size, uint64_t epoch) {
    auto c = collective::make_gloo_communicator(*head_kv(address_), "rollout-group", epoch, rank, size);
    double x = rank + 1;
    c->all_reduce(&x, 1, collective::DataType::kFloat64, collective::ReduceOp::kSum);
    return x;
  };
  for (auto [size, epoch] : {std::pair{3, 1}, std::pair{2, 2}}) {
    std::vector<double> sums(size);
    std::vector<std::thread> ts;
    for (int r = 0; r < size; ++r) ts.emplace_back([&, r] { sums[r] = member(r, size, epoch); });
    for (auto& t : ts) t.join();
    for (double s : sums) EXPECT_EQ(s, size * (size + 1) / 2.0) << "epoch " << epoch;
  }
}

}  // namespace
}  // namespace spotlight

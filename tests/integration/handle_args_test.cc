// Actor handles in calls and results: a driver passes a handle to an actor's
// method, which calls through it; a task hands it on to another task; a
// handle of the wrong type is rejected; one that comes back to a driver
// names its actor but calls only once taken by name.
#include <gtest/gtest.h>

#include "support/cluster.h"
#include "support/temp_dir.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

using namespace std::chrono_literals;
using testing::cluster_options;
using testing_actors::Gate;
using testing_actors::Relay;
using testing_actors::Worker;

TEST(HandleArgs, AMethodCallsThroughAHandleItWasGivenAndHandsItOn) {
  LocalCluster cluster(cluster_options(1, 4));
  auto rt = cluster.connect();
  auto workers = rt.pool<Worker>("handle-workers", on_market("any").members(2));
  auto relay = rt.spawn<Relay>("relay");
  auto next = rt.spawn<Relay>("relay-next");
  EXPECT_EQ(relay.call(&Relay::twice_via, workers, int64_t{21}).get(60s), 42);
  // relay -> relay-next -> a worker: the handles travel twice.
  EXPECT_EQ(relay.call(&Relay::pass_on, next, workers, int64_t{8}).get(60s), 16);

  // Back in a driver: the name, but no runtime to call through.
  ActorHandle<Worker> back = relay.call(&Relay::echo, workers).get(60s);
  EXPECT_EQ(back.name(), "handle-workers");
  try {
    back.call(&Worker::twice, int64_t{1});
    ADD_FAILURE() << "a handle from a result called without a runtime";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("rt.actor<A>(handle.name())"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(rt.actor<Worker>(back.name()).call(&Worker::twice, int64_t{5}).get(60s), 10);
}

TEST(HandleArgs, AHandleOfAnotherTypeIsRejected) {
  LocalCluster cluster(cluster_options(1, 2));
  auto rt = cluster.connect();
  auto gate = rt.spawn<Gate>("handle-gate");
  rt.spawn<Relay>("relay-typed");
  auto f = rt.call<int64_t>("relay-typed", "twice_via", gate, int64_t{3});
  try {
    f.get(60s);
    ADD_FAILURE() << "a Gate handle was taken for a Worker handle";
  } catch (const RejectedError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "a handle to a testing_actors::Gate where a handle to a testing_actors::Worker"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace spotlight

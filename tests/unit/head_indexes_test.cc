// The head's work indexes (State::unplaced, waiting, sp_pools, leased_on,
// done_of): the turn, a node's or a client's hello and a node's death visit
// only what they list, so an actor or a call they missed would wait for
// ever, and a result missed would be kept for ever. Each mutator must keep
// them in step, and a restarted head must rebuild them from its store.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "head/state.h"
#include "store/store.h"
#include "support/task_record.h"

namespace spotlight {
namespace {

using head::ActorPhase;

store::PoolRecord pool_record(const std::string& name, int32_t size, int32_t sp_degree = 1) {
  store::PoolRecord p{name, "T", "any", size, 1, 16};
  p.sp_degree = sp_degree;
  return p;
}

// A pool and its members, as Head::on_create_pool applies them.
void create_pool(head::State& st, const std::string& name, int32_t size, int32_t sp_degree = 1) {
  st.apply_pool(pool_record(name, size, sp_degree));
  for (int32_t i = 0; i < size; ++i) {
    st.apply_actor(store::ActorRecord{st.next_actor, name, static_cast<uint32_t>(i), 0, false, {}});
  }
}

std::set<uint64_t> unplaced(const head::State& st, const std::string& pool) {
  auto it = st.unplaced.find(pool);
  return it == st.unplaced.end() ? std::set<uint64_t>{} : it->second;
}

TEST(HeadIndexes, NewMembersWaitForASlotUntilPlaced) {
  head::State st;
  create_pool(st, "a", 3);
  create_pool(st, "b", 1);
  EXPECT_EQ(unplaced(st, "a"), (std::set<uint64_t>{1, 2, 3}));
  EXPECT_EQ(unplaced(st, "b"), (std::set<uint64_t>{4}));

  // Placing: a new incarnation is journaled and applied, then the phase moves on.
  head::Actor& a = st.actors[2];
  store::ActorRecord rec = a.rec;
  rec.incarnation += 1;
  st.apply_actor(rec);
  st.set_phase(a, ActorPhase::kPlacing);
  EXPECT_EQ(unplaced(st, "a"), (std::set<uint64_t>{1, 3}));
  EXPECT_EQ(st.pools["a"].members, (std::vector<uint64_t>{1, 2, 3}));  // not listed twice
  st.set_phase(a, ActorPhase::kReady);
  EXPECT_EQ(unplaced(st, "a"), (std::set<uint64_t>{1, 3}));

  // Its node died, or it moved away on notice: it waits again.
  st.set_phase(a, ActorPhase::kPending);
  EXPECT_EQ(unplaced(st, "a"), (std::set<uint64_t>{1, 2, 3}));
}

TEST(HeadIndexes, CallsMarkTheirPoolAsWaiting) {
  head::State st;
  create_pool(st, "a", 1);
  create_pool(st, "b", 1);
  EXPECT_TRUE(st.waiting.empty());
  st.enqueue(st.pools["b"], 0, 7);
  st.enqueue(st.pools["b"], 0, 8, /*front=*/true);  // a lease that came back goes first
  EXPECT_EQ(st.waiting, (std::set<std::string>{"b"}));
  EXPECT_EQ(st.pools["b"].queue.ids(), (std::vector<uint64_t>{8, 7}));
}

TEST(HeadIndexes, OnlySequenceParallelPoolsAreListedForGroups) {
  head::State st;
  create_pool(st, "plain", 2);
  create_pool(st, "sp", 4, 2);
  EXPECT_EQ(st.sp_pools, (std::set<std::string>{"sp"}));
}

TEST(HeadIndexes, ARemovedPoolLeavesEveryIndex) {
  head::State st;
  create_pool(st, "sp", 2, 2);
  st.enqueue(st.pools["sp"], 0, 1);
  st.apply_remove_pool("sp");
  EXPECT_EQ(st.unplaced.count("sp"), 0u);
  EXPECT_EQ(st.waiting.count("sp"), 0u);
  EXPECT_EQ(st.sp_pools.count("sp"), 0u);
  EXPECT_TRUE(st.actors.empty());
}

store::TaskRecord queued_task(uint64_t id, const std::string& pool) {
  return testing::task_record(id, id, pool);
}

TEST(HeadIndexes, LeasesAreListedByTheirNodeWhileTheyLast) {
  head::State st;
  create_pool(st, "a", 1);
  for (uint64_t id : {1, 2, 3}) st.apply_accept(queued_task(id, "a"));
  EXPECT_TRUE(st.leased_on.empty()) << "waiting calls are nobody's lease";
  st.apply_lease(head::LeaseEvent{1, 10, 1, "n1"});
  st.apply_lease(head::LeaseEvent{2, 11, 1, "n1"});
  st.apply_lease(head::LeaseEvent{3, 12, 1, "n2"});
  EXPECT_EQ(st.leased_on["n1"], (std::unordered_set<uint64_t>{1, 2}));
  EXPECT_EQ(st.leased_ids("n2"), (std::vector<uint64_t>{3}));

  st.apply_requeue(head::RequeueEvent{1, false});  // its node died, say
  st.apply_finish(head::FinishEvent{2, true, 0, "", Blob{pack(2)}});
  EXPECT_EQ(st.leased_on.count("n1"), 0u) << "no lease left on n1";
  st.apply_lease(head::LeaseEvent{1, 13, 1, "n2"});  // leased again, elsewhere
  EXPECT_EQ(st.leased_on["n2"], (std::unordered_set<uint64_t>{1, 3}));
  st.apply_finish(head::FinishEvent{3, true, 0, "", Blob{pack(3)}});
  st.erase_task(st.tasks.find(3));
  EXPECT_EQ(st.leased_ids("n2"), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(st.leased_ids("n3").empty());
}

head::FinishEvent finished(uint64_t id) {
  return head::FinishEvent{id, true, 0, "", Blob{pack(id)}};
}

TEST(HeadIndexes, FinishedCallsAreListedByTheirCallerUntilReceived) {
  head::State st;
  create_pool(st, "a", 1);
  for (uint64_t id : {1, 2, 3, 4}) st.apply_accept(queued_task(id, "a"));  // client 1's
  store::TaskRecord other = queued_task(5, "a");
  other.caller = 2;
  st.apply_accept(other);
  EXPECT_TRUE(st.done_ids(1).empty()) << "nothing has finished";
  for (uint64_t id : {1, 2, 5}) st.apply_finish(finished(id));
  st.apply_finish(finished(2));  // finished twice (a stale copy's result): listed once
  EXPECT_EQ(st.done_ids(1), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(st.done_ids(2), (std::vector<uint64_t>{5}));

  st.apply_claim(head::ClaimEvent{2, 3});  // client 3 fetched it: its result is 3's now
  EXPECT_EQ(st.done_ids(1), (std::vector<uint64_t>{1}));
  EXPECT_EQ(st.done_ids(3), (std::vector<uint64_t>{2}));
  st.apply_forget({1});
  EXPECT_TRUE(st.done_ids(1).empty()) << "received: no longer listed";
  st.apply_finish(finished(3));
  EXPECT_EQ(st.done_ids(1), (std::vector<uint64_t>{3}));
}

// State::calls_of: what lets the head retire a gone client's record once it
// holds none of its calls, in any state.
TEST(HeadIndexes, CallsAreCountedByTheirCallerUntilForgotten) {
  head::State st;
  create_pool(st, "a", 1);
  st.apply_client(store::ClientRecord{"one", 1, 0});
  st.apply_client(store::ClientRecord{"three", 3, 0});
  for (uint64_t id : {1, 2, 3}) st.apply_accept(queued_task(id, "a"));  // client 1's
  st.apply_accept(queued_task(2, "a"));  // a row the journal repeats: counted once
  EXPECT_EQ(st.calls_by(1), 3u);
  st.apply_claim(head::ClaimEvent{3, 3});  // client 3 fetched it
  EXPECT_EQ(st.calls_by(1), 2u);
  EXPECT_EQ(st.calls_by(3), 1u);
  for (uint64_t id : {1, 2, 3}) st.apply_finish(finished(id));
  st.apply_forget({1, 2});
  EXPECT_EQ(st.calls_by(1), 0u) << "every call received";
  EXPECT_EQ(st.calls_of.count(1), 0u) << "no entry left behind";

  st.apply_retire_client("one");
  EXPECT_EQ(st.clients.count("one"), 0u);
  EXPECT_EQ(st.client_by_num.count(1), 0u);
  EXPECT_EQ(st.done_of.count(1), 0u);
  EXPECT_EQ(st.erased_clients, (std::vector<std::string>{"one"}));
  EXPECT_TRUE(st.meta_dirty());
  EXPECT_EQ(st.next_client, 4u) << "its number is not given out again";
  EXPECT_EQ(st.done_ids(3), (std::vector<uint64_t>{3})) << "the other client keeps what it fetched";
}

TEST(HeadIndexes, TheFinishedListStaysShortWhileResultsAreReceived) {
  head::State st;
  create_pool(st, "a", 1);
  const std::vector<uint64_t> kept = {7, 70000, 99999};  // never received
  for (uint64_t id = 1; id <= 100000; ++id) {
    st.apply_accept(queued_task(id, "a"));
    st.apply_finish(finished(id));
    if (std::find(kept.begin(), kept.end(), id) == kept.end()) st.apply_forget({id});
  }
  EXPECT_LE(st.done_of.at(1).ids.size(), 2048u) << "stale entries are trimmed as the list grows";
  EXPECT_EQ(st.done_ids(1), kept);
}

TEST(HeadIndexes, ARestartedHeadRebuildsThemFromItsStore) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("spotlight-indexes-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "head.db").string();
  {
    auto s = store::open_sqlite(path);
    s->open();
    head::Journal j;
    j.add(head::EventKind::kPool, pool_record("sp", 2, 2));
    j.add(head::EventKind::kActor, store::ActorRecord{1, "sp", 0, 0, false, {}});
    j.add(head::EventKind::kActor, store::ActorRecord{2, "sp", 1, 0, false, {}});
    j.add(head::EventKind::kActor, store::ActorRecord{1, "sp", 0, 1, false, {}});  // placed once
    j.add(head::EventKind::kAccept, queued_task((1ull << 40) | 1, "sp"));
    j.add(head::EventKind::kAccept, queued_task((1ull << 40) | 2, "sp"));
    j.add(head::EventKind::kLease, head::LeaseEvent{(1ull << 40) | 2, 5, 1, "n1"});
    j.add(head::EventKind::kAccept, queued_task((1ull << 40) | 3, "sp"));
    j.add(head::EventKind::kFinish, finished((1ull << 40) | 3));  // its caller has not received it
    s->append(j.bytes());
  }
  auto check = [](head::State& st) {
    // Every actor is pending after a restart (the head waits for its nodes to
    // say what they host), its call waits, and its pool forms groups.
    EXPECT_EQ(unplaced(st, "sp"), (std::set<uint64_t>{1, 2}));
    EXPECT_EQ(st.pools["sp"].members, (std::vector<uint64_t>{1, 2}));
    EXPECT_EQ(st.waiting, (std::set<std::string>{"sp"}));
    EXPECT_EQ(st.sp_pools, (std::set<std::string>{"sp"}));
    EXPECT_EQ(st.leased_ids("n1"), (std::vector<uint64_t>{(1ull << 40) | 2}));
    EXPECT_EQ(st.done_ids(1), (std::vector<uint64_t>{(1ull << 40) | 3}));
  };
  {
    // From the journal; then a compaction writes it all into the tables.
    auto s = store::open_sqlite(path);
    head::State st;
    st.recover(s->open());
    check(st);
    s->compact(st.compaction());
    s->finish_compaction();
  }
  head::State st;  // from the tables
  st.recover(store::open_sqlite(path)->open());
  check(st);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spotlight

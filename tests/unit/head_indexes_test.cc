// The head's work indexes (State::unplaced, waiting, sp_pools): the turn
// visits only what they list, so an actor or a call they missed would wait
// for ever. Each mutator must keep them in step, and a restarted head must
// rebuild them from its store.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "head/state.h"
#include "store/store.h"

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
    store::TaskRecord t;
    t.id = (1ull << 40) | 1;
    t.ord = 1;
    t.caller = 1;
    t.mailbox = "sp";
    t.method = "run";
    j.add(head::EventKind::kAccept, t);
    s->append(j.bytes());
  }
  head::State st;
  st.recover(store::open_sqlite(path)->open());
  // Every actor is pending after a restart (the head waits for its nodes to
  // say what they host), its call waits, and its pool forms groups.
  EXPECT_EQ(unplaced(st, "sp"), (std::set<uint64_t>{1, 2}));
  EXPECT_EQ(st.pools["sp"].members, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(st.waiting, (std::set<std::string>{"sp"}));
  EXPECT_EQ(st.sp_pools, (std::set<std::string>{"sp"}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spotlight

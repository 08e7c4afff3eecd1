// A compaction's snapshot taken over several turns (State::begin_snapshot,
// snapshot_step, take_snapshot): whatever the turns after its cut do to the
// tasks it has not copied yet, the tables hold the state at the cut, and the
// tables plus the journal after the cut give back the live state, whether
// the head finishes the compaction or dies halfway through.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "head/state.h"
#include "store/store.h"
#include "support/journal_turn.h"
#include "support/task_record.h"
#include "support/temp_dir.h"
#include "wire/child_ids.h"

namespace spotlight {
namespace {

using testing::JournalTurn;
constexpr uint64_t kTasks = 5000;
constexpr std::chrono::microseconds kNoTime{0};  // one step copies one slice of 1,024 records

// Each task as its row would hold it.
struct Picture {
  std::map<uint64_t, std::string> rows;
};

Picture picture(const head::State& st) {
  Picture p;
  for (const auto& [id, t] : st.tasks) p.rows[id] = pack(static_cast<const store::TaskRecord&>(t));
  return p;
}

void expect_same(const Picture& want, const Picture& got) {
  EXPECT_EQ(want.rows.size(), got.rows.size());
  size_t differ = 0;
  for (const auto& [id, row] : want.rows) {
    auto it = got.rows.find(id);
    if (it == got.rows.end() || it->second != row) ++differ;
  }
  EXPECT_EQ(differ, 0u) << "tasks missing or different";
}

class SnapshotTest : public ::testing::Test {
 protected:
  testing::TempDir dir_{"snapshot-test"};
  std::string path_ = dir_.path() + "/head.db";
  const uint64_t parent_ = kTasks;  // queued when its child call came
  const uint64_t child_ = wire::child_call_id(kTasks, 0, "p", "add", "a");
  std::set<uint64_t> owed_;  // the tasks changed since the first compaction, at the cut

  // Opens the store with pool "p" and tasks 1..kTasks (the last with a child
  // call), all written to the tables by a first compaction; then leases
  // tasks 1..3000 and finishes the child call and task 4200, begins a
  // second compaction (the cut) and copies one slice.
  std::unique_ptr<store::Store> open_and_begin(head::State& st) {
    auto s = store::open_sqlite(path_);
    st.recover(s->open());
    {
      JournalTurn t{*s, st, {}};
      t.pool(store::PoolRecord{"p", "T", "any", 1, 1, 16});
      for (uint64_t i = 1; i <= kTasks; ++i) t.accept(testing::task_record(i, i, "p"));
      store::TaskRecord child = testing::task_record(child_, kTasks + 1, "p");
      child.parent = parent_;
      t.accept(child);
    }
    s->compact(st.compaction());
    {
      JournalTurn t{*s, st, {}};
      for (uint64_t i = 1; i <= 3000; ++i) t.lease(i, i);  // owed in this order: 1..1024 first
      t.lease(child_, 9001);
      t.finish(child_);
      t.lease(4200, 9002);
      t.finish(4200);  // its row from the first compaction says queued
    }
    owed_ = std::set<uint64_t>(st.dirty_tasks.begin(), st.dirty_tasks.end());
    EXPECT_EQ(owed_.size(), 3002u);
    s->begin_compaction();
    st.begin_snapshot();
    EXPECT_TRUE(st.snapshot_pending());
    EXPECT_FALSE(st.snapshot_step(kNoTime)) << "3,002 tasks owed: one slice is not all";
    return s;
  }

  // Turns after the cut that change tasks already copied (up to 1,024) and
  // tasks still owed (above), erase some, and add new ones.
  void change_after_the_cut(store::Store& s, head::State& st) {
    {
      JournalTurn t{s, st, {}};
      t.finish(10, 10);  // copied already
      t.finish(2, 2);    // the same
      t.claim(2, 7);
      t.finish(2500, 25);  // owed
      t.commit(2600, 2600, "half");
      t.forget(4200, 1);  // owed, and erased before anything else changed it
      t.finish(2700, 27);
      t.forget(2700, 1);    // owed, changed, then erased
      t.forget(child_, 1);  // its parent still runs: kept, marked received
      t.requeue(2900);
      t.lease(4500, 9003);  // not owed: unchanged since the first compaction
      t.finish(4500, 45);
      t.forget(4500, 1);
    }
    EXPECT_FALSE(st.snapshot_step(kNoTime));
    {
      JournalTurn t{s, st, {}};
      for (uint64_t i = kTasks + 10; i < kTasks + 20; ++i)
        t.accept(testing::task_record(i, i, "p"));
      t.finish(2990, 29);  // still owed
    }
  }

  // open_and_begin, change_after_the_cut, then the snapshot finished and
  // handed to the store.
  std::unique_ptr<store::Store> compact_through_the_changes(head::State& st) {
    auto s = open_and_begin(st);
    change_after_the_cut(*s, st);
    while (!st.snapshot_step(kNoTime)) {
    }
    s->compact(st.take_snapshot());
    return s;
  }

  // Tasks change_after_the_cut changed (or made), and tasks it left alone.
  const std::vector<uint64_t> changed_ = {10, 2, 2500, 2990, kTasks + 10};
  const std::vector<uint64_t> unchanged_ = {11, 2000, 3500};
};

TEST_F(SnapshotTest, TheTablesHoldTheStateAtTheCut) {
  head::State st;
  auto s = open_and_begin(st);
  Picture at_cut = picture(st);
  std::erase_if(at_cut.rows, [&](const auto& row) { return !owed_.count(row.first); });
  change_after_the_cut(*s, st);
  while (!st.snapshot_step(kNoTime)) {
  }
  store::Compaction c = st.take_snapshot();
  EXPECT_FALSE(st.snapshot_pending());
  // Every task owed at the cut, each once, as it was then; nothing else.
  std::map<uint64_t, std::string> rows;
  for (const auto& t : c.upsert) {
    EXPECT_TRUE(rows.emplace(t.id, pack(t)).second) << "task " << t.id << " copied twice";
  }
  EXPECT_EQ(rows.size(), at_cut.rows.size());
  EXPECT_TRUE(rows == at_cut.rows) << "a row differs from its task at the cut";
  s->compact(std::move(c));
  s->finish_compaction();
  const Picture live = picture(st);
  s.reset();  // dies before the next compaction: the tables and the journal after the cut
  head::State again;
  again.recover(store::open_sqlite(path_)->open());
  expect_same(live, picture(again));
  EXPECT_EQ(again.tasks.count(4200), 0u) << "erased after the cut";
  EXPECT_EQ(again.tasks.count(2700), 0u);
  EXPECT_EQ(again.tasks.at(2600).checkpoint.data, "half");
  EXPECT_EQ(again.tasks.at(2).caller, 7u);
  EXPECT_TRUE(again.tasks.at(child_).received);
  EXPECT_EQ(again.tasks.at(2900).state, store::TaskState::kQueued);
  EXPECT_TRUE(again.tasks.count(kTasks + 19));
}

// A head that dies before the snapshot is complete leaves the tables as
// they were: both journal files replay.
TEST_F(SnapshotTest, AHeadThatDiesHalfwayLosesNothing) {
  head::State st;
  auto s = open_and_begin(st);
  change_after_the_cut(*s, st);
  EXPECT_TRUE(st.snapshot_pending());
  const Picture live = picture(st);
  s.reset();  // no compact(): the snapshot is lost with the head
  head::State again;
  again.recover(store::open_sqlite(path_)->open());
  expect_same(live, picture(again));
}

// The next compaction writes what changed after the cut, and erases the
// rows of the tasks that went since.
TEST_F(SnapshotTest, TheNextCompactionTakesWhatChangedAfterTheCut) {
  head::State st;
  auto s = compact_through_the_changes(st);
  {
    JournalTurn t{*s, st, {}};
    t.finish(1500, 15);
    t.forget(1500, 1);  // its row was written by the second compaction
  }
  store::Compaction next = st.compaction();
  // 4200 as it was at the cut, 2700 as it was when it changed, 4500 and
  // 1500 from earlier compactions.
  EXPECT_EQ(next.erase, (std::vector<uint64_t>{4200, 2700, 4500, 1500}));
  std::set<uint64_t> upserted;
  for (const auto& t : next.upsert) upserted.insert(t.id);
  for (uint64_t id : changed_) EXPECT_TRUE(upserted.count(id)) << id << " changed after the cut";
  for (uint64_t id : unchanged_)
    EXPECT_FALSE(upserted.count(id)) << id << " is unchanged since its row was written";
  s->compact(std::move(next));
  s->finish_compaction();
  const Picture live = picture(st);
  s.reset();
  store::Loaded l = store::open_sqlite(path_)->open();
  EXPECT_TRUE(l.journal.empty());
  head::State again;
  again.recover(std::move(l));
  expect_same(live, picture(again));
}

// A restarted head writes again only the rows of tasks that changed after
// the tables were written: those the journal replays, and those it changes.
TEST_F(SnapshotTest, ARestartWritesOnlyWhatChangedSinceTheTables) {
  {
    head::State st;
    compact_through_the_changes(st);
  }
  head::State st;
  auto s = store::open_sqlite(path_);
  st.recover(s->open());
  std::set<uint64_t> listed(st.dirty_tasks.begin(), st.dirty_tasks.end());
  // What the journal after the cut changed, replayed: not the other rows.
  for (uint64_t id : changed_) EXPECT_TRUE(listed.count(id)) << id << " changed after the cut";
  for (uint64_t id : unchanged_) EXPECT_FALSE(listed.count(id)) << id << " is as its row holds it";
  {
    JournalTurn t{*s, st, {}};
    t.lease(3500, 9004);
  }
  store::Compaction c = st.compaction();
  std::set<uint64_t> upserted;
  for (const auto& t : c.upsert) upserted.insert(t.id);
  EXPECT_TRUE(upserted.count(3500));
  EXPECT_FALSE(upserted.count(11) || upserted.count(2000));
  EXPECT_LT(c.upsert.size(), 100u) << "the loaded rows were written again";
  s->compact(std::move(c));
  s->finish_compaction();
  const Picture live = picture(st);
  s.reset();
  head::State again;
  again.recover(store::open_sqlite(path_)->open());
  expect_same(live, picture(again));
}

}  // namespace
}  // namespace spotlight

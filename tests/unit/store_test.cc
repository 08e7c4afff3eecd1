// The head's store: commit, reopen, reload; compaction; the head's state
// rebuilt from tables plus journal; refusal of unusable files.
#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "head/state.h"
#include "support/journal_turn.h"
#include "support/sqlite.h"
#include "support/task_record.h"
#include "wire/child_ids.h"

namespace spotlight {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spotlight-store-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "head.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  // The store at path_, opened, with pool "p" of accept_tasks(.., 3) in it and in `st`.
  std::unique_ptr<store::Store> open_with_three_tasks(head::State& st);
  fs::path dir_;
  std::string path_;
};

store::TaskRecord task(uint64_t id, uint64_t ord, const std::string& mailbox) {
  return testing::task_record(id, ord, mailbox);
}

// Journals and applies pool "p" and tasks 1..n queued in it, as one turn.
void accept_tasks(store::Store& s, head::State& st, uint64_t n) {
  head::Journal j;
  store::PoolRecord pool{"p", "T", "any", 1, 1, 16};
  j.add(head::EventKind::kPool, pool);
  st.apply_pool(pool);
  for (uint64_t i = 1; i <= n; ++i) {
    auto t = task(i, i, "p");
    j.add(head::EventKind::kAccept, t);
    st.apply_accept(t);
  }
  s.append(j.bytes());
}

TEST_F(StoreTest, CommitReopenReload) {
  {
    auto s = store::open_sqlite(path_);
    auto l = s->open();
    EXPECT_EQ(l.boot, 1u);
    EXPECT_TRUE(l.journal.empty());
    s->append("first");
    s->append(std::string("sec\0nd", 6));
    EXPECT_EQ(s->journal_entries(), 2u);
  }
  auto s = store::open_sqlite(path_);
  auto l = s->open();
  EXPECT_EQ(l.boot, 2u);
  ASSERT_EQ(l.journal.size(), 2u);
  EXPECT_EQ(l.journal[0], "first");
  EXPECT_EQ(l.journal[1], std::string("sec\0nd", 6));
  s->append("third");  // sequence numbers continue after a reopen
  s.reset();
  auto again = store::open_sqlite(path_)->open();
  ASSERT_EQ(again.journal.size(), 3u);
  EXPECT_EQ(again.journal[2], "third");
}


TEST_F(StoreTest, StateIsRebuiltFromJournal) {
  {
    auto s = store::open_sqlite(path_);
    s->open();
    head::State st;
    head::Journal j;
    store::PoolRecord pool{"counter", "Counter", "any", 1, 1, 16};
    j.add(head::EventKind::kPool, pool);
    j.add(head::EventKind::kActor, store::ActorRecord{1, "counter", 0, 0, false, {}});
    j.add(head::EventKind::kClient, store::ClientRecord{"client-x", 1});
    for (uint64_t i = 1; i <= 5; ++i) j.add(head::EventKind::kAccept, task((1ull << 40) | i, i, "counter"));
    s->append(j.bytes());
    j.clear();
    // Task 1 leased then finished and forgotten; task 2 leased (its node is gone after a restart);
    // task 3 finished, result not yet received by its caller.
    j.add(head::EventKind::kLease, head::LeaseEvent{(1ull << 40) | 1, 10, 1, "n1"});
    j.add(head::EventKind::kFinish, head::FinishEvent{(1ull << 40) | 1, true, 0, "", Blob{pack(1)}});
    j.add(head::EventKind::kForget, std::vector<uint64_t>{(1ull << 40) | 1});
    j.add(head::EventKind::kLease, head::LeaseEvent{(1ull << 40) | 2, 11, 1, "n1"});
    j.add(head::EventKind::kLease, head::LeaseEvent{(1ull << 40) | 3, 12, 1, "n1"});
    j.add(head::EventKind::kFinish, head::FinishEvent{(1ull << 40) | 3, true, 0, "", Blob{pack(3)}});
    s->append(j.bytes());
  }
  auto s = store::open_sqlite(path_);
  head::State st;
  st.recover(s->open());
  ASSERT_EQ(st.pools.count("counter"), 1u);
  EXPECT_EQ(st.pools["counter"].members, std::vector<uint64_t>{1});
  EXPECT_EQ(st.tasks.size(), 4u);  // 2, 3, 4, 5
  EXPECT_EQ(st.tasks.count((1ull << 40) | 1), 0u);
  EXPECT_EQ(st.tasks[(1ull << 40) | 3].state, store::TaskState::kDone);
  EXPECT_EQ(unpack<int>(st.tasks[(1ull << 40) | 3].result.data), 3);
  // Queued tasks are back in their mailbox in arrival order; the leased one
  // keeps its lease, for its node to report on (or for the head to re-queue).
  std::vector<uint64_t> expect{(1ull << 40) | 4, (1ull << 40) | 5};
  EXPECT_EQ(st.pools["counter"].queue.ids(), expect);
  EXPECT_EQ(st.tasks[(1ull << 40) | 2].state, store::TaskState::kLeased);
  EXPECT_EQ(st.tasks[(1ull << 40) | 2].epoch, 11u);
  EXPECT_EQ(st.tasks[(1ull << 40) | 2].node, "n1");
  EXPECT_EQ(st.tasks[(1ull << 40) | 2].attempts, 1u);
  EXPECT_EQ(st.next_epoch, 13u);  // new leases never reuse an old epoch
  EXPECT_EQ(st.next_client, 2u);
  EXPECT_EQ(st.clients["client-x"].rec.num, 1u);
}

TEST_F(StoreTest, CompactionReplacesTheJournal) {
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());
    accept_tasks(*s, st, 100);
    s->compact(st.compaction());
    EXPECT_EQ(s->journal_entries(), 0u);
    // After the compaction: 60 finish and are forgotten, only journaled.
    head::Journal j;
    std::vector<uint64_t> gone;
    for (uint64_t i = 1; i <= 60; ++i) {
      head::FinishEvent f{i, true, 0, "", Blob{pack(i)}};
      j.add(head::EventKind::kFinish, f);
      st.apply_finish(f);
      gone.push_back(i);
    }
    j.add(head::EventKind::kForget, gone);
    st.apply_forget(gone);
    s->append(j.bytes());
    s->compact(st.compaction());  // deletes the 60 rows written by the first compaction
  }
  auto s = store::open_sqlite(path_);
  auto l = s->open();
  EXPECT_TRUE(l.journal.empty());
  EXPECT_EQ(l.tasks.size(), 40u);
  head::State st;
  st.recover(std::move(l));
  EXPECT_EQ(st.pools["p"].queue.size(), 40u);
  EXPECT_EQ(st.pools["p"].queue.ids().front(), 61u);
}

// Pools, actors and clients are written when they change, not all of them
// at every compaction; removed ones leave the tables.
TEST_F(StoreTest, ACompactionWritesOnlyThePoolsActorsAndClientsThatChanged) {
  auto pool = [](const std::string& name) {
    return store::PoolRecord{.name = name, .type = "T", .market = "any"};
  };
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());
    head::Journal j;
    auto add = [&](head::EventKind k, const auto& rec, auto apply) {
      j.add(k, rec);
      (st.*apply)(rec);
    };
    add(head::EventKind::kClient, store::ClientRecord{"c1", 1, 0}, &head::State::apply_client);
    add(head::EventKind::kPool, pool("a"), &head::State::apply_pool);
    add(head::EventKind::kPool, pool("b"), &head::State::apply_pool);
    for (auto [id, name] : {std::pair<uint64_t, const char*>{1, "a"}, {2, "a"}, {3, "b"}})
      add(head::EventKind::kActor, store::ActorRecord{id, name, 0, 0, false, {}},
          &head::State::apply_actor);
    s->append(j.bytes());
    store::Compaction first = st.compaction();
    EXPECT_EQ(first.pools.size(), 2u);
    EXPECT_EQ(first.actors.size(), 3u);
    s->compact(std::move(first));
    s->finish_compaction();

    // Actor 1 placed again; pool b removed and made anew with actor 4; a new client.
    j.clear();
    add(head::EventKind::kActor, store::ActorRecord{1, "a", 0, 1, false, {}},
        &head::State::apply_actor);
    j.add(head::EventKind::kRemovePool, std::string("b"));
    st.apply_remove_pool("b");
    add(head::EventKind::kPool, pool("b"), &head::State::apply_pool);
    add(head::EventKind::kActor, store::ActorRecord{4, "b", 0, 0, false, {}},
        &head::State::apply_actor);
    add(head::EventKind::kClient, store::ClientRecord{"c2", 2, 0}, &head::State::apply_client);
    j.add(head::EventKind::kRetireClient, std::string("c1"));  // gone, with no call left
    st.apply_retire_client("c1");
    s->append(j.bytes());
    store::Compaction second = st.compaction();
    ASSERT_EQ(second.pools.size(), 1u);
    EXPECT_EQ(second.pools[0].name, "b");
    ASSERT_EQ(second.actors.size(), 2u);
    EXPECT_EQ(second.actors[0].id, 1u);
    EXPECT_EQ(second.actors[0].incarnation, 1u);
    EXPECT_EQ(second.actors[1].id, 4u);
    // c2, and the row that keeps retired number 1's highest sequence.
    ASSERT_EQ(second.clients.size(), 2u);
    EXPECT_EQ(second.clients[0].uuid, "c2");
    EXPECT_EQ(second.clients[1].uuid, head::State::retired_uuid(1));
    EXPECT_EQ(second.clients[1].num, 1u);
    EXPECT_EQ(second.erase_pools, (std::vector<std::string>{"b"}));
    EXPECT_EQ(second.erase_actors, (std::vector<uint64_t>{3}));
    EXPECT_EQ(second.erase_clients, (std::vector<std::string>{"c1"}));
    s->compact(std::move(second));
    s->finish_compaction();
    EXPECT_FALSE(st.meta_dirty());
  }
  auto l = store::open_sqlite(path_)->open();
  EXPECT_TRUE(l.journal.empty());
  std::set<std::string> pools;
  for (const auto& p : l.pools) pools.insert(p.name);
  EXPECT_EQ(pools, (std::set<std::string>{"a", "b"}));
  std::map<uint64_t, uint32_t> incarnations;
  for (const auto& a : l.actors) incarnations[a.id] = a.incarnation;
  EXPECT_EQ(incarnations, (std::map<uint64_t, uint32_t>{{1, 1}, {2, 0}, {4, 0}}))
      << "3 left with b";
  std::set<std::string> clients;
  for (const auto& c : l.clients) clients.insert(c.uuid);
  EXPECT_EQ(clients, (std::set<std::string>{"c2", head::State::retired_uuid(1)}))
      << "c1 was retired";
  // Loaded, the retired number is no client, and its next holder starts
  // above its sequence.
  head::State st;
  st.recover(std::move(l));
  EXPECT_EQ(st.clients.size(), 1u);
  EXPECT_EQ(st.client_by_num.count(1), 0u);
  EXPECT_EQ(st.retired_seqs.count(1), 1u);
  st.apply_client(store::ClientRecord{"c3", 1, st.retired_seqs.at(1)});
  EXPECT_EQ(st.retired_seqs.count(1), 0u);
  EXPECT_EQ(st.compaction().erase_clients,
            (std::vector<std::string>{head::State::retired_uuid(1)}));
}

// The journal files beside the store (PATH.journal.N and their WALs).
std::vector<fs::path> journal_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("head.db.journal.", 0) == 0) out.push_back(e.path());
  }
  return out;
}

uintmax_t bytes_of(const std::vector<fs::path>& files) {
  uintmax_t n = 0;
  for (const auto& f : files) n += fs::file_size(f);
  return n;
}

// A compaction moves the journal to a new file and drops the old one once
// the tables are written.
TEST_F(StoreTest, CompactionStartsAnEmptyJournalFile) {
  auto s = store::open_sqlite(path_);
  head::State st;
  st.recover(s->open());
  const std::string big(64 << 10, 'j');
  for (int i = 0; i < 32; ++i) s->append(big);
  EXPECT_EQ(s->journal_bytes(), 32u * big.size());
  EXPECT_GT(bytes_of(journal_files(dir_)), 32u * big.size());
  s->compact(st.compaction());
  EXPECT_EQ(s->journal_entries(), 0u);
  EXPECT_EQ(s->journal_bytes(), 0u);
  s->finish_compaction();
  EXPECT_FALSE(s->compacting());
  EXPECT_LT(bytes_of(journal_files(dir_)), 64u << 10);
  s->append("after");
  s.reset();
  EXPECT_EQ(store::open_sqlite(path_)->open().journal, std::vector<std::string>{"after"});
}

// Appends go on while the tables are written, and a restart finds them.
TEST_F(StoreTest, AppendsDuringACompactionAreKept) {
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());
    accept_tasks(*s, st, 20000);  // tables big enough to take a while
    s->compact(st.compaction());
    EXPECT_TRUE(s->compacting());  // 20,000 rows to write: the thread has barely begun
    for (int i = 0; i < 100; ++i) s->append("during-" + std::to_string(i));
  }  // the store waits for its compaction as it closes
  auto l = store::open_sqlite(path_)->open();
  EXPECT_EQ(l.tasks.size(), 20000u);
  ASSERT_EQ(l.journal.size(), 100u);
  EXPECT_EQ(l.journal.front(), "during-0");
  EXPECT_EQ(l.journal.back(), "during-99");
}

std::unique_ptr<store::Store> StoreTest::open_with_three_tasks(head::State& st) {
  auto s = store::open_sqlite(path_);
  st.recover(s->open());
  accept_tasks(*s, st, 3);
  return s;
}

// `l` holds `entries` journal entries, the last one `tail` (not events); the
// store as a whole rebuilds pool "p" of accept_tasks(.., 3).
void expect_three_queued_then(store::Loaded l, size_t entries, const std::string& tail) {
  ASSERT_EQ(l.journal.size(), entries);
  EXPECT_EQ(l.journal.back(), tail);
  l.journal.pop_back();
  head::State st;
  st.recover(std::move(l));
  EXPECT_EQ(st.pools["p"].queue.size(), 3u);
}

// A head that dies after a compaction's commit but before it dropped the old
// journal file leaves entries that the tables already hold: a restart skips
// them by number, and appends after them.
TEST_F(StoreTest, EntriesFoldedByACompactionAreNotReplayed) {
  const fs::path saved = dir_ / "saved";
  fs::create_directories(saved);
  {
    head::State st;
    auto s = open_with_three_tasks(st);
    // What a head killed mid-compaction leaves: the old journal file.
    for (const auto& f : journal_files(dir_)) fs::copy_file(f, saved / f.filename());
    s->compact(st.compaction());
  }
  for (const auto& f : fs::directory_iterator(saved))
    fs::copy_file(f.path(), dir_ / f.path().filename());
  {
    auto s = store::open_sqlite(path_);
    auto l = s->open();
    EXPECT_TRUE(l.journal.empty()) << "replaying the folded accepts would queue each task twice";
    EXPECT_EQ(l.tasks.size(), 3u);
    s->append("next");
  }
  expect_three_queued_then(store::open_sqlite(path_)->open(), 1, "next");
}

// A head killed after the switch to a new journal file but before the tables
// were committed: the restart replays the old file, then the new one.
TEST_F(StoreTest, AHeadKilledBeforeTheTablesAreWrittenReplaysBothFiles) {
  const fs::path before = dir_ / "before";
  fs::create_directories(before);
  {
    head::State st;
    open_with_three_tasks(st);
  }
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.is_regular_file()) fs::copy_file(e.path(), before / e.path().filename());
  }
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());
    s->compact(st.compaction());
    s->finish_compaction();
    s->append("after");
  }
  // The tables and the old journal file as they were before the compaction,
  // the new journal file as the compaction left it.
  for (const auto& e : fs::directory_iterator(before)) {
    fs::copy_file(e.path(), dir_ / e.path().filename(), fs::copy_options::overwrite_existing);
  }
  auto l = store::open_sqlite(path_)->open();
  EXPECT_TRUE(l.tasks.empty());
  expect_three_queued_then(std::move(l), 2, "after");
}

// A compaction whose tables cannot be written (a trigger makes SQLite refuse
// them: a real failure, no hook in the store) leaves the store refusing
// writes, with the reason, since the head has let go of that snapshot. The
// journal files stay, so a restart on the mended file loses nothing: neither
// the entries the compaction was folding nor those appended beside it.
TEST_F(StoreTest, AFailedCompactionStopsWritesAndLosesNothing) {
  store::open_sqlite(path_)->open();  // creates the tables
  testing::exec_sqlite(path_, testing::kFailTaskInserts);
  bool beside = true;
  {
    head::State st;
    auto s = open_with_three_tasks(st);
    s->compact(st.compaction());
    // Accepted while the thread is still writing, refused once it has failed:
    // either way nothing accepted may be lost.
    try {
      s->append("beside");
    } catch (const std::runtime_error&) {
      beside = false;
    }
    try {
      s->finish_compaction();
      FAIL() << "the compaction should have failed";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("injected fault"), std::string::npos) << e.what();
    }
    EXPECT_THROW(s->append("refused"), std::runtime_error);
    EXPECT_THROW(s->compact(st.compaction()), std::runtime_error);
    EXPECT_FALSE(s->compacting());
  }
  testing::exec_sqlite(path_, "DROP TRIGGER fail");
  auto l = store::open_sqlite(path_)->open();
  EXPECT_TRUE(l.tasks.empty()) << "the failed transaction was rolled back";
  if (beside) {
    expect_three_queued_then(std::move(l), 2, "beside");
  } else {
    ASSERT_EQ(l.journal.size(), 1u);
    head::State st;
    st.recover(std::move(l));
    EXPECT_EQ(st.pools["p"].queue.size(), 3u);
  }
}

// A schema-3 store kept its journal in one file, PATH.journal: read as file 0.
TEST_F(StoreTest, ASchemaThreeJournalFileIsRead) {
  store::open_sqlite(path_)->open();
  for (const auto& f : journal_files(dir_)) fs::remove(f);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "UPDATE meta SET value = 3 WHERE key = 'schema'", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  ASSERT_EQ(sqlite3_open((path_ + ".journal").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE journal(seq INTEGER PRIMARY KEY, events BLOB);"
                         "INSERT INTO journal VALUES(1, 'three-1'), (2, 'three-2');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  {
    auto s = store::open_sqlite(path_);
    auto l = s->open();
    EXPECT_EQ(l.journal, (std::vector<std::string>{"three-1", "three-2"}));
    s->append("four-3");
    s->compact(store::Compaction{});
    s->finish_compaction();
  }
  EXPECT_FALSE(fs::exists(path_ + ".journal"));
  EXPECT_TRUE(store::open_sqlite(path_)->open().journal.empty());
}

// A store written before the journal had its own file (schema 2): its journal
// rows are read, and the first compaction folds them.
TEST_F(StoreTest, ASchemaTwoStoreIsReadAndUpgraded) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const char* sql =
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER);"
        "CREATE TABLE pools(name TEXT PRIMARY KEY, rec BLOB);"
        "CREATE TABLE actors(id INTEGER PRIMARY KEY, rec BLOB);"
        "CREATE TABLE clients(uuid TEXT PRIMARY KEY, rec BLOB);"
        "CREATE TABLE tasks(id INTEGER PRIMARY KEY, rec BLOB);"
        "CREATE TABLE journal(seq INTEGER PRIMARY KEY, events BLOB);"
        "INSERT INTO meta VALUES('schema', 2), ('boot', 4);"
        "INSERT INTO journal VALUES(1, 'old-1'), (2, 'old-2');";
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  {
    auto s = store::open_sqlite(path_);
    auto l = s->open();
    EXPECT_EQ(l.boot, 5u);
    EXPECT_EQ(l.journal, (std::vector<std::string>{"old-1", "old-2"}));
    s->append("new-3");
  }
  {
    auto s = store::open_sqlite(path_);
    auto l = s->open();
    EXPECT_EQ(l.journal, (std::vector<std::string>{"old-1", "old-2", "new-3"}));
    s->compact(store::Compaction{});
    s->append("new-4");
  }
  auto l = store::open_sqlite(path_)->open();
  EXPECT_EQ(l.journal, std::vector<std::string>{"new-4"});
}

// A record as a head that knew only its first fields wrote it: the packed
// array without its last `dropped` fields, read back.
template <class T>
T older_layout(const std::string& bytes, uint32_t dropped) {
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  msgpack::object o = oh.get();
  EXPECT_EQ(o.type, msgpack::type::ARRAY);
  o.via.array.size -= dropped;
  return o.as<T>();
}

// Rows written before TaskRecord gained deadline_ms (its last field) lack
// it: they load with no deadline and every other field intact.
TEST(TaskRecordLayout, ARowWithoutTheDeadlineLoadsWithNone) {
  store::TaskRecord t = task(7, 3, "p");
  t.attempts = 2;
  t.deadline_ms = 1234;
  const std::string bytes = pack(t);
  // The layout before the deadline (and the fields after it).
  const auto old = older_layout<store::TaskRecord>(bytes, 5);
  EXPECT_EQ(old.deadline_ms, 0);
  EXPECT_EQ(old.id, 7u);
  EXPECT_EQ(old.attempts, 2u);
  EXPECT_EQ(old.args.data, t.args.data);
  EXPECT_EQ(unpack<store::TaskRecord>(bytes).deadline_ms, 1234);
}

// Rows written before TaskRecord gained parent and received load as a
// driver's calls.
TEST(TaskRecordLayout, ARowWithoutTheParentLoadsAsADriversCall) {
  store::TaskRecord t = task(7, 3, "p");
  t.deadline_ms = 1234;
  t.parent = 99;
  t.received = true;
  const std::string bytes = pack(t);
  // The layout before the parent (and the fields after it).
  const auto old = older_layout<store::TaskRecord>(bytes, 4);
  EXPECT_EQ(old.parent, 0u);
  EXPECT_FALSE(old.received);
  EXPECT_EQ(old.deadline_ms, 1234);
  const auto now = unpack<store::TaskRecord>(bytes);
  EXPECT_EQ(now.parent, 99u);
  EXPECT_TRUE(now.received);
}

// Rows written before TaskRecord gained a priority load with priority 0.
TEST(TaskRecordLayout, ARowWithoutThePriorityLoadsWithZero) {
  store::TaskRecord t = task(7, 3, "p");
  t.parent = 99;
  t.priority = -4;
  const std::string bytes = pack(t);
  // The layout before the priority (and the accept time after it).
  const auto old = older_layout<store::TaskRecord>(bytes, 2);
  EXPECT_EQ(old.priority, 0);
  EXPECT_EQ(old.parent, 99u);
  EXPECT_EQ(unpack<store::TaskRecord>(bytes).priority, -4);
}

// Rows written before TaskRecord kept its accept time load with 0, which
// the head reads as its own start (Head::accepted_ms).
TEST(TaskRecordLayout, ARowWithoutTheAcceptTimeLoadsWithZero) {
  store::TaskRecord t = task(7, 3, "p");
  t.priority = -4;
  t.accepted_ms = 1764000000123;
  const std::string bytes = pack(t);
  const auto old = older_layout<store::TaskRecord>(bytes, 1);
  EXPECT_EQ(old.accepted_ms, 0);
  EXPECT_EQ(old.priority, -4);
  EXPECT_EQ(unpack<store::TaskRecord>(bytes).accepted_ms, 1764000000123);
}

// Pools stored before Placement::aging, max_per_node and prefer load with
// strict priorities, no limit per node and no preferred node.
TEST(PoolRecordLayout, ARowWithoutAgingOrAffinityLoadsWithout) {
  store::PoolRecord p{"p", "T", "spot", 4, 1, 16, 2, "pack", "node-a", 5000, 1, "node-a"};
  const std::string bytes = pack(p);
  const auto old = older_layout<store::PoolRecord>(bytes, 7);  // as a schema-8 head wrote it
  EXPECT_EQ(old.aging_ms, 0);
  EXPECT_EQ(old.max_per_node, 0);
  EXPECT_EQ(old.prefer, "");
  EXPECT_EQ(old.node, "node-a");
  const auto now = unpack<store::PoolRecord>(bytes);
  EXPECT_EQ(now.aging_ms, 5000);
  EXPECT_EQ(now.max_per_node, 1);
  EXPECT_EQ(now.prefer, "node-a");
}

// Pools stored before Placement::beside, beside_soft, away_from and preempt
// load with none of them.
TEST(PoolRecordLayout, ARowWithoutPoolAffinityLoadsWithout) {
  store::PoolRecord p{"p", "T", "spot", 4,        1,           16,        1,    "spread",
                      "",  0,   1,      "node-a", "explorers", "trainer", true, true};
  const std::string bytes = pack(p);
  const auto old = older_layout<store::PoolRecord>(bytes, 4);  // as a schema-9 head wrote it
  EXPECT_EQ(old.beside, "");
  EXPECT_EQ(old.away_from, "");
  EXPECT_FALSE(old.preempt);
  EXPECT_FALSE(old.beside_soft);
  EXPECT_EQ(old.prefer, "node-a");
  EXPECT_EQ(old.max_per_node, 1);
  const auto now = unpack<store::PoolRecord>(bytes);
  EXPECT_EQ(now.beside, "explorers");
  EXPECT_EQ(now.away_from, "trainer");
  EXPECT_TRUE(now.preempt);
  EXPECT_TRUE(now.beside_soft);
}

TEST(PoolRecordLayout, ARowWithoutThePlacementLoadsAsSpreadAnywhere) {
  store::PoolRecord p{"p", "T", "spot", 4, 1, 16, 2, "pack", "node-a"};
  const std::string bytes = pack(p);
  const auto old = older_layout<store::PoolRecord>(bytes, 9);  // as a schema-6 head wrote it
  EXPECT_EQ(old.strategy, "spread");
  EXPECT_EQ(old.node, "");
  EXPECT_EQ(old.sp_degree, 2);
  const auto now = unpack<store::PoolRecord>(bytes);
  EXPECT_EQ(now.strategy, "pack");
  EXPECT_EQ(now.node, "node-a");
}

// A restarted head rebuilds each mailbox by priority, in arrival order within
// a priority, from the journal and from the compacted tables alike; a call
// whose lease was revoked keeps its place by arrival.
TEST_F(StoreTest, MailboxesAreRebuiltByPriority) {
  const std::vector<int32_t> priority{0, 2, 0, -1, 2, 0};  // of tasks 1..6
  {
    auto s = store::open_sqlite(path_);
    s->open();
    head::Journal j;
    j.add(head::EventKind::kPool, store::PoolRecord{"p", "T", "any", 1, 1, 16});
    for (uint64_t i = 1; i <= priority.size(); ++i) {
      auto t = task(i, i, "p");
      t.priority = priority[i - 1];
      j.add(head::EventKind::kAccept, t);
    }
    j.add(head::EventKind::kLease, head::LeaseEvent{2, 1, 1, "n1"});
    j.add(head::EventKind::kRequeue, head::RequeueEvent{2, false});
    j.add(head::EventKind::kLease, head::LeaseEvent{1, 2, 1, "n1"});
    s->append(j.bytes());
  }
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());  // from the journal
    EXPECT_EQ(st.pools["p"].queue.ids(), (std::vector<uint64_t>{2, 5, 3, 6, 4}));
    EXPECT_EQ(st.tasks[1].state, store::TaskState::kLeased);
    // Task 1's node is gone: it goes back to the front of priority 0.
    head::Journal j;
    const head::RequeueEvent back{1, false};
    j.add(head::EventKind::kRequeue, back);
    st.apply_requeue(back);
    s->append(j.bytes());
    s->compact(st.compaction());
    s->finish_compaction();
    head::Journal after;
    after.add(head::EventKind::kAccept, task(7, 7, "p"));  // priority 0, last
    s->append(after.bytes());
  }
  auto s = store::open_sqlite(path_);
  head::State st;
  st.recover(s->open());  // from the tables and one journal entry
  EXPECT_EQ(st.pools["p"].queue.ids(), (std::vector<uint64_t>{2, 5, 1, 3, 6, 7, 4}));
  EXPECT_EQ(st.pools["p"].queue.depths(),
            (std::vector<std::pair<int32_t, uint64_t>>{{2, 2}, {0, 4}, {-1, 1}}));
}

// A turn's accepts share one kClock stamp in the journal: replayed, each
// call gets its entry's time; through a compaction the time is in the row;
// a record that carries its own time keeps it; an entry without a stamp
// (written before kClock existed) leaves 0, which the head reads as its boot.
TEST_F(StoreTest, AcceptTimesComeFromTheirEntrysClock) {
  {
    auto s = store::open_sqlite(path_);
    s->open();
    head::Journal j;
    j.add(head::EventKind::kPool, store::PoolRecord{"p", "T", "any", 1, 1, 16});
    j.add(head::EventKind::kClock, int64_t{1764000000000});
    j.add(head::EventKind::kAccept, task(1, 1, "p"));
    auto own = task(2, 2, "p");
    own.accepted_ms = 1763000000000;
    j.add(head::EventKind::kAccept, own);
    s->append(j.bytes());
    head::Journal later;
    later.add(head::EventKind::kClock, int64_t{1764000005000});
    later.add(head::EventKind::kAccept, task(3, 3, "p"));
    s->append(later.bytes());
    head::Journal unstamped;
    unstamped.add(head::EventKind::kAccept, task(4, 4, "p"));
    s->append(unstamped.bytes());
  }
  auto times = [](head::State& st) {
    std::vector<int64_t> out;
    for (uint64_t id = 1; id <= 4; ++id) out.push_back(st.tasks.at(id).accepted_ms);
    return out;
  };
  const std::vector<int64_t> want{1764000000000, 1763000000000, 1764000005000, 0};
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());  // from the journal
    EXPECT_EQ(times(st), want);
    s->compact(st.compaction());
    s->finish_compaction();
  }
  auto s = store::open_sqlite(path_);
  head::State st;
  st.recover(s->open());  // from the tables
  EXPECT_EQ(times(st), want);
}

// The calls a task makes stay after their results are received, until the
// task is done, so that a second run of it gets them back: in the live
// state, through a compaction and a restart, and when the journal is replayed.
TEST_F(StoreTest, ATasksCallsStayUntilItIsDone) {
  const uint64_t parent = (1ull << 40) | 1;
  const uint64_t child = wire::child_call_id(parent, 0, "p", "add", "a");
  const uint64_t late = wire::child_call_id(parent, 1, "p", "add", "b");
  auto child_of = [&](uint64_t id, uint64_t ord) {
    store::TaskRecord t = task(id, ord, "p");
    t.caller = 2;  // the parent's node's client
    t.parent = parent;
    return t;
  };
  using Turn = testing::JournalTurn;
  {
    auto s = store::open_sqlite(path_);
    s->open();
    head::State st;
    {
      Turn t{*s, st, {}};
      t.pool(store::PoolRecord{"p", "T", "any", 1, 1, 16});
      t.accept(task(parent, 1, "p"));
      t.lease(parent, 10);
      t.accept(child_of(child, 2));
      t.accept(child_of(late, 3));
      t.finish(child);
      t.forget(child, 2);
    }
    ASSERT_TRUE(st.tasks.count(child));
    EXPECT_TRUE(st.tasks.at(child).received) << "received while its parent runs: kept";
    s->compact(st.compaction());
    s->finish_compaction();
  }
  {
    auto s = store::open_sqlite(path_);
    head::State st;
    st.recover(s->open());
    ASSERT_TRUE(st.tasks.count(child)) << "the compaction dropped a kept call";
    EXPECT_TRUE(st.tasks.at(child).received);
    Turn t{*s, st, {}};
    t.finish(parent);
    EXPECT_FALSE(st.tasks.count(child)) << "kept after its parent was done";
    EXPECT_TRUE(st.tasks.count(late)) << "not received yet: its caller still waits";
    t.finish(late);
    t.forget(late, 2);
    EXPECT_FALSE(st.tasks.count(late)) << "received after its parent was done: dropped at once";
  }
  head::State st;
  st.recover(store::open_sqlite(path_)->open());  // the same, from the tables and the journal
  EXPECT_EQ(st.tasks.size(), 1u);
  EXPECT_TRUE(st.tasks.count(parent));
  EXPECT_TRUE(st.children.empty());
}

TEST_F(StoreTest, AStoreFromANewerHeadIsRefused) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER);"
                           "INSERT INTO meta VALUES('schema', 99);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  try {
    store::open_sqlite(path_);
    FAIL() << "a schema-99 store was opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema 99"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, SecondHeadOnTheSameStoreIsRefused) {
  auto first = store::open_sqlite(path_);
  first->open();
  try {
    store::open_sqlite(path_);
    FAIL() << "two heads opened one store";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another head"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, NotAStoreIsRefusedClearly) {
  std::ofstream(path_) << "this is not a database, just text that is long enough to look like a header";
  EXPECT_THROW(store::open_sqlite(path_), std::runtime_error);
  EXPECT_THROW(store::open_sqlite((dir_ / "missing-dir" / "x.db").string()), std::runtime_error);
}

TEST_F(StoreTest, CorruptJournalEntryIsReported) {
  {
    auto s = store::open_sqlite(path_);
    s->open();
    s->append(pack(std::make_tuple(1, 2, 3)));  // not [kind, body]
  }
  head::State st;
  EXPECT_THROW(st.recover(store::open_sqlite(path_)->open()), std::runtime_error);
}

}  // namespace
}  // namespace spotlight

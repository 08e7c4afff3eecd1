// SQLite implementation of the store: WAL mode, exclusive locking (one head
// per store file), prepared statements, one transaction per append.
//
// PATH holds the tables (and the meta), PATH.journal.N the journal: a new
// file N at each start and each compaction. A compaction switches to a new
// file at once, then writes the tables on a thread of its own and deletes
// the older files. Deleting journal rows instead made SQLite read back every
// page of them to free it: 3.3 s for 4,096 turns of pipelined calls, during
// which the head answered nobody and its nodes took it for gone; and a
// backlog of 400,000 queued calls took the head's thread 1 s to write out.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <utility>

#include "store/store.h"

namespace spotlight::store {
namespace {

// 2: task checkpoints and attempt limits; 3: the journal in one file of its
// own, PATH.journal; 4: in numbered files, PATH.journal.N; 5: Claim events,
// task deadlines and clients' high-water marks (fields an older head would
// not read); 6: task priorities (the same); 7: pools' placement strategy and node (the
// same); 8: RetireClient events (an older head could not replay them); 9: tasks' accept
// times, pools' priority aging, max_per_node and prefer (fields an older head would drop); 10:
// pools' beside, beside_soft, away_from and preempt (the same). Older layouts are read (a schema-2
// store's journal rows, a schema-3 PATH.journal as file 0) and folded by the first compaction.
constexpr int kSchemaVersion = 10;
constexpr int kOldestReadable = 2;

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("store: cannot prepare '") + sql +
                               "': " + sqlite3_errmsg(db));
    }
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  sqlite3_stmt* get() { return s_; }
  void bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, std::string_view v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  // Runs to completion; throws on error.
  void run(sqlite3* db) {
    int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
      throw std::runtime_error(std::string("store: write failed: ") + sqlite3_errmsg(db));
    }
  }

 private:
  sqlite3_stmt* s_ = nullptr;
};

std::string column_blob(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  int n = sqlite3_column_bytes(s, i);
  return p ? std::string(static_cast<const char*>(p), n) : std::string();
}

template <class T>
std::vector<T> read_records(sqlite3* db, const char* sql) {
  std::vector<T> out;
  Stmt q(db, sql);
  while (sqlite3_step(q.get()) == SQLITE_ROW) out.push_back(unpack<T>(column_blob(q.get(), 0)));
  return out;
}

// Runs one statement on `db`; throws with the statement and SQLite's reason.
void exec_on(sqlite3* db, const std::string& path, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    if (msg.find("locked") != std::string::npos || msg.find("busy") != std::string::npos) {
      msg += " (is another head running on this store?)";
    }
    throw std::runtime_error("store " + path + ": " + sql + ": " + msg);
  }
}

sqlite3* open_db(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string err = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw std::runtime_error("store: cannot open " + path + ": " + err);
  }
  sqlite3_busy_timeout(db, 2000);
  return db;
}

void set_modes(sqlite3* db, const std::string& path, Durability d) {
  exec_on(db, path, "PRAGMA locking_mode=EXCLUSIVE");
  exec_on(db, path, "PRAGMA journal_mode=WAL");
  exec_on(db, path,
          d == Durability::kMachine ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
}

std::filesystem::path directory_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
}

// The directory's own entry for a file just created reaches the disk only
// with an fsync of the directory.
void sync_directory_of(const std::string& path) {
  const std::string dir = directory_of(path).string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw std::runtime_error("store: cannot open directory " + dir + " to sync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("store: cannot sync directory " + dir);
}

// The journal file: one table of (seq, events) rows, appended to and never
// updated. Its WAL is never checkpointed (a compaction drops the file), so a
// turn's entry is written once.
class JournalFile {
 public:
  JournalFile(std::string path, Durability d) : path_(std::move(path)) {
    db_ = open_db(path_);
    try {
      // Closing would otherwise copy the WAL into the file: work for nothing.
      sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
      set_modes(db_, path_, d);
      exec("PRAGMA wal_autocheckpoint=0");
      exec("CREATE TABLE IF NOT EXISTS journal(seq INTEGER PRIMARY KEY, events BLOB)");
      append_ = std::make_unique<Stmt>(db_, "INSERT INTO journal(seq, events) VALUES(?, ?)");
      if (d == Durability::kMachine) sync_directory_of(path_);
    } catch (...) {
      sqlite3_close(db_);  // the destructor does not run for a throwing constructor
      throw;
    }
  }
  ~JournalFile() {
    append_.reset();
    sqlite3_close(db_);
  }
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;

  // Entries numbered `from` or later, oldest first; returns the last number read (0: none).
  int64_t read(int64_t from, std::vector<std::string>& out) {
    Stmt q(db_, "SELECT seq, events FROM journal WHERE seq >= ? ORDER BY seq");
    q.bind(1, from);
    int64_t last = 0;
    while (sqlite3_step(q.get()) == SQLITE_ROW) {
      last = sqlite3_column_int64(q.get(), 0);
      out.push_back(column_blob(q.get(), 1));
    }
    return last;
  }

  void append(int64_t seq, std::string_view entry) {
    exec("BEGIN");
    append_->bind(1, seq);
    append_->bind(2, entry);
    try {
      append_->run(db_);
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
    exec("COMMIT");
  }

 private:
  void exec(const char* sql) { exec_on(db_, path_, sql); }
  std::string path_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<Stmt> append_;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, Durability d) : path_(std::move(path)), durability_(d) {
    db_ = open_db(path_);
    try {
      init();
    } catch (...) {
      sqlite3_close(db_);  // the destructor does not run for a throwing constructor
      throw;
    }
  }
  ~SqliteStore() override {
    if (compactor_.joinable()) compactor_.join();  // its error, if any, is lost with the store
    journal_.reset();
    sqlite3_close(db_);
  }

  void init() {
    set_modes(db_, path_, durability_);
    exec("PRAGMA wal_autocheckpoint=4000");
    // Schema: tables of records (msgpack blobs keyed by id). The journal table
    // here is a schema-2 store's, read and emptied, never written.
    exec("BEGIN IMMEDIATE");
    exec("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER)");
    exec("CREATE TABLE IF NOT EXISTS pools(name TEXT PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS actors(id INTEGER PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS clients(uuid TEXT PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS tasks(id INTEGER PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS journal(seq INTEGER PRIMARY KEY, events BLOB)");
    int64_t schema = meta("schema", -1);
    if (schema == -1 || (schema >= kOldestReadable && schema < kSchemaVersion)) {
      set_meta("schema", kSchemaVersion);
    } else if (schema != kSchemaVersion) {
      exec("ROLLBACK");
      throw std::runtime_error("store: " + path_ + " has schema " + std::to_string(schema) +
                               ", this head reads schemas " + std::to_string(kOldestReadable) +
                               " to " + std::to_string(kSchemaVersion));
    }
    exec("COMMIT");
    if (durability_ == Durability::kMachine) sync_directory_of(path_);
  }

  Loaded open() override {
    Loaded l;
    exec("BEGIN IMMEDIATE");
    l.boot = static_cast<uint64_t>(meta("boot", 0)) + 1;
    set_meta("boot", static_cast<int64_t>(l.boot));
    exec("COMMIT");
    l.pools = read_records<PoolRecord>(db_, "SELECT rec FROM pools");
    l.actors = read_records<ActorRecord>(db_, "SELECT rec FROM actors ORDER BY id");
    l.clients = read_records<ClientRecord>(db_, "SELECT rec FROM clients");
    l.tasks = read_records<TaskRecord>(db_, "SELECT rec FROM tasks");
    // Entries below the base were folded into the tables by a compaction
    // whose files outlived it. A schema-2 store's rows come first, then every
    // journal file, oldest first.
    const int64_t base = meta("journal_base", 0);
    Stmt q(db_, "SELECT seq, events FROM journal WHERE seq >= ? ORDER BY seq");
    q.bind(1, base);
    while (sqlite3_step(q.get()) == SQLITE_ROW) {
      next_seq_ = sqlite3_column_int64(q.get(), 0) + 1;
      l.journal.push_back(column_blob(q.get(), 1));
    }
    next_seq_ = std::max(next_seq_, base);
    old_gens_ = journal_generations();
    for (int64_t g : old_gens_) {
      if (int64_t last = JournalFile(journal_path(g), durability_).read(base, l.journal))
        next_seq_ = last + 1;
    }
    entries_ = l.journal.size();
    bytes_ = 0;
    for (const auto& e : l.journal) bytes_ += e.size();
    // This boot appends to a file of its own; the next compaction drops the older ones.
    gen_ = old_gens_.empty() ? 1 : old_gens_.back() + 1;
    journal_ = std::make_unique<JournalFile>(journal_path(gen_), durability_);
    // The tables are written only by compactions, off the head's thread, and
    // the journal files they replace are deleted right after: their commit
    // must reach the disk first, whatever the durability of the journal.
    exec("PRAGMA synchronous=FULL");
    return l;
  }

  void append(std::string_view entry) override {
    if (!journal_) throw std::logic_error("store: append before open");
    // A compaction that failed is reported on the next turn's commit, and
    // on every one after it.
    if (!compacting_.load())
      finish_compaction();  // joins a finished thread, then throws if it failed
    journal_->append(next_seq_, entry);
    ++next_seq_;
    ++entries_;
    bytes_ += entry.size();
  }

  void begin_compaction() override {
    if (cut_last_) throw std::logic_error("store: a compaction was already begun");
    finish_compaction();  // one at a time
    // Everything journaled so far is folded by the next compact(): later
    // entries go to a new file.
    auto next = std::make_unique<JournalFile>(journal_path(gen_ + 1), durability_);
    cut_last_ = std::move(journal_);
    journal_ = std::move(next);
    old_gens_.push_back(gen_++);
    folding_ = std::move(old_gens_);
    old_gens_.clear();
    cut_base_ = next_seq_;
    entries_ = 0;
    bytes_ = 0;
  }

  void compact(Compaction c) override {
    if (!cut_last_) begin_compaction();
    // The tables are written beside the head's work, on a thread.
    compacting_ = true;
    compactor_ = std::thread(
        [this, c = std::move(c), last = std::move(cut_last_), base = cut_base_]() mutable {
          try {
            write_tables(c, base);
            last.reset();
            // The tables hold everything now; a head that dies from here on skips
            // what is left of these files by the entries' numbers (journal_base).
            for (int64_t g : folding_) {
              for (const char* suffix : {"-wal", "-shm", ""})
                std::remove((journal_path(g) + suffix).c_str());
            }
          } catch (const std::exception& e) {
            broken_ = e.what();
          } catch (...) {
            broken_ = "unknown error";
          }
          compacting_ = false;
        });
  }

  bool compacting() const override { return compacting_.load(); }

  void finish_compaction() override {
    if (compactor_.joinable()) compactor_.join();
    throw_if_broken();
  }

  size_t journal_entries() const override { return entries_; }
  size_t journal_bytes() const override { return bytes_; }
  std::string path() const override { return path_; }

 private:
  // The snapshot of a failed compaction is gone (the head cleared what it
  // had marked changed), so another one could not make up for it: this
  // store takes no more writes, and a restarted head replays the files left.
  void throw_if_broken() const {
    if (!broken_.empty())
      throw std::runtime_error("store " + path_ + ": a compaction failed: " + broken_);
  }

  // On the compactor thread, the only user of db_ after open().
  void write_tables(const Compaction& c, int64_t base) {
    exec("BEGIN");
    try {
      // Removed first: a pool removed and created again under its name is
      // both erased and upserted.
      Stmt erase_pool(db_, "DELETE FROM pools WHERE name = ?");
      for (const auto& name : c.erase_pools) {
        erase_pool.bind(1, name);
        erase_pool.run(db_);
      }
      Stmt erase_actor(db_, "DELETE FROM actors WHERE id = ?");
      for (uint64_t id : c.erase_actors) {
        erase_actor.bind(1, static_cast<int64_t>(id));
        erase_actor.run(db_);
      }
      Stmt erase_client(db_, "DELETE FROM clients WHERE uuid = ?");
      for (const auto& uuid : c.erase_clients) {
        erase_client.bind(1, uuid);
        erase_client.run(db_);
      }
      Stmt pool(db_, "INSERT OR REPLACE INTO pools(name, rec) VALUES(?, ?)");
      for (const auto& p : c.pools) {
        pool.bind(1, p.name);
        pool.bind(2, pack(p));
        pool.run(db_);
      }
      Stmt actor(db_, "INSERT OR REPLACE INTO actors(id, rec) VALUES(?, ?)");
      for (const auto& a : c.actors) {
        actor.bind(1, static_cast<int64_t>(a.id));
        actor.bind(2, pack(a));
        actor.run(db_);
      }
      Stmt client(db_, "INSERT OR REPLACE INTO clients(uuid, rec) VALUES(?, ?)");
      for (const auto& cl : c.clients) {
        client.bind(1, cl.uuid);
        client.bind(2, pack(cl));
        client.run(db_);
      }
      Stmt task(db_, "INSERT OR REPLACE INTO tasks(id, rec) VALUES(?, ?)");
      for (const auto& t : c.upsert) {
        task.bind(1, static_cast<int64_t>(t.id));
        task.bind(2, pack(t));
        task.run(db_);
      }
      Stmt erase(db_, "DELETE FROM tasks WHERE id = ?");
      for (uint64_t id : c.erase) {
        erase.bind(1, static_cast<int64_t>(id));
        erase.run(db_);
      }
      exec("DELETE FROM journal");  // a schema-2 store's rows (none in a newer one)
      set_meta("journal_base", base);
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
    exec("COMMIT");
  }

  // File 0 is a schema-3 store's single journal file.
  std::string journal_path(int64_t gen) const {
    return gen == 0 ? path_ + ".journal" : path_ + ".journal." + std::to_string(gen);
  }

  // The numbers of the journal files there are, ascending.
  std::vector<int64_t> journal_generations() const {
    namespace fs = std::filesystem;
    const fs::path dir = directory_of(path_);
    const std::string single = fs::path(path_).filename().string() + ".journal";
    const std::string prefix = single + ".";
    std::vector<int64_t> gens;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name == single) {
        gens.push_back(0);
        continue;
      }
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = name.substr(prefix.size());
      // Exactly what journal_path writes: no -wal or -shm, no leading zero.
      if (digits.size() > 18 || digits[0] == '0' ||
          !std::all_of(digits.begin(), digits.end(),
                       [](unsigned char ch) { return std::isdigit(ch); })) {
        continue;
      }
      gens.push_back(std::stoll(digits));
    }
    if (ec)
      throw std::runtime_error("store: cannot list " + dir.string() +
                               " for journal files: " + ec.message());
    std::sort(gens.begin(), gens.end());
    return gens;
  }

  void exec(const char* sql) { exec_on(db_, path_, sql); }
  int64_t meta(const char* key, int64_t fallback) {
    Stmt q(db_, "SELECT value FROM meta WHERE key = ?");
    sqlite3_bind_text(q.get(), 1, key, -1, SQLITE_STATIC);
    return sqlite3_step(q.get()) == SQLITE_ROW ? sqlite3_column_int64(q.get(), 0) : fallback;
  }
  void set_meta(const char* key, int64_t v) {
    Stmt q(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
    sqlite3_bind_text(q.get(), 1, key, -1, SQLITE_STATIC);
    q.bind(2, v);
    q.run(db_);
  }

  std::string path_;
  Durability durability_;
  sqlite3* db_ = nullptr;  // the tables: read by open(), then written by the compactor only
  std::unique_ptr<JournalFile> journal_;  // PATH.journal.<gen_>, appended to
  int64_t gen_ = 0;
  std::vector<int64_t> old_gens_;  // older journal files, not yet folded into the tables
  std::vector<int64_t> folding_;   // those the running (or begun) compaction folds
  // Between begin_compaction() and compact(): the journal file just left
  // (set only then), and the first entry number after the cut.
  std::unique_ptr<JournalFile> cut_last_;
  int64_t cut_base_ = 0;
  std::thread compactor_;
  std::atomic<bool> compacting_{false};
  // Set by the compactor thread when it fails (read after joining it): every
  // write throws it from then on.
  std::string broken_;
  int64_t next_seq_ = 1;
  size_t entries_ = 0;
  size_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<Store> open_sqlite(const std::string& path, Durability d) {
  return std::make_unique<SqliteStore>(path, d);
}

}  // namespace spotlight::store

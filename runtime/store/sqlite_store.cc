// SQLite implementation of the store: WAL mode, exclusive locking (one head
// per store file), prepared statements, one transaction per append.
//
// Two files: PATH holds the tables (and the meta), PATH.journal the journal.
// A compaction commits the tables, then throws the journal file away and
// starts an empty one. Deleting the rows instead made SQLite read back every
// page of them to free it: 3.3 s for 4,096 turns of pipelined calls, during
// which the head answered nobody and its nodes took it for gone.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "store/store.h"

namespace spotlight::store {
namespace {

// 2: task checkpoints and attempt limits; 3: the journal in its own file (a
// schema-2 store's journal rows are read once and folded by the first compaction).
constexpr int kSchemaVersion = 3;
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

// The directory's own entry for a file just created reaches the disk only
// with an fsync of the directory.
void sync_directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
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
  SqliteStore(std::string path, Durability d)
      : path_(std::move(path)), journal_path_(path_ + ".journal"), durability_(d) {
    db_ = open_db(path_);
    try {
      init();
      journal_ = std::make_unique<JournalFile>(journal_path_, durability_);
    } catch (...) {
      sqlite3_close(db_);  // the destructor does not run for a throwing constructor
      throw;
    }
  }
  ~SqliteStore() override {
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
    // A schema-2 store's rows come first.
    Stmt q(db_, "SELECT seq, events FROM journal ORDER BY seq");
    while (sqlite3_step(q.get()) == SQLITE_ROW) {
      next_seq_ = sqlite3_column_int64(q.get(), 0) + 1;
      l.journal.push_back(column_blob(q.get(), 1));
    }
    old_rows_ = l.journal.size();
    // Entries below the base were folded into the tables by a compaction
    // whose head died before it could drop the journal file.
    const int64_t base = meta("journal_base", 0);
    next_seq_ = std::max(next_seq_, base);
    if (int64_t last = journal_->read(base, l.journal)) next_seq_ = last + 1;
    entries_ = l.journal.size();
    bytes_ = 0;
    for (const auto& e : l.journal) bytes_ += e.size();
    return l;
  }

  void append(std::string_view entry) override {
    journal_->append(next_seq_, entry);
    ++next_seq_;
    ++entries_;
    bytes_ += entry.size();
  }

  void compact(const Compaction& c) override {
    exec("BEGIN");
    try {
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
      if (old_rows_ > 0) exec("DELETE FROM journal");
      set_meta("journal_base", next_seq_);
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
    exec("COMMIT");
    old_rows_ = 0;
    entries_ = 0;
    bytes_ = 0;
    // The tables hold everything now; a head that dies from here on skips the
    // old entries by their numbers (journal_base).
    journal_.reset();
    for (const char* suffix : {"-wal", "-shm", ""}) std::remove((journal_path_ + suffix).c_str());
    journal_ = std::make_unique<JournalFile>(journal_path_, durability_);
  }

  size_t journal_entries() const override { return entries_; }
  size_t journal_bytes() const override { return bytes_; }
  std::string path() const override { return path_; }

 private:
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
  std::string journal_path_;
  Durability durability_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<JournalFile> journal_;
  int64_t next_seq_ = 1;
  size_t entries_ = 0;
  size_t bytes_ = 0;
  size_t old_rows_ = 0;  // a schema-2 store's journal rows, until the first compaction
};

}  // namespace

std::unique_ptr<Store> open_sqlite(const std::string& path, Durability d) {
  return std::make_unique<SqliteStore>(path, d);
}

}  // namespace spotlight::store

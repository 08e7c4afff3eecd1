// SQLite implementation of the store: WAL mode, exclusive locking (one head
// per store file), prepared statements, one transaction per append.
#include <sqlite3.h>

#include <stdexcept>

#include "store/store.h"

namespace spotlight::store {
namespace {

constexpr int kSchemaVersion = 2;  // 2: task checkpoints and attempt limits

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

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, Durability d) : path_(std::move(path)) {
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      std::string err = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw std::runtime_error("store: cannot open " + path_ + ": " + err);
    }
    try {
      init(d);
    } catch (...) {
      sqlite3_close(db_);  // the destructor does not run for a throwing constructor
      throw;
    }
    append_ = std::make_unique<Stmt>(db_, "INSERT INTO journal(seq, events) VALUES(?, ?)");
  }
  ~SqliteStore() override {
    append_.reset();
    sqlite3_close(db_);
  }

  void init(Durability d) {
    sqlite3_busy_timeout(db_, 2000);
    exec("PRAGMA locking_mode=EXCLUSIVE");
    exec("PRAGMA journal_mode=WAL");
    exec(d == Durability::kMachine ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec("PRAGMA wal_autocheckpoint=4000");
    // Schema: tables of records (msgpack blobs keyed by id) plus the journal.
    exec("BEGIN IMMEDIATE");
    exec("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER)");
    exec("CREATE TABLE IF NOT EXISTS pools(name TEXT PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS actors(id INTEGER PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS clients(uuid TEXT PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS tasks(id INTEGER PRIMARY KEY, rec BLOB)");
    exec("CREATE TABLE IF NOT EXISTS journal(seq INTEGER PRIMARY KEY, events BLOB)");
    int64_t schema = meta("schema", -1);
    if (schema == -1) {
      set_meta("schema", kSchemaVersion);
    } else if (schema != kSchemaVersion) {
      exec("ROLLBACK");
      throw std::runtime_error("store: " + path_ + " has schema " + std::to_string(schema) +
                               ", this head reads schema " + std::to_string(kSchemaVersion));
    }
    exec("COMMIT");
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
    Stmt q(db_, "SELECT seq, events FROM journal ORDER BY seq");
    while (sqlite3_step(q.get()) == SQLITE_ROW) {
      next_seq_ = sqlite3_column_int64(q.get(), 0) + 1;
      l.journal.push_back(column_blob(q.get(), 1));
    }
    entries_ = l.journal.size();
    return l;
  }

  void append(std::string_view entry) override {
    exec("BEGIN");
    append_->bind(1, next_seq_);
    append_->bind(2, entry);
    try {
      append_->run(db_);
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
    exec("COMMIT");
    ++next_seq_;
    ++entries_;
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
      exec("DELETE FROM journal");
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
    exec("COMMIT");
    entries_ = 0;
  }

  size_t journal_entries() const override { return entries_; }
  std::string path() const override { return path_; }

 private:
  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      if (msg.find("locked") != std::string::npos || msg.find("busy") != std::string::npos) {
        msg += " (is another head running on this store?)";
      }
      throw std::runtime_error("store " + path_ + ": " + sql + ": " + msg);
    }
  }
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
  sqlite3* db_ = nullptr;
  std::unique_ptr<Stmt> append_;
  int64_t next_seq_ = 1;
  size_t entries_ = 0;
};

}  // namespace

std::unique_ptr<Store> open_sqlite(const std::string& path, Durability d) {
  return std::make_unique<SqliteStore>(path, d);
}

}  // namespace spotlight::store

// Runs SQL on a store's file from a test, while no head has it open (stores
// lock their files): how tests inject faults and mend them again.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace spotlight::testing {

inline void exec_sqlite(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

// Makes every insert into the store's task table fail, as a full disk or a
// broken file would fail a compaction.
inline constexpr const char* kFailTaskInserts =
    "CREATE TRIGGER fail BEFORE INSERT ON tasks BEGIN SELECT RAISE(ABORT, 'injected fault'); END";

}  // namespace spotlight::testing

// The run store's schema: how a trainerd database is recognised, checked and migrated.
// Private to the store library; docs/store.md describes the tables.
#pragma once

#include <cstdint>

#include "sqlite.h"
#include "trainerd/common/status.h"

namespace trainerd::store {

// PRAGMA application_id of every trainerd run store: "TRND" in ASCII.
inline constexpr std::int64_t kApplicationId = 0x54524E44;

// Reads the file's header and schema without writing anything, and returns its schema
// version: 0 for an empty file (a new store), 1..kSchemaVersion for a trainerd store.
// Corruption when the file is not an SQLite database or is damaged; InvalidArgument for
// another application's database; FailedPrecondition for a newer schema version.
[[nodiscard]] Result<int> ReadSchemaVersion(sqlite::Connection& db);

// PRAGMA quick_check: Corruption naming the first problem found.
[[nodiscard]] Status CheckIntegrity(sqlite::Connection& db);

// Applies every migration step above the file's schema version, each in its own
// transaction together with its PRAGMA user_version, so a crash leaves the file at one
// version or the next. REQUIRES: a writable connection.
[[nodiscard]] Status Migrate(sqlite::Connection& db);

}  // namespace trainerd::store

// A thin RAII layer over the SQLite C API: a connection, its prepared statements, its
// transactions, and helpers that run one statement. SQLite result codes become Status
// values whose messages name the database path. Private to the store library.
//
// Thread safety: none. A Connection and every Statement and Transaction made from it belong
// to one thread, and must not outlive the Connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "trainerd/common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace trainerd::store::sqlite {

class Statement;

namespace internal {
template <typename T>
inline constexpr bool kIsOptional = false;
template <typename T>
inline constexpr bool kIsOptional<std::optional<T>> = true;
}  // namespace internal

class Connection {
 public:
  enum class Mode {
    kReadWriteCreate,  // creates the file when missing
    kReadOnly,         // never creates or writes the file
  };

  // Opens `path`. The file is not read yet: a file that is not a database fails on the
  // first statement.
  [[nodiscard]] static Result<std::unique_ptr<Connection>> Open(const std::string& path, Mode mode,
                                                                int busy_timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  [[nodiscard]] Result<Statement> Prepare(std::string_view sql);
  // Runs a script of statements whose rows, if any, are discarded (DDL, PRAGMA writes).
  [[nodiscard]] Status Exec(const std::string& sql);
  // Runs `sql`, which returns one row whose first column is the result (PRAGMA reads).
  [[nodiscard]] Result<std::int64_t> QueryInt64(std::string_view sql);
  [[nodiscard]] Result<std::string> QueryText(std::string_view sql);

  // True when SQLite opened the file without write access, whatever was asked.
  bool read_only() const;
  // True between BEGIN and COMMIT or ROLLBACK.
  bool in_transaction() const;
  const std::string& path() const { return path_; }
  // Rows changed by the last INSERT, UPDATE or DELETE.
  std::int64_t changes() const;
  // Rows changed by every INSERT, UPDATE or DELETE of this connection since it opened.
  std::int64_t total_changes() const;

  // The Status for SQLite result code `rc` met while doing `what`.
  Status Error(int rc, std::string_view what) const;

 private:
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
};

// A prepared statement. Parameters are bound, and columns read, in order: each Bind call
// continues after the previous one, and each Read call returns the next column of the
// current row.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  ~Statement();

  // Binds the next parameters. Each value is an integer, a floating-point number (NaN binds
  // NULL, as SQLite would store it), text (anything convertible to std::string_view),
  // std::nullopt, or a std::optional of those (empty binds NULL).
  template <typename... Values>
  Statement& Bind(const Values&... values) {
    (BindOne(values), ...);
    return *this;
  }

  // Advances to the next row: true when one is ready, false when there are no more.
  [[nodiscard]] Result<bool> Step();
  // Steps to completion, for statements that return no row.
  [[nodiscard]] Status Run();
  // Makes the statement ready to be bound and run again.
  void Reset();

  std::int64_t ReadInt64();
  double ReadDouble();  // NULL reads as NaN
  bool ReadBool();
  std::string ReadText();
  std::optional<std::int64_t> ReadOptionalInt64();
  std::optional<double> ReadOptionalDouble();
  std::optional<std::string> ReadOptionalText();
  // Whether the next column to read is NULL; Skip passes over `columns` columns.
  bool NextIsNull() const { return IsNull(); }
  void Skip(int columns) { next_column_ += columns; }

 private:
  friend class Connection;
  Statement(Connection* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}

  template <typename T>
  void BindOne(const T& value) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      BindNull();
    } else if constexpr (internal::kIsOptional<T>) {
      if (value) {
        BindOne(*value);
      } else {
        BindNull();
      }
    } else if constexpr (std::is_integral_v<T>) {
      BindInt64(static_cast<std::int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      BindDouble(static_cast<double>(value));
    } else {
      BindText(std::string_view(value));
    }
  }
  void BindNull();
  void BindInt64(std::int64_t value);
  void BindDouble(double value);
  void BindText(std::string_view value);
  // Records the first failed bind; Step reports it.
  void CheckBind(int rc);
  bool IsNull() const;

  Connection* db_;
  sqlite3_stmt* stmt_;
  int next_parameter_ = 1;
  int next_column_ = 0;
  Status bind_status_;
};

// BEGIN IMMEDIATE ... COMMIT. Destroying an uncommitted Transaction rolls it back, so an
// early error return leaves nothing behind.
class Transaction {
 public:
  // FailedPrecondition on a read-only connection.
  [[nodiscard]] static Result<Transaction> Begin(Connection& db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  // REQUIRES: not committed yet.
  [[nodiscard]] Status Commit();

 private:
  explicit Transaction(Connection* db) : db_(db) {}

  Connection* db_;  // null once committed or moved from
};

// --- Running statements --------------------------------------------------------------
// `bind` is called as bind(statement) to bind a statement's parameters; `read` as
// read(statement) to decode the current row into a T or a Result<T>.

// Runs `body` in one transaction: committed when it returns Ok, rolled back otherwise.
template <typename Body>
Status InTransaction(Connection& db, Body body) {
  Result<Transaction> transaction = Transaction::Begin(db);
  if (!transaction.ok()) return transaction.status();
  Status status = body();
  if (!status.ok()) return status;
  return transaction->Commit();
}

// Prepares `sql`, lets `bind` bind its parameters and runs it to completion.
template <typename Bind>
Status Execute(Connection& db, std::string_view sql, Bind bind) {
  Result<Statement> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  bind(*stmt);
  return stmt->Run();
}

// Runs `sql` once per item, binding each with `bind(stmt, item)`.
template <typename T, typename Bind>
Status ExecuteEach(Connection& db, std::string_view sql, const std::vector<T>& items, Bind bind) {
  Result<Statement> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  for (const T& item : items) {
    stmt->Reset();
    bind(*stmt, item);
    Status status = stmt->Run();
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

// Every row of `sql`, decoded by `read`, which returns a T or a Result<T>.
template <typename T, typename Bind, typename Read>
Result<std::vector<T>> QueryAll(Connection& db, std::string_view sql, Bind bind, Read read) {
  Result<Statement> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  bind(*stmt);
  std::vector<T> values;
  for (;;) {
    Result<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return values;
    Result<T> value = read(*stmt);
    if (!value.ok()) return value.status();
    values.push_back(*std::move(value));
  }
}

// The first row of `sql`, if any.
template <typename T, typename Bind, typename Read>
Result<std::optional<T>> QueryFirst(Connection& db, std::string_view sql, Bind bind, Read read) {
  Result<std::vector<T>> values = QueryAll<T>(db, sql, bind, read);
  if (!values.ok()) return values.status();
  if (values->empty()) return std::optional<T>();
  return std::optional<T>(std::move(values->front()));
}

// The first row of `sql`, or NotFound saying that `what` does not exist.
template <typename T, typename Bind, typename Read>
Result<T> QueryExisting(Connection& db, std::string_view sql, Bind bind, Read read,
                        std::string_view what) {
  Result<std::optional<T>> value = QueryFirst<T>(db, sql, bind, read);
  if (!value.ok()) return value.status();
  if (!value->has_value()) {
    return Status::NotFound("run store '" + db.path() + "': no " + std::string(what));
  }
  return **std::move(value);
}

// The single id an INSERT ... RETURNING id returns.
template <typename Bind>
Result<std::int64_t> InsertReturningId(Connection& db, std::string_view sql, Bind bind) {
  Result<std::optional<std::int64_t>> id =
      QueryFirst<std::int64_t>(db, sql, bind, [](Statement& stmt) { return stmt.ReadInt64(); });
  if (!id.ok()) return id.status();
  if (!id->has_value()) return Status::Internal("\"" + std::string(sql) + "\" returned no id");
  return **id;
}

}  // namespace trainerd::store::sqlite

#include "sqlite.h"

#include <sqlite3.h>

#include <cctype>
#include <limits>
#include <utility>

namespace trainerd::store::sqlite {
namespace {

// Long enough to recognise a statement in an error message.
constexpr std::size_t kSqlExcerptChars = 60;

// The start of `sql` on one line, for error messages.
std::string Excerpt(std::string_view sql) {
  std::string text;
  for (char c : sql) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (space && (text.empty() || text.back() == ' ')) continue;
    if (text.size() == kSqlExcerptChars) return text + "...";
    text += space ? ' ' : c;
  }
  return text;
}

}  // namespace

// --- Connection ------------------------------------------------------------------------

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& path, Mode mode,
                                                     int busy_timeout_ms) {
  const int flags =
      mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  // SQLite hands out a handle even when opening fails; the Connection closes it either way.
  std::unique_ptr<Connection> connection(new Connection(db, path));
  if (rc != SQLITE_OK) return connection->Error(rc, "cannot open the database file");
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return connection;
}

Connection::~Connection() { sqlite3_close_v2(db_); }

Result<Statement> Connection::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return Error(rc, "cannot prepare \"" + Excerpt(sql) + "\"");
  }
  return Statement(this, stmt);
}

Status Connection::Exec(const std::string& sql) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "\"" + Excerpt(sql) + "\" failed");
  return Status::Ok();
}

Result<std::int64_t> Connection::QueryInt64(std::string_view sql) {
  Result<Statement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal("\"" + std::string(sql) + "\" returned no row");
  return stmt->ReadInt64();
}

Result<std::string> Connection::QueryText(std::string_view sql) {
  Result<Statement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal("\"" + std::string(sql) + "\" returned no row");
  return stmt->ReadText();
}

bool Connection::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

bool Connection::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::int64_t Connection::changes() const { return sqlite3_changes64(db_); }

std::int64_t Connection::total_changes() const { return sqlite3_total_changes64(db_); }

Status Connection::Error(int rc, std::string_view what) const {
  std::string message = "run store '" + path_ + "': " + std::string(what) + ": ";
  message += db_ != nullptr && sqlite3_extended_errcode(db_) == rc ? sqlite3_errmsg(db_)
                                                                   : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return Status::InvalidArgument(std::move(message));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(std::move(message));
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
      return Status::IOError(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

// --- Statement -------------------------------------------------------------------------

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      next_parameter_(other.next_parameter_),
      next_column_(other.next_column_),
      bind_status_(std::move(other.bind_status_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    next_parameter_ = other.next_parameter_;
    next_column_ = other.next_column_;
    bind_status_ = std::move(other.bind_status_);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Result<bool> Statement::Step() {
  if (!bind_status_.ok()) return bind_status_;
  next_column_ = 0;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, "\"" + Excerpt(sqlite3_sql(stmt_)) + "\" failed");
}

Status Statement::Run() {
  for (;;) {
    Result<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  next_parameter_ = 1;
  next_column_ = 0;
  bind_status_ = Status::Ok();
}

void Statement::BindNull() { CheckBind(sqlite3_bind_null(stmt_, next_parameter_++)); }

void Statement::BindInt64(std::int64_t value) {
  CheckBind(sqlite3_bind_int64(stmt_, next_parameter_++, value));
}

void Statement::BindDouble(double value) {
  CheckBind(sqlite3_bind_double(stmt_, next_parameter_++, value));
}

void Statement::BindText(std::string_view value) {
  CheckBind(sqlite3_bind_text64(stmt_, next_parameter_++, value.data(), value.size(),
                                SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::CheckBind(int rc) {
  if (rc != SQLITE_OK && bind_status_.ok()) {
    bind_status_ = db_->Error(rc, "cannot bind parameter " + std::to_string(next_parameter_ - 1) +
                                      " of \"" + Excerpt(sqlite3_sql(stmt_)) + "\"");
  }
}

bool Statement::IsNull() const { return sqlite3_column_type(stmt_, next_column_) == SQLITE_NULL; }

std::int64_t Statement::ReadInt64() { return sqlite3_column_int64(stmt_, next_column_++); }

double Statement::ReadDouble() {
  if (IsNull()) {
    ++next_column_;
    return std::numeric_limits<double>::quiet_NaN();
  }
  return sqlite3_column_double(stmt_, next_column_++);
}

bool Statement::ReadBool() { return ReadInt64() != 0; }

std::string Statement::ReadText() {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, next_column_));
  const int size = sqlite3_column_bytes(stmt_, next_column_++);
  return text == nullptr ? std::string() : std::string(text, static_cast<std::size_t>(size));
}

std::optional<std::int64_t> Statement::ReadOptionalInt64() {
  if (IsNull()) {
    ++next_column_;
    return std::nullopt;
  }
  return ReadInt64();
}

std::optional<double> Statement::ReadOptionalDouble() {
  if (IsNull()) {
    ++next_column_;
    return std::nullopt;
  }
  return ReadDouble();
}

std::optional<std::string> Statement::ReadOptionalText() {
  if (IsNull()) {
    ++next_column_;
    return std::nullopt;
  }
  return ReadText();
}

// --- Transaction -----------------------------------------------------------------------

Result<Transaction> Transaction::Begin(Connection& db) {
  if (db.read_only()) {
    return Status::FailedPrecondition("run store '" + db.path() + "' is open read-only");
  }
  // IMMEDIATE takes the write lock up front, so the busy timeout applies to it rather than
  // failing at the first write inside the transaction.
  Status status = db.Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  // A failed COMMIT may already have rolled back; only an open transaction needs it.
  if (db_ != nullptr && db_->in_transaction()) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  Status status = db_->Exec("COMMIT");
  if (status.ok()) db_ = nullptr;
  return status;
}

}  // namespace trainerd::store::sqlite

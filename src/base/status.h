// Status: the outcome of an operation that can fail because of its input or
// its environment (bad file, bad JSON, full KV cache). Invariants use
// RL_CHECK instead (check.h).
//
// Ownership: a Status owns its message. Thread-safety: thread-compatible.
// Cost: an OK status holds no allocation; an error allocates its message.
#ifndef REDLINE_BASE_STATUS_H_
#define REDLINE_BASE_STATUS_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace redline {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // the caller's input is malformed or out of range
  kNotFound,            // a named thing (file, key, tensor, model) is absent
  kOutOfRange,          // e.g. a prompt longer than the context
  kUnimplemented,       // a valid input this build does not support (e.g. Q4_K)
  kIoError,             // the OS refused a read, write or mmap
  kDataLoss,            // a file is truncated or corrupt
  kResourceExhausted,   // queue, KV cache or memory is full
  kFailedPrecondition,  // the object is not in a state to do this
  kCancelled,           // the caller went away
  kDeadlineExceeded,    // a deadline passed
  kUnavailable,         // not ready yet (loading, draining)
  kInternal,            // a bug
};

// Short lower-case name of a code ("invalid_argument").
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // OK.
  Status() = default;
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string_view m) {
    return {StatusCode::kInvalidArgument, m};
  }
  static Status NotFound(std::string_view m) {
    return {StatusCode::kNotFound, m};
  }
  static Status OutOfRange(std::string_view m) {
    return {StatusCode::kOutOfRange, m};
  }
  static Status Unimplemented(std::string_view m) {
    return {StatusCode::kUnimplemented, m};
  }
  static Status IoError(std::string_view m) {
    return {StatusCode::kIoError, m};
  }
  static Status DataLoss(std::string_view m) {
    return {StatusCode::kDataLoss, m};
  }
  static Status ResourceExhausted(std::string_view m) {
    return {StatusCode::kResourceExhausted, m};
  }
  static Status FailedPrecondition(std::string_view m) {
    return {StatusCode::kFailedPrecondition, m};
  }
  static Status Cancelled(std::string_view m) {
    return {StatusCode::kCancelled, m};
  }
  static Status DeadlineExceeded(std::string_view m) {
    return {StatusCode::kDeadlineExceeded, m};
  }
  static Status Unavailable(std::string_view m) {
    return {StatusCode::kUnavailable, m};
  }
  static Status Internal(std::string_view m) {
    return {StatusCode::kInternal, m};
  }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;
  // "OK" or "<code name>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithContext(std::string_view prefix) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

}  // namespace redline

// Returns from the enclosing function when `expr` is not OK.
#define RL_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    ::redline::Status rl_status_tmp_ = (expr);       \
    if (!rl_status_tmp_.ok()) return rl_status_tmp_; \
  } while (0)

#endif  // REDLINE_BASE_STATUS_H_

// Result<T>: a value or the Status that explains why there is none.
// C++20 has no std::expected; this is the small subset Redline needs.
//
// Thread-safety: thread-compatible. Accessing value() of an error Result is a
// bug and aborts (RL_CHECK).
#ifndef REDLINE_BASE_RESULT_H_
#define REDLINE_BASE_RESULT_H_

#include <optional>
#include <utility>

#include "base/check.h"
#include "base/status.h"

namespace redline {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    RL_CHECK(!status_.ok()) << "Result built from an OK status without a value";
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    RL_CHECK(ok()) << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    RL_CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T&& value() && {
    RL_CHECK(ok()) << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace redline

#define RL_CONCAT_INNER_(a, b) a##b
#define RL_CONCAT_(a, b) RL_CONCAT_INNER_(a, b)

// RL_ASSIGN_OR_RETURN(auto x, Foo()); returns Foo()'s status on error.
#define RL_ASSIGN_OR_RETURN(lhs, expr)                \
  auto RL_CONCAT_(rl_result_, __LINE__) = (expr);     \
  if (!RL_CONCAT_(rl_result_, __LINE__).ok())         \
    return RL_CONCAT_(rl_result_, __LINE__).status(); \
  lhs = std::move(RL_CONCAT_(rl_result_, __LINE__)).value()

#endif  // REDLINE_BASE_RESULT_H_

// ErrorClass: the bounded label set of redline_request_errors_total{class}
// (label cardinality stays fixed whatever the errors say), and the class of
// an api::ApiError by its HTTP status.
//
// Thread-safety: pure functions.
#ifndef REDLINE_SERVER_ERROR_CLASS_H_
#define REDLINE_SERVER_ERROR_CLASS_H_

#include <string_view>

#include "api/error.h"

namespace redline::server {

enum class ErrorClass {
  kBadRequest,    // 400, 405
  kUnauthorized,  // 401
  kNotFound,      // 404
  kTooLarge,      // 413, 431
  kOverloaded,    // 429
  kUnavailable,   // 503
  kTimeout,       // 504, 408, a deadline in a stream
  kCancelled,     // the client went away
  kInternal,      // 500 and anything else
};
inline constexpr int kNumErrorClasses = 9;

std::string_view ErrorClassName(ErrorClass c);

// By HTTP status; a cancellation is counted by the caller, which knows the
// client went away.
ErrorClass ErrorClassOf(const api::ApiError& error);

}  // namespace redline::server

#endif  // REDLINE_SERVER_ERROR_CLASS_H_

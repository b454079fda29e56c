// ApiError: one error answer of the server, with its HTTP status, OpenAI
// error `type`, `param` and `code`, and the class it is counted under in
// redline_request_errors_total. serving.md §4 is the table this follows:
//
//   400 invalid_request_error   bad JSON, bad parameter, prompt + max_tokens
//   over the context 401 authentication_error    missing or wrong API key 404
//   not_found_error         unknown route or model 405 invalid_request_error
//   known route, wrong method 413 invalid_request_error   body over
//   --max-body-bytes 429 rate_limit_error        waiting queue full
//   (Retry-After set) 500 server_error            a bug (also logged) 503
//   unavailable_error       loading, warming up, draining, failed (Retry-After
//   when known) 504 timeout_error           --request-timeout passed
//   (non-streaming)
//
// Thread-safety: plain values and pure functions.
#ifndef REDLINE_SERVER_API_ERROR_H_
#define REDLINE_SERVER_API_ERROR_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace redline::server {

// Label values of redline_request_errors_total{class}. Bounded on purpose
// (label cardinality).
enum class ErrorClass {
  kBadRequest,    // 400, 405
  kUnauthorized,  // 401
  kNotFound,      // 404
  kTooLarge,      // 413
  kOverloaded,    // 429
  kUnavailable,   // 503
  kTimeout,       // 504 / deadline in a stream
  kCancelled,     // the client went away
  kInternal,      // 500
};
inline constexpr int kNumErrorClasses = 9;
std::string_view ErrorClassName(ErrorClass c);

struct ApiError {
  int http_status = 500;
  std::string type;     // OpenAI error type
  std::string message;  // for humans
  std::string param;    // offending request field; empty -> null
  std::string code;     // machine-readable; empty -> null
  ErrorClass error_class = ErrorClass::kInternal;
  int retry_after_s = 0;  // > 0: sent as Retry-After

  static ApiError BadRequest(std::string message, std::string param = {},
                             std::string code = "invalid_value");
  static ApiError Unauthorized(std::string message);
  static ApiError NotFound(std::string message, std::string param = {},
                           std::string code = {});
  static ApiError MethodNotAllowed(std::string message);
  static ApiError TooLarge(std::string message);
  static ApiError Overloaded(std::string message, int retry_after_s);
  static ApiError Unavailable(std::string message, int retry_after_s = 0);
  static ApiError Timeout(std::string message);
  static ApiError Internal(std::string message);
};

// Maps an engine Submit/stream status: InvalidArgument/OutOfRange -> 400,
// ResourceExhausted -> 429, Unavailable -> 503, DeadlineExceeded -> 504,
// Cancelled -> 503 (server shutting down) or cancelled, anything else 500.
ApiError ApiErrorFromStatus(const Status& status, int retry_after_s = 0);

// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
std::string ApiErrorJson(const ApiError& error);

}  // namespace redline::server

#endif  // REDLINE_SERVER_API_ERROR_H_

// ApiError: one OpenAI error answer — HTTP status, error `type`, `message`,
// `param` and `code` — and its JSON body. Used by every front end that
// answers OpenAI requests (serve, gateway) and by clients that read errors
// (bench). The status table (docs/SERVING.md, "Errors"):
//
//   400 invalid_request_error   bad JSON, bad parameter, prompt too long
//   401 authentication_error    missing or wrong API key
//   404 not_found_error         unknown route or model
//   405 invalid_request_error   known route, wrong method
//   413 invalid_request_error   body over the size limit
//   429 rate_limit_error        queue full or over its budget (Retry-After)
//   500 server_error            a bug (also logged)
//   503 unavailable_error       loading, warming up, draining, failed
//   504 timeout_error           the request's deadline passed
//
// Thread-safety: plain values and pure functions.
#ifndef REDLINE_API_ERROR_H_
#define REDLINE_API_ERROR_H_

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace redline::api {

struct ApiError {
  int http_status = 500;
  std::string type;       // OpenAI error type
  std::string message;    // for humans
  std::string param;      // offending request field; empty -> null
  std::string code;       // machine-readable; empty -> null
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

// Maps a Status from request handling: InvalidArgument/OutOfRange -> 400,
// Unimplemented -> 400 "unsupported_parameter", NotFound -> 404,
// ResourceExhausted -> 429, Unavailable and Cancelled -> 503,
// DeadlineExceeded -> 504, anything else -> 500.
ApiError ApiErrorFromStatus(const Status& status, int retry_after_s = 0);

// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
std::string BuildErrorBody(const ApiError& error);

// The same error with its HTTP status as a numeric `code`, the shape of
// llama.cpp's /health while a model loads, which existing probes parse.
std::string BuildNumericCodeErrorBody(const ApiError& error);

// The error object of a body ({"error": {...}} or {"error": "text"}), when
// there is one. http_status stays 0: the caller knows it.
std::optional<ApiError> ParseErrorBody(std::string_view body);

}  // namespace redline::api

#endif  // REDLINE_API_ERROR_H_

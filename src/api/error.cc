#include "api/error.h"

#include <boost/json.hpp>
#include <utility>

#include "api/json_reader.h"

namespace redline::api {
namespace json = boost::json;
namespace {

ApiError Make(int status, std::string_view type, std::string message,
              std::string param, std::string code, int retry_after_s = 0) {
  ApiError e;
  e.http_status = status;
  e.type = std::string(type);
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  e.retry_after_s = retry_after_s;
  return e;
}

json::value NullIfEmpty(const std::string& s) {
  return s.empty() ? json::value(nullptr) : json::value(s);
}

}  // namespace

ApiError ApiError::BadRequest(std::string message, std::string param,
                              std::string code) {
  return Make(400, "invalid_request_error", std::move(message),
              std::move(param), std::move(code));
}

ApiError ApiError::Unauthorized(std::string message) {
  return Make(401, "authentication_error", std::move(message), {},
              "invalid_api_key");
}

ApiError ApiError::NotFound(std::string message, std::string param,
                            std::string code) {
  return Make(404, "not_found_error", std::move(message), std::move(param),
              std::move(code));
}

ApiError ApiError::MethodNotAllowed(std::string message) {
  return Make(405, "invalid_request_error", std::move(message), {},
              "method_not_allowed");
}

ApiError ApiError::TooLarge(std::string message) {
  return Make(413, "invalid_request_error", std::move(message), {},
              "request_too_large");
}

ApiError ApiError::Overloaded(std::string message, int retry_after_s) {
  return Make(429, "rate_limit_error", std::move(message), {}, "queue_full",
              retry_after_s < 1 ? 1 : retry_after_s);
}

ApiError ApiError::Unavailable(std::string message, int retry_after_s) {
  return Make(503, "unavailable_error", std::move(message), {}, "unavailable",
              retry_after_s);
}

ApiError ApiError::Timeout(std::string message) {
  return Make(504, "timeout_error", std::move(message), {}, "request_timeout");
}

ApiError ApiError::Internal(std::string message) {
  return Make(500, "server_error", std::move(message), {}, "internal_error");
}

ApiError ApiErrorFromStatus(const Status& status, int retry_after_s) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return ApiError::BadRequest(status.message());
    case StatusCode::kUnimplemented:
      return ApiError::BadRequest(status.message(), {},
                                  "unsupported_parameter");
    case StatusCode::kOutOfRange:
      return ApiError::BadRequest(status.message(), {},
                                  "context_length_exceeded");
    case StatusCode::kNotFound:
      return ApiError::NotFound(status.message());
    case StatusCode::kResourceExhausted:
      return ApiError::Overloaded(status.message(), retry_after_s);
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      return ApiError::Unavailable(status.message(), retry_after_s);
    case StatusCode::kDeadlineExceeded:
      return ApiError::Timeout(status.message());
    default:
      return ApiError::Internal(status.message().empty() ? status.ToString()
                                                         : status.message());
  }
}

std::string BuildErrorBody(const ApiError& error) {
  json::object inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = NullIfEmpty(error.param);
  inner["code"] = NullIfEmpty(error.code);
  json::object outer;
  outer["error"] = std::move(inner);
  return json::serialize(outer);
}

std::string BuildNumericCodeErrorBody(const ApiError& error) {
  json::object inner;
  inner["code"] = error.http_status;
  inner["message"] = error.message;
  inner["type"] = error.type;
  json::object outer;
  outer["error"] = std::move(inner);
  return json::serialize(outer);
}

std::optional<ApiError> ParseErrorBody(std::string_view body) {
  json::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::value* e = v.get_object().if_contains("error");
  if (e == nullptr || e->is_null()) return std::nullopt;
  return internal::ErrorFromJson(*e);
}

}  // namespace redline::api

#include "server/api_error.h"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace redline::server {

std::string_view ErrorClassName(ErrorClass c) {
  switch (c) {
    case ErrorClass::kBadRequest:
      return "bad_request";
    case ErrorClass::kUnauthorized:
      return "unauthorized";
    case ErrorClass::kNotFound:
      return "not_found";
    case ErrorClass::kTooLarge:
      return "too_large";
    case ErrorClass::kOverloaded:
      return "overloaded";
    case ErrorClass::kUnavailable:
      return "unavailable";
    case ErrorClass::kTimeout:
      return "timeout";
    case ErrorClass::kCancelled:
      return "cancelled";
    case ErrorClass::kInternal:
      return "internal";
  }
  return "internal";
}

ApiError ApiError::BadRequest(std::string message, std::string param,
                              std::string code) {
  return {400,
          "invalid_request_error",
          std::move(message),
          std::move(param),
          std::move(code),
          ErrorClass::kBadRequest,
          0};
}

ApiError ApiError::Unauthorized(std::string message) {
  return {401, "authentication_error", std::move(message),
          {},  "invalid_api_key",      ErrorClass::kUnauthorized,
          0};
}

ApiError ApiError::NotFound(std::string message, std::string param,
                            std::string code) {
  return {404,
          "not_found_error",
          std::move(message),
          std::move(param),
          std::move(code),
          ErrorClass::kNotFound,
          0};
}

ApiError ApiError::MethodNotAllowed(std::string message) {
  return {405, "invalid_request_error", std::move(message),
          {},  "method_not_allowed",    ErrorClass::kBadRequest,
          0};
}

ApiError ApiError::TooLarge(std::string message) {
  return {413, "invalid_request_error", std::move(message),
          {},  "request_too_large",     ErrorClass::kTooLarge,
          0};
}

ApiError ApiError::Overloaded(std::string message, int retry_after_s) {
  return {429,
          "rate_limit_error",
          std::move(message),
          {},
          "queue_full",
          ErrorClass::kOverloaded,
          retry_after_s < 1 ? 1 : retry_after_s};
}

ApiError ApiError::Unavailable(std::string message, int retry_after_s) {
  return {503,           "unavailable_error",      std::move(message), {},
          "unavailable", ErrorClass::kUnavailable, retry_after_s};
}

ApiError ApiError::Timeout(std::string message) {
  return {504, "timeout_error",   std::move(message),
          {},  "request_timeout", ErrorClass::kTimeout,
          0};
}

ApiError ApiError::Internal(std::string message) {
  return {500, "server_error",   std::move(message),
          {},  "internal_error", ErrorClass::kInternal,
          0};
}

ApiError ApiErrorFromStatus(const Status& status, int retry_after_s) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return ApiError::BadRequest(status.message());
    case StatusCode::kOutOfRange:
      return ApiError::BadRequest(status.message(), "max_tokens",
                                  "context_length_exceeded");
    case StatusCode::kResourceExhausted:
      return ApiError::Overloaded(status.message(), retry_after_s);
    case StatusCode::kUnavailable:
      return ApiError::Unavailable(status.message(), retry_after_s);
    case StatusCode::kDeadlineExceeded:
      return ApiError::Timeout(status.message());
    case StatusCode::kCancelled: {
      ApiError e = ApiError::Unavailable(status.message());
      e.error_class = ErrorClass::kCancelled;
      return e;
    }
    default:
      return ApiError::Internal(status.message().empty() ? status.ToString()
                                                         : status.message());
  }
}

std::string ApiErrorJson(const ApiError& error) {
  boost::json::object inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  if (error.param.empty()) {
    inner["param"] = nullptr;
  } else {
    inner["param"] = error.param;
  }
  if (error.code.empty()) {
    inner["code"] = nullptr;
  } else {
    inner["code"] = error.code;
  }
  boost::json::object outer;
  outer["error"] = std::move(inner);
  return boost::json::serialize(outer);
}

}  // namespace redline::server

#include "server/error_class.h"

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

ErrorClass ErrorClassOf(const api::ApiError& error) {
  switch (error.http_status) {
    case 400:
    case 405:
    case 501:
      return ErrorClass::kBadRequest;
    case 401:
      return ErrorClass::kUnauthorized;
    case 404:
      return ErrorClass::kNotFound;
    case 413:
    case 431:
      return ErrorClass::kTooLarge;
    case 429:
      return ErrorClass::kOverloaded;
    case 503:
      return ErrorClass::kUnavailable;
    case 408:
    case 504:
      return ErrorClass::kTimeout;
    default:
      return ErrorClass::kInternal;
  }
}

}  // namespace redline::server

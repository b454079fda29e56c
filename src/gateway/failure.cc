#include "gateway/failure.h"

namespace redline::gateway {

std::string_view FailureName(Failure f) {
  switch (f) {
    case Failure::kConnect:
      return "connect";
    case Failure::kReset:
      return "reset";
    case Failure::kProtocol:
      return "protocol";
    case Failure::kFirstByteTimeout:
      return "first_byte_timeout";
    case Failure::kIdleTimeout:
      return "idle_timeout";
    case Failure::kHttp5xx:
      return "http_5xx";
    case Failure::kBusy:
      return "busy";
    case Failure::kStreamError:
      return "stream_error";
    case Failure::kDeadline:
      return "deadline";
    case Failure::kTooLarge:
      return "too_large";
  }
  return "unknown";
}

bool Retryable(Failure f) {
  return f != Failure::kDeadline && f != Failure::kTooLarge;
}

bool CountsTowardEjection(Failure f) {
  return f != Failure::kBusy && f != Failure::kDeadline &&
         f != Failure::kTooLarge;
}

bool FailureOfTransport(http::TransportError e, Failure* out) {
  switch (e) {
    case http::TransportError::kNone:
    case http::TransportError::kCancelled:
      return false;
    case http::TransportError::kConnect:
      *out = Failure::kConnect;
      return true;
    case http::TransportError::kWrite:
    case http::TransportError::kClosedBeforeResponse:
    case http::TransportError::kClosedMidResponse:
      *out = Failure::kReset;
      return true;
    case http::TransportError::kTimeoutTotal:
      *out = Failure::kDeadline;
      return true;
    case http::TransportError::kTimeoutIdle:
      *out = Failure::kIdleTimeout;
      return true;
    case http::TransportError::kProtocol:
      *out = Failure::kProtocol;
      return true;
  }
  return false;
}

}  // namespace redline::gateway

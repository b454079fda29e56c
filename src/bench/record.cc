#include "bench/record.h"

#include <fmt/format.h>

#include "http/server.h"

namespace redline::bench {

std::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kCold:
      return "cold";
    case Phase::kWarmup:
      return "warmup";
    case Phase::kMeasure:
      return "measure";
    case Phase::kCooldown:
      return "cooldown";
  }
  return "?";
}

std::string_view ErrorClassKey(ErrorClass error) {
  switch (error) {
    case ErrorClass::kNone:
      return "ok";
    case ErrorClass::kConnect:
      return "connect";
    case ErrorClass::kTimeout:
      return "timeout";
    case ErrorClass::kHttp429:
      return "http_429";
    case ErrorClass::kHttp4xx:
      return "http_4xx";
    case ErrorClass::kHttp5xx:
      return "http_5xx";
    case ErrorClass::kAbort:
      return "abort";
    case ErrorClass::kParse:
      return "parse";
  }
  return "?";
}

std::string_view TokenSourceName(TokenSource source) {
  switch (source) {
    case TokenSource::kNone:
      return "none";
    case TokenSource::kUsage:
      return "usage";
    case TokenSource::kTokenizer:
      return "tokenizer";
    case TokenSource::kChunks:
      return "chunks";
  }
  return "?";
}

ErrorClass Classify(const AttemptFacts& f) {
  if (f.connect_failed) return ErrorClass::kConnect;
  if (f.timeout != TimeoutKind::kNone) return ErrorClass::kTimeout;
  if (f.status == 429) return ErrorClass::kHttp429;
  if (f.status >= 400 && f.status <= 499) return ErrorClass::kHttp4xx;
  if (f.status >= 500 && f.status <= 599) return ErrorClass::kHttp5xx;
  if (f.status == 0) {
    // Written, then closed before any status line: the exchange started and
    // was cut off, the closest class is a mid-stream abort.
    return ErrorClass::kAbort;
  }
  if (f.status < 200 || f.status > 299) return ErrorClass::kParse;
  // 2xx from here on.
  if (f.closed_early || f.error_event) return ErrorClass::kAbort;
  if (f.streaming && !f.done_seen) return ErrorClass::kAbort;
  if (f.parse_error) return ErrorClass::kParse;
  if (f.streaming && !f.finish_seen)
    return ErrorClass::kParse;  // [DONE] without finish_reason
  return ErrorClass::kNone;
}

std::string RequestRecord::FailureLabel() const {
  if (ok()) return "";
  std::string reason;
  switch (error) {
    case ErrorClass::kTimeout:
      reason = timeout == TimeoutKind::kIdle ? "stream idle timeout"
                                             : "total timeout";
      break;
    case ErrorClass::kHttp429:
    case ErrorClass::kHttp4xx:
    case ErrorClass::kHttp5xx:
      // The phrase, or "Client Error"/"Server Error" for codes without one.
      reason = std::string(http::ReasonPhrase(http_status));
      break;
    default:
      reason = error_detail.empty() ? std::string(ErrorClassKey(error))
                                    : error_detail;
      break;
  }
  if (reason.size() > 80) reason.resize(80);
  return fmt::format("{:03d} - {}", http_status, reason);
}

}  // namespace redline::bench

// Why one upstream attempt failed, how the gateway reacts to each kind, and
// the label each gets in the metrics.
//
//   class               retried*  counts toward ejection  client gets (last try)
//   connect             yes       yes                     502 upstream_error
//   reset               yes       yes                     502 upstream_error
//   protocol            yes       yes                     502 upstream_error
//   first_byte_timeout  yes       yes                     504 request_timeout
//   idle_timeout        yes       yes                     504 request_timeout
//   http_5xx            yes       yes                     the upstream's answer
//   busy                yes       no (backed off)         the upstream's answer
//     (a 429, or a 503 with Retry-After: backed off for that long)
//   stream_error        yes       yes                     502 upstream_error
//   deadline            no        no                      504 request_timeout
//   too_large           no        no                      502 upstream_error
//
// * only before any byte reached the client, within the retry count, the
//   pool's retry budget and the deadline. After the first byte of a stream
//   nothing is retried: the client gets an in-stream error event.
//
// Thread-safety: pure functions.
#ifndef REDLINE_GATEWAY_FAILURE_H_
#define REDLINE_GATEWAY_FAILURE_H_

#include <string_view>

#include "http/client.h"

namespace redline::gateway {

enum class Failure {
  kConnect,
  kReset,
  kProtocol,
  kFirstByteTimeout,
  kIdleTimeout,
  kHttp5xx,
  kBusy,
  kStreamError,
  kDeadline,
  kTooLarge,
};
inline constexpr int kNumFailures = 10;

std::string_view FailureName(Failure f);
bool Retryable(Failure f);
// Counts toward passive ejection (the upstream looks broken, not busy).
bool CountsTowardEjection(Failure f);
// A transport error's class; kCancelled and kNone have none (false).
bool FailureOfTransport(http::TransportError e, Failure* out);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_FAILURE_H_

// Preflight: before any load, one look at the target, so that a wrong URL,
// a server that is down or one that is not an OpenAI API (an HTML page, a
// proxy's error) is named at once instead of being measured as a run of
// failures.
//
// Checks, in order: the URL is the API base (not .../chat/completions);
// GET {base}/models connects, is not refused for a missing key, and a 2xx
// answer is an OpenAI models list. A 404 passes (some servers have no
// /models) unless its body is not JSON (a web server's 404 page); any other
// status passes too, and the run itself will show it.
//
// Thread-safety: runs its own event loop on the calling thread. Cost: one
// request, bounded by `timeout_ms`.
#ifndef REDLINE_BENCH_PREFLIGHT_H_
#define REDLINE_BENCH_PREFLIGHT_H_

#include <cstdint>

#include "base/status.h"
#include "bench/runner.h"

namespace redline::bench {

// OK, or InvalidArgument (wrong URL, not an OpenAI API) / Unavailable (down,
// unauthorized) with a message for the user that says what to change.
Status Preflight(const RunConfig& config, int64_t timeout_ms = 5000);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_PREFLIGHT_H_

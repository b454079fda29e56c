// Durations as the gateway's config file and flags write them: a number
// with a unit ("250ms", "2s", "1.5s", "1m", "1h", "500us"), or "0".
//
// Thread-safety: pure functions.
#ifndef REDLINE_GATEWAY_DURATION_H_
#define REDLINE_GATEWAY_DURATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace redline::gateway {

// Milliseconds (rounded up to a whole ms for "us"). A bare number other
// than 0, a negative value or an unknown unit is InvalidArgument: "30"
// could mean seconds or milliseconds, and guessing wrong is a silent
// thousand-fold misconfiguration.
Result<int64_t> ParseDurationMs(std::string_view text);

// "250ms", "2s", "1.5s", "0" (for logs and --help defaults).
std::string FormatDurationMs(int64_t ms);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_DURATION_H_

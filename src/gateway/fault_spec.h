// Faults that `redline chaos` (chaos_proxy.h) injects into TCP traffic, and
// their text form, shared by the --fault flag and the control endpoint:
//
//   latency=500ms     delay every byte from the target by this much
//   latency-up=100ms  the same for bytes towards the target
//   jitter=50ms       plus a random 0..jitter per piece (order is kept)
//   bandwidth=64k     bytes/s from the target per connection (k, m suffixes)
//   drop-after=4096   reset a connection after this many bytes from the target
//   reset             reset every connection (and each new one at once)
//   blackhole         accept and never forward anything either way
//   refuse            stop listening (connects are refused)
//   clear             no faults
//
// Several faults join with ';' ("latency=200ms;jitter=20ms"). A schedule is
// "TIME:FAULTS" steps joined with ',' ("10s:latency=500ms,20s:reset,30s:
// clear"); each step replaces the faults in force, and a step without a
// time applies at 0.
//
// Thread-safety: plain values and pure functions.
#ifndef REDLINE_GATEWAY_FAULT_SPEC_H_
#define REDLINE_GATEWAY_FAULT_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::gateway {

struct Faults {
  int64_t latency_down_ms = 0;
  int64_t latency_up_ms = 0;
  int64_t jitter_ms = 0;
  int64_t bandwidth_bytes_per_s = 0;  // 0: unlimited
  int64_t drop_after_bytes = -1;      // < 0: never
  bool reset = false;
  bool blackhole = false;
  bool refuse = false;

  bool operator==(const Faults&) const = default;
};

struct FaultStep {
  int64_t at_ms = 0;
  Faults faults;
};

Result<Faults> ParseFaults(std::string_view text);
// Steps in time order.
Result<std::vector<FaultStep>> ParseFaultSchedule(std::string_view text);
// "latency=500ms;reset", or "clear".
std::string DescribeFaults(const Faults& f);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_FAULT_SPEC_H_

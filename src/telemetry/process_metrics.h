// Process metrics with the standard Prometheus names
// (process_cpu_seconds_total, process_resident_memory_bytes, ...), read from
// /proc/self at scrape time, as the official client libraries export them.
//
// Thread-safety: ReadProcessStats is thread-safe (reads /proc only).
// Cost: a few small /proc reads and a directory scan of /proc/self/fd per
// call (tens of microseconds); call it per scrape, not per request.
#ifndef REDLINE_TELEMETRY_PROCESS_METRICS_H_
#define REDLINE_TELEMETRY_PROCESS_METRICS_H_

#include <cstdint>

#include "base/result.h"
#include "telemetry/metrics.h"

namespace redline::telemetry {

struct ProcessStats {
  // User + system time of every thread.
  double cpu_seconds = 0;
  // RSS.
  int64_t resident_bytes = 0;
  // Address-space size.
  int64_t virtual_bytes = 0;
  int64_t open_fds = 0;
  // Soft RLIMIT_NOFILE.
  int64_t max_fds = 0;
  // Unix time the process started.
  double start_time_seconds = 0;
};

// Errors: Unimplemented where /proc is absent (not Linux), IoError when a
// file cannot be read or parsed.
Result<ProcessStats> ReadProcessStats();

// Registers process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds and
// process_start_time_seconds, refreshed by a collector at each scrape.
void RegisterProcessMetrics(Registry& registry);

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_PROCESS_METRICS_H_

// Saturation signals for /metrics: the numbers that say whether latency is
// about to multiply because the machine, not the model, is the limit —
// CPU utilisation (this process's and the whole machine's), memory used
// against the limit that applies (the cgroup's when there is one, else the
// machine's), swap-in activity and CPU pressure stall time.
//
// Utilisations are computed between consecutive reads (scrapes), so a
// gauge says how busy the last scrape interval was. The parsers take the
// file contents as strings so tests feed them fixtures.
//
// Thread-safety: SystemSampler is internally locked. Cost: a handful of
// small /proc and /sys reads per sample.
#ifndef REDLINE_TELEMETRY_SYSTEM_METRICS_H_
#define REDLINE_TELEMETRY_SYSTEM_METRICS_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "telemetry/metrics.h"

namespace redline::telemetry {

// /proc/stat's first line: total and idle (idle + iowait) jiffies.
struct CpuTimes {
  uint64_t total = 0;
  uint64_t idle = 0;
};
std::optional<CpuTimes> ParseProcStat(std::string_view text);

// /proc/vmstat's pswpin (pages swapped in since boot).
std::optional<int64_t> ParseSwapIn(std::string_view vmstat);

// /proc/meminfo's MemTotal and MemAvailable, bytes.
struct MemInfo {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};
std::optional<MemInfo> ParseMemInfo(std::string_view meminfo);

// A cgroup limit file ("max" or a byte count): nullopt for "max" or junk.
std::optional<int64_t> ParseCgroupBytes(std::string_view text);

// /proc/pressure/cpu "some ... total=N" (microseconds stalled).
std::optional<int64_t> ParsePressureTotalUs(std::string_view text);

struct SystemSample {
  double system_cpu_utilization = -1;   // [0, 1] of all CPUs; -1 unknown
  double process_cpu_utilization = -1;  // [0, 1] of all CPUs
  int64_t memory_used_bytes = -1;
  int64_t memory_limit_bytes = -1;
  int64_t swap_in_pages = -1;              // cumulative
  double cpu_pressure_stall_seconds = -1;  // cumulative
};

// Takes consecutive samples; utilisations are over the time between them
// (the first sample has none).
class SystemSampler {
 public:
  SystemSample Sample();

 private:
  std::mutex mu_;
  std::optional<CpuTimes> last_cpu_;
  double last_process_cpu_s_ = -1;
  int64_t last_wall_ns_ = 0;
};

// Registers, with `prefix` ("redline_"): system_cpu_utilization,
// process_cpu_utilization, memory_used_bytes, memory_limit_bytes,
// swap_in_pages_total, cpu_pressure_stall_seconds_total; refreshed by a
// collector at each scrape.
void RegisterSystemMetrics(Registry& registry, const std::string& prefix);

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_SYSTEM_METRICS_H_

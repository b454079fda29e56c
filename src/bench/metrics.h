// Turns RequestRecords into the metrics docs/METRICS.md defines (the anchors
// of its sections in brackets): per-request latencies [#latencies],
// schedule-relative latencies [#run-validity], rates and the measurement
// window [#rates], goodput [#goodput], HDR distributions with success-only
// and error-adjusted views [#percentiles, #error-adjusted-percentiles] and
// error classes [#error-classes].
//
// Pure functions of the records: no clock is read here, so tests drive them
// with hand-made timestamps.
//
// Thread-safety: thread-compatible values. Cost: O(records + chunks).
#ifndef REDLINE_BENCH_METRICS_H_
#define REDLINE_BENCH_METRICS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/histogram.h"
#include "bench/record.h"

namespace redline::bench {

// Latency distributions, recorded in microseconds.
enum class Metric : uint8_t {
  kTtft,           // c_first - t_send (streaming)
  kTtfo,           // first non-reasoning content - t_send
  kTtftSched,      // c_first - t_sched
  kE2e,            // c_last - t_send (streaming) or last body byte - t_send
  kE2eStream,      // t_end - t_send
  kE2eSched,       // c_last - t_sched
  kTpot,           // (E2E - TTFT) / (N - 1), N >= 2
  kNtpot,          // E2E / N, N >= 1
  kItl,            // every gap c_j - c_{j-1}, j >= 2, pooled (success only)
  kDispatchDelay,  // t_send - t_sched, every sent request
};
inline constexpr int kNumMetrics = 10;
inline constexpr std::array<Metric, kNumMetrics> kAllMetrics = {
    Metric::kTtft,         Metric::kTtfo,      Metric::kTtftSched,
    Metric::kE2e,          Metric::kE2eStream, Metric::kE2eSched,
    Metric::kTpot,         Metric::kNtpot,     Metric::kItl,
    Metric::kDispatchDelay};

// "ttft", "ttfo", "ttft_sched", "e2e", "e2e_stream", "e2e_sched", "tpot",
// "ntpot", "itl", "dispatch_delay".
std::string_view MetricKey(Metric metric);
std::optional<Metric> MetricFromKey(std::string_view key);

// True for the metrics whose error-adjusted view adds one +inf per failed
// request (docs/METRICS.md#error-adjusted-percentiles); false for itl (per
// chunk) and dispatch_delay (a property of the client, recorded for every
// sent request).
bool MetricIsErrorAdjusted(Metric metric);

// Per-request SLO for goodput (docs/METRICS.md#goodput); 0 means "not part
// of the SLO".
struct GoodputSlo {
  int64_t ttft_us = 0;
  int64_t tpot_us = 0;
  int64_t e2e_us = 0;
  int64_t itl_us = 0;  // checked on the request's mean chunk gap
  bool any() const { return ttft_us || tpot_us || e2e_us || itl_us; }
};

// Per-request derived latencies in microseconds (nullopt when undefined).
struct RequestLatencies {
  std::optional<int64_t> ttft_us, ttfo_us, ttft_sched_us, e2e_us, e2e_stream_us,
      e2e_sched_us;
  std::optional<int64_t> tpot_us, ntpot_us, dispatch_delay_us, mean_itl_us;
};
RequestLatencies ComputeLatencies(const RequestRecord& r);

// True when the request succeeded and meets every SLO given.
bool IsGood(const RequestRecord& r, const RequestLatencies& lat,
            const GoodputSlo& slo);

struct PhaseStats {
  Phase phase = Phase::kMeasure;
  // Arrivals the plan scheduled in this phase.
  int64_t planned = 0;
  // Requests of this phase (every outcome).
  int64_t attempted = 0;
  // Requests with a t_send.
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t good = 0;
  // Indexed by ErrorClass.
  std::array<int64_t, kNumErrorClasses> errors{};
  // Most frequent first.
  std::vector<std::pair<std::string, int64_t>> failure_labels;
  int64_t timeouts_total = 0;
  int64_t timeouts_idle = 0;

  // Success-only samples (dispatch: all sent).
  std::array<Histogram, kNumMetrics> hist;

  // docs/METRICS.md#rates. Seconds and per-second rates; 0 when the window
  // is empty.
  double window_s = 0;
  double send_window_s = 0;
  // Planned arrivals / window.
  double offered_rps = 0;
  // Sends / send window.
  double achieved_send_rps = 0;
  // Ok requests / window.
  double completed_rps = 0;
  // Sum of N over ok requests / window.
  double output_tps = 0;
  // Busiest 1 s bucket of token arrivals.
  double peak_output_tps = 0;
  // Time-weighted requests in flight.
  double mean_concurrency = 0;
  // docs/METRICS.md#goodput.
  double goodput_rps = 0;
  double token_goodput_tps = 0;
  // Good requests / attempted requests.
  double good_fraction = 0;

  // Over ok requests.
  int64_t output_tokens = 0;
  // Ok requests per TokenSource.
  std::array<int64_t, 4> token_sources{};
  int64_t t_first_send_ns = 0;
  int64_t t_last_end_ns = 0;
  // Planned schedule span (first to last t_sched of planned arrivals), used
  // by the send-rate validity check.
  double sched_window_s = 0;

  const Histogram& Hist(Metric m) const { return hist[static_cast<int>(m)]; }
  // Number of +inf samples the error-adjusted view of `m` adds.
  int64_t Infinite(Metric m) const {
    return MetricIsErrorAdjusted(m) ? failed : 0;
  }
  // Adds r's samples (lat = ComputeLatencies(r)) to hist: dispatch delay for
  // every request, the other latencies and per-chunk ITL for ok ones.
  void RecordLatencies(const RequestRecord& r, const RequestLatencies& lat);
  // Nearest-rank percentile in microseconds; error-adjusted when `adjusted`.
  double Percentile(Metric m, double q, bool adjusted) const;
  // Mean / min / max in microseconds; the adjusted mean and max are +inf
  // when any request failed. NaN when there are no samples.
  double Mean(Metric m, bool adjusted) const;
  double Min(Metric m, bool adjusted) const;
  double Max(Metric m, bool adjusted) const;
  int64_t SampleCount(Metric m, bool adjusted) const {
    return Hist(m).count() + (adjusted ? Infinite(m) : 0);
  }
  // count / attempted for one class; all failures for nullopt.
  double ErrorRate(std::optional<ErrorClass> cls) const;
  int64_t ErrorCount(std::optional<ErrorClass> cls) const;
  // Mixed token sources among ok requests (reports warn about them,
  // docs/METRICS.md#token-counts).
  bool MixedTokenSources() const;
};

// Computes the statistics of the records of `phase`. `planned` is the
// number of arrivals the plan scheduled in the phase (open loop); pass -1 to
// use the number of attempted requests (closed loop).
PhaseStats ComputePhaseStats(std::span<const RequestRecord> records,
                             Phase phase, const GoodputSlo& slo,
                             int64_t planned = -1);

// Nanoseconds to whole microseconds, rounded to nearest.
inline int64_t NsToUs(int64_t ns) { return (ns + 500) / 1000; }

}  // namespace redline::bench

#endif  // REDLINE_BENCH_METRICS_H_

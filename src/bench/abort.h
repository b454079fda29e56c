// Early abort of a run (k6 thresholds with abortOnFail and delayAbortEval):
// decides, while the run goes on, that a threshold marked `abort`
// (bench/threshold.h) has failed, so the run can stop instead of spending
// the rest of its time on a verdict that is already known.
//
// A threshold aborts the run when either
//   - it has failed for good: whatever the remaining requests do, the final
//     value cannot pass. That holds for aggregations that only move one way
//     (count and max only grow, min only shrinks, an error-adjusted mean is
//     +inf after one failure) and, when the number of measured requests is
//     known in advance (--requests), for rates and percentiles (enough errors
//     or slow requests already counted against the final total). No delay
//     applies: the outcome is certain;
//   - or it fails on the requests finished so far and its evaluation delay
//     (time since the first measured request was due) has passed, so a few
//     early requests cannot end the run (k6 delayAbortEval).
// Only finished requests count; requests in flight have no outcome yet.
//
// Thread-safety: thread-compatible (the runner uses it on its loop thread).
// Cost: Add() is O(1) plus one histogram record per metric and chunk;
// Check() is O(histogram buckets) per watched threshold.
#ifndef REDLINE_BENCH_ABORT_H_
#define REDLINE_BENCH_ABORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/metrics.h"
#include "bench/record.h"
#include "bench/threshold.h"

namespace redline::bench {

struct AbortDecision {
  std::string threshold;  // the assertion as written
  double observed = 0;    // its value on the requests finished so far
  bool certain = false;   // failed for good (no delay needed)
  std::string reason;     // one line for the report
};

// Decides for one threshold. `stats` holds the measurement-phase requests
// finished so far; `elapsed_ns` is the time since the measurement phase
// began; `planned_total` is the number of measured requests the run will
// attempt when known in advance, else -1.
std::optional<AbortDecision> DecideAbort(const Threshold& threshold,
                                         const PhaseStats& stats,
                                         int64_t elapsed_ns,
                                         int64_t planned_total);

// Accumulates finished measurement-phase requests and checks the watched
// thresholds against them.
class AbortMonitor {
 public:
  // Keeps the thresholds with abort_on_fail set.
  AbortMonitor(const std::vector<Threshold>& thresholds, int64_t planned_total);

  bool empty() const { return watched_.empty(); }
  // Adds one finished request (any phase other than measure is ignored).
  void Add(const RequestRecord& record);
  // The first watched threshold that aborts the run now, if any.
  std::optional<AbortDecision> Check(int64_t elapsed_ns) const;

 private:
  std::vector<Threshold> watched_;
  int64_t planned_total_;
  PhaseStats stats_;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_ABORT_H_

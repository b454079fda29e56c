// Capacity search (--find-max-rate, docs/BENCH.md#capacity-search): a
// closed-loop saturation probe finds the ceiling, then the offered rate is
// bisected below it to a resolution (and, while no rate has failed
// conclusively, looked for above it), and the final pass/fail pair is
// measured again. The result is a range, [highest rate that passed, lowest
// rate that failed], with a confidence.
//
// Each step is isolated: RunLoad waits for every request of the step to
// finish, and with a scrape URL the search then waits (bounded) until the
// server's waiting/running gauges are back at their idle values before the
// next step starts. A step is judged only on the requests sent in its own
// measurement window.
//
// Each step is long enough for its percentile thresholds: a percentile
// verdict needs `min_samples` requests, and a pass needs the interval's
// upper end (bench/quantile_ci.h), so p99 at 95 % needs 368. A step is
// planned that long (up to `max_step_ns`); a step short of samples is
// "insufficient samples", never a pass or fail. A percentile whose
// confidence interval contains the threshold makes the step "inconclusive".
// Each side is judged at (1 + confidence) / 2 one-sided, so the range holds
// at `confidence` when latency grows with the rate.
//
// Thread-safety: blocks its caller, like RunLoad. Cost: the saturation
// probe plus up to max_probes + 5 steps per repeat, each a full run.
#ifndef REDLINE_BENCH_CAPACITY_H_
#define REDLINE_BENCH_CAPACITY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/threshold.h"
#include "bench/workload.h"

namespace redline::bench {

struct CapacityOptions {
  int probe_users = 64;  // closed-loop saturation probe concurrency
  int max_probes = 8;    // bisection steps after the ceiling probe
  // Stop when the bracket is this narrow (relative to its upper end).
  double resolution = 0.05;
  // Requests a step needs for any percentile verdict.
  int64_t min_samples = 100;
  double confidence = 0.95;
  // Upper bound of a step's measurement window (0: 5 x the base duration,
  // at least 10 s).
  int64_t max_step_ns = 0;
  int repeat = 1;           // whole searches; the spread is reported
  double expected_rps = 0;  // planning numbers; 0 when unknown
  // Prometheus URL whose waiting/running gauges must be idle before a step;
  // empty: steps start when the client's requests are done.
  std::string scrape_url;
  int64_t drain_timeout_ns = 30'000'000'000;
  std::function<void(const std::string&)> log;  // one line per step
};

struct CapacityRun {
  CapacityResult result;
  RunResult best_run;  // the run at the capacity rate (or the last step)
  // The step at the knee (KneeRate over every step: what breaks first, the
  // bottleneck finder reads it); empty when no step failed there.
  RunResult knee_run;
  double knee_rps = 0;
  bool found = false;
};

// `base` supplies target, workload, warm-up and duration; its load model is
// replaced per step.
Result<CapacityRun> FindMaxRate(const RunConfig& base, Workload& workload,
                                const std::vector<Threshold>& thresholds,
                                const ValidityOptions& validity,
                                const CapacityOptions& options);

// ---- pieces, exposed for tests ----

// Requests a step needs so that every percentile threshold can reach a
// verdict (at least options.min_samples).
int64_t StepSamplesNeeded(const std::vector<Threshold>& thresholds,
                          const CapacityOptions& options);

// Judges one step's run: the point the report shows.
CapacityPoint JudgeStep(const RunResult& run,
                        const std::vector<Threshold>& thresholds,
                        const ValidityOptions& validity, double offered_rps,
                        const CapacityOptions& options);

// Load gauges a drain waits on: names ending in num_requests_waiting,
// num_requests_running, requests_processing or requests_deferred.
bool IsLoadGauge(std::string_view name);

// The range from a search's steps: low = highest rate whose every
// measurement passed and that lies below every conclusive fail; high =
// lowest rate whose every measurement failed, above low.
CapacitySearch RangeFromSteps(const std::vector<CapacityPoint>& steps,
                              double ceiling_rps);

// The knee of a search: the lowest rate that failed with no pass at that
// rate or above. A failure below a rate that held is noise (a stall of the
// client or the host), not what breaks first. 0 when every failure lies
// below some pass, or none failed. Cost O(passes + fails).
double KneeRate(std::span<const double> pass_rps,
                std::span<const double> fail_rps);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_CAPACITY_H_

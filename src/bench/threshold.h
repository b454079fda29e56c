// Thresholds (SLO assertions) in the k6-like syntax of
// docs/METRICS.md#thresholds:
//
//   <metric>[{tag:value}]: <aggregation><op><value>[unit] [, more ...]
//
//   e2e: p(50)<1s, p(95)<2s, p(99)<3s      ttft{phase:cold}: max<5s
//   errors: rate<0.1%     http_5xx: rate<0.1%     good_fraction: value>=99%
//
// Latency trends (ttft, ttfo, ttft_sched, e2e, e2e_stream, e2e_sched, tpot,
// ntpot, itl, dispatch_delay) take avg, min, max, med, p(N) and a time with
// a unit; every trend except itl and dispatch_delay is judged on its
// error-adjusted distribution (docs/METRICS.md#error-adjusted-percentiles),
// so failed requests count as +inf.
// Error classes (errors, connect, timeout, http_429, http_4xx, http_5xx,
// abort, parse) take rate (% or fraction) or count. Scalars (goodput,
// good_fraction, completed_rps, output_tps, offered_rps, achieved_send_rps,
// peak_output_tps, token_goodput, concurrency) take value.
// The only tag is phase (cold, warmup, measure); default measure.
//
// Early abort (k6 abortOnFail, delayAbortEval): an assertion followed by
// `abort` or `abort(<delay>)` stops the run as soon as it has failed for good,
// or as soon as it fails on the requests finished so far once <delay> of the
// measurement phase has passed (default kDefaultAbortDelayNs):
//
//   errors: rate<1% abort        e2e: p(99)<3s abort(30s), p(50)<1s
//
// Only latency trends and error classes of the measurement phase can abort
// (scalars such as goodput are defined over the whole window). bench/abort.h
// holds the decision.
//
// Thread-safety: plain values; thread-compatible.
#ifndef REDLINE_BENCH_THRESHOLD_H_
#define REDLINE_BENCH_THRESHOLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "bench/metrics.h"
#include "bench/record.h"

namespace redline::bench {

enum class CompareOp { kLt, kLe, kGt, kGe, kEq, kNe };
enum class Aggregation {
  kAvg,
  kMin,
  kMax,
  kMed,
  kPercentile,
  kRate,
  kCount,
  kValue
};

struct Threshold {
  // The assertion as written, e.g. "e2e: p(99)<3s".
  std::string source;
  // Canonical key, e.g. "e2e", "timeout", "good_fraction".
  std::string metric_key;
  Phase phase = Phase::kMeasure;
  Aggregation aggregation = Aggregation::kValue;
  // For kPercentile.
  double percentile = 0;
  CompareOp op = CompareOp::kLt;
  // Microseconds for trends; fraction for rates; plain otherwise.
  double value = 0;
  bool abort_on_fail = false;
  // Of the measurement phase, before a failing value aborts.
  int64_t abort_delay_ns = 0;
};

inline constexpr int64_t kDefaultAbortDelayNs = 10'000'000'000;

// True when the threshold may carry `abort` (a measurement-phase latency
// trend or error class).
bool CanAbortOnFail(const Threshold& threshold);

// Parses one expression (one metric, one or more assertions).
Result<std::vector<Threshold>> ParseThresholds(std::string_view expression);

// The assertions of a named profile ("three-second").
Result<std::vector<Threshold>> ProfileThresholds(std::string_view profile);

// Stats of each phase, as the evaluator needs them (null when absent).
struct PhaseStatsSet {
  const PhaseStats* cold = nullptr;
  const PhaseStats* warmup = nullptr;
  const PhaseStats* measure = nullptr;
  const PhaseStats* Get(Phase p) const;
};

struct ThresholdResult {
  Threshold threshold;
  bool pass = false;
  double observed = 0;  // the value judged (error-adjusted where it applies)
  std::optional<double> success_only;  // success-only value for adjusted trends
  std::string note;                    // e.g. "no samples"
};

std::vector<ThresholdResult> EvaluateThresholds(
    const std::vector<Threshold>& thresholds, const PhaseStatsSet& stats);

// Per-request goodput SLO implied by the measure-phase thresholds: for each
// of ttft, tpot, e2e and itl, the loosest upper bound given with avg, med,
// max or p(N) (e2e p(50)<1s, p(99)<3s gives e2e <= 3 s per request).
// `--goodput` overrides it.
GoodputSlo GoodputFromThresholds(const std::vector<Threshold>& thresholds);

std::string_view CompareOpText(CompareOp op);
// Formats an observed or limit value in the metric's unit ("1.24s", "0.12%").
std::string FormatThresholdValue(const Threshold& t, double v);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_THRESHOLD_H_

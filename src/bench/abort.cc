#include "bench/abort.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace redline::bench {

namespace {

bool IsUpperBound(CompareOp op) {
  return op == CompareOp::kLt || op == CompareOp::kLe;
}

// Samples of `m` (error-adjusted when it applies) that surely break the
// upper bound `t`: whole histogram buckets at or above the limit, plus one
// +inf per failed request. Conservative at the bucket holding the limit.
int64_t SamplesBreakingBound(const PhaseStats& s, Metric m,
                             const Threshold& t) {
  int64_t bad = s.Infinite(m);
  s.Hist(m).ForEachBucket([&](int64_t highest, int64_t count) {
    const double lowest = static_cast<double>(
        Histogram::LowestEquivalent(Histogram::IndexOf(highest)));
    if (t.op == CompareOp::kLt ? lowest >= t.value : lowest > t.value)
      bad += count;
  });
  return bad;
}

// True when the final value can no longer pass, whatever the requests still
// to come do. `observed` is the current (failing) value.
bool FailedForGood(const Threshold& t, const PhaseStats& s, double observed,
                   int64_t planned_total) {
  if (const std::optional<Metric> m = MetricFromKey(t.metric_key)) {
    switch (t.aggregation) {
      case Aggregation::kMax:
        return IsUpperBound(t.op);
      case Aggregation::kMin:
        return t.op == CompareOp::kGt || t.op == CompareOp::kGe;
      case Aggregation::kAvg:
        return IsUpperBound(t.op) && std::isinf(observed);
      case Aggregation::kMed:
      case Aggregation::kPercentile: {
        // Nearest rank over the final N samples (one per attempted request
        // for error-adjusted metrics): the value at rank r breaks the bound
        // once N - r + 1 samples do.
        if (!IsUpperBound(t.op) || planned_total <= 0 ||
            !MetricIsErrorAdjusted(*m))
          return false;
        const double q = t.aggregation == Aggregation::kMed ? 50 : t.percentile;
        const auto n = static_cast<double>(planned_total);
        const int64_t rank = std::max<int64_t>(
            1, static_cast<int64_t>(std::ceil(q / 100.0 * n - 1e-9)));
        return SamplesBreakingBound(s, *m, t) >= planned_total - rank + 1;
      }
      default:
        return false;
    }
  }
  // Error classes: counts only grow; the final rate is at least
  // count / planned_total.
  if (t.aggregation == Aggregation::kCount) {
    return IsUpperBound(t.op) || (t.op == CompareOp::kEq && observed > t.value);
  }
  if (t.aggregation == Aggregation::kRate && IsUpperBound(t.op) &&
      planned_total > 0) {
    const double floor_rate = observed * static_cast<double>(s.attempted) /
                              static_cast<double>(planned_total);
    return t.op == CompareOp::kLt ? floor_rate >= t.value
                                  : floor_rate > t.value;
  }
  return false;
}

}  // namespace

std::optional<AbortDecision> DecideAbort(const Threshold& threshold,
                                         const PhaseStats& stats,
                                         int64_t elapsed_ns,
                                         int64_t planned_total) {
  if (stats.attempted == 0) return std::nullopt;
  PhaseStatsSet set;
  set.measure = &stats;
  const ThresholdResult r = EvaluateThresholds({threshold}, set).front();
  if (r.pass || std::isnan(r.observed)) return std::nullopt;
  if (const std::optional<Metric> m = MetricFromKey(threshold.metric_key)) {
    if (stats.SampleCount(*m, MetricIsErrorAdjusted(*m)) == 0)
      return std::nullopt;
  }
  AbortDecision d;
  d.threshold = threshold.source;
  d.observed = r.observed;
  d.certain = FailedForGood(threshold, stats, r.observed, planned_total);
  if (!d.certain && elapsed_ns < threshold.abort_delay_ns) return std::nullopt;
  const std::string value = std::isinf(r.observed)
                                ? "inf"
                                : FormatThresholdValue(threshold, r.observed);
  d.reason = fmt::format(
      "'{}' {} after {} finished request{} ({} = {})", threshold.source,
      d.certain ? "can no longer pass" : "is failing", stats.attempted,
      stats.attempted == 1 ? "" : "s", threshold.metric_key, value);
  return d;
}

AbortMonitor::AbortMonitor(const std::vector<Threshold>& thresholds,
                           int64_t planned_total)
    : planned_total_(planned_total) {
  for (const Threshold& t : thresholds) {
    if (t.abort_on_fail && CanAbortOnFail(t)) watched_.push_back(t);
  }
}

void AbortMonitor::Add(const RequestRecord& r) {
  if (r.phase != Phase::kMeasure) return;
  PhaseStats& s = stats_;
  s.attempted++;
  if (r.sent()) s.sent++;
  s.RecordLatencies(r, ComputeLatencies(r));
  if (!r.ok()) {
    s.failed++;
    s.errors[static_cast<int>(r.error)]++;
    return;
  }
  s.ok++;
}

std::optional<AbortDecision> AbortMonitor::Check(int64_t elapsed_ns) const {
  for (const Threshold& t : watched_) {
    if (auto d = DecideAbort(t, stats_, elapsed_ns, planned_total_)) return d;
  }
  return std::nullopt;
}

}  // namespace redline::bench

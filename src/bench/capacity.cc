#include "bench/capacity.h"

#include <fmt/format.h>

#include <cmath>

#include "bench/units.h"

namespace redline::bench {

namespace {

CapacityPoint Judge(const RunResult& run,
                    const std::vector<Threshold>& thresholds,
                    const ValidityOptions& validity, double offered) {
  CapacityPoint p;
  p.offered_rps = offered;
  PhaseStats s = ComputePhaseStats(run.records, Phase::kMeasure,
                                   GoodputFromThresholds(thresholds),
                                   run.open_loop ? run.planned_measure : -1);
  const double span = s.sched_window_s + (offered > 0 ? 1.0 / offered : 0);
  p.completed_rps = run.open_loop && span > 0 ? static_cast<double>(s.ok) / span
                                              : s.completed_rps;
  p.ttft_p50_us = s.Percentile(Metric::kTtft, 50, true);
  p.ttft_p99_us = s.Percentile(Metric::kTtft, 99, true);
  p.e2e_p50_us = s.Percentile(Metric::kE2e, 50, true);
  p.e2e_p99_us = s.Percentile(Metric::kE2e, 99, true);
  p.error_rate = s.ErrorRate(std::nullopt);
  p.dispatch_p99_us = s.Hist(Metric::kDispatchDelay).empty()
                          ? 0
                          : s.Percentile(Metric::kDispatchDelay, 99, false);
  Validity v = CheckValidity(run, s, thresholds, validity);
  p.valid = v.valid;
  PhaseStatsSet set;
  set.measure = &s;
  bool all = true;
  for (const ThresholdResult& t : EvaluateThresholds(thresholds, set))
    all &= t.pass;
  const double n = static_cast<double>(std::max<int64_t>(s.planned, 1));
  const double tolerance = std::max(0.02, 3.0 / std::sqrt(n));
  const bool kept_up =
      !run.open_loop || p.completed_rps >= offered * (1 - tolerance);
  p.pass = p.valid && all && kept_up && s.ok > 0;
  return p;
}

}  // namespace

Result<CapacityRun> FindMaxRate(const RunConfig& base, Workload& workload,
                                const std::vector<Threshold>& thresholds,
                                const ValidityOptions& validity,
                                const CapacityOptions& options) {
  CapacityRun out;
  out.result.expected_rps = options.expected_rps;
  // 1. Saturation probe: closed loop at high concurrency.
  RunConfig probe = base;
  probe.mode = RunConfig::Mode::kClosed;
  probe.users = options.probe_users;
  probe.think = ThinkTime{};
  probe.cold_requests = base.cold_requests;
  RL_ASSIGN_OR_RETURN(RunResult sat, RunLoad(probe, workload));
  PhaseStats s = ComputePhaseStats(sat.records, Phase::kMeasure, {});
  out.result.ceiling_rps = s.completed_rps;
  if (options.log) {
    options.log(fmt::format(
        "saturation probe: {} users -> {:.2f} completed/s, e2e p99 {}",
        options.probe_users, s.completed_rps,
        FormatUs(s.Percentile(Metric::kE2e, 99, true))));
  }
  if (s.completed_rps <= 0) {
    out.best_run = std::move(sat);
    return out;
  }
  // 2. Bisection of the offered rate in (0, ceiling].
  double lo = 0, hi = s.completed_rps;
  double rate = hi;
  std::optional<RunResult> best, last;
  for (int i = 0; i < options.max_probes; ++i) {
    RunConfig rc = base;
    rc.mode = RunConfig::Mode::kOpen;
    rc.rate_rps = rate;
    rc.stages.clear();
    rc.cold_requests = 0;
    // Each probe starts with an empty connection pool; a warm-up keeps the
    // connects out of the measured dispatch delay.
    if (rc.warmup_ns == 0 && rc.warmup_requests == 0)
      rc.warmup_ns = std::max<int64_t>(rc.duration_ns / 5, 500'000'000);
    if (rc.max_in_flight == 0)
      rc.max_in_flight = std::max(4 * options.probe_users, 256);
    RL_ASSIGN_OR_RETURN(RunResult run, RunLoad(rc, workload));
    CapacityPoint p = Judge(run, thresholds, validity, rate);
    out.result.curve.push_back(p);
    if (options.log) {
      options.log(
          fmt::format("probe {:.2f}/s: completed {:.2f}/s, e2e p99 {}, ttft "
                      "p99 {}, errors {:.2f}% -> {}",
                      rate, p.completed_rps, FormatUs(p.e2e_p99_us),
                      FormatUs(p.ttft_p99_us), p.error_rate * 100,
                      !p.valid ? "invalid"
                      : p.pass ? "pass"
                               : "fail"));
    }
    if (p.pass) {
      lo = rate;
      out.result.capacity_rps = rate;
      best = std::move(run);
      out.found = true;
      if (i == 0) break;  // the ceiling itself holds every SLO
    } else {
      hi = rate;
      last = std::move(run);
    }
    if (hi - lo <= options.precision * hi) break;
    rate = lo > 0 ? (lo + hi) / 2 : hi / 2;
    if (lo == 0 && i >= 3)
      rate = hi / 4;  // keep looking lower when even small rates fail
  }
  if (options.expected_rps > 0)
    out.result.headroom = out.result.capacity_rps / options.expected_rps;
  if (best) {
    out.best_run = std::move(*best);
  } else if (last) {
    out.best_run = std::move(*last);
  } else {
    out.best_run = std::move(sat);
  }
  return out;
}

}  // namespace redline::bench

#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "bench/units.h"

namespace redline::bench {

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kInvalid:
      return "invalid";
  }
  return "?";
}

std::string_view StepVerdictName(StepVerdict v) {
  switch (v) {
    case StepVerdict::kPass:
      return "pass";
    case StepVerdict::kFail:
      return "fail";
    case StepVerdict::kInconclusive:
      return "inconclusive";
    case StepVerdict::kInsufficient:
      return "insufficient samples";
    case StepVerdict::kInvalid:
      return "invalid";
  }
  return "?";
}

Validity CheckValidity(const RunResult& run, const PhaseStats& measure,
                       const std::vector<Threshold>& thresholds,
                       const ValidityOptions& options) {
  Validity v;
  int64_t bound = options.dispatch_bound_us;
  if (bound <= 0) {
    double tightest = 0;
    for (const Threshold& t : thresholds) {
      if (MetricFromKey(t.metric_key) && t.metric_key != "dispatch_delay" &&
          (t.op == CompareOp::kLt || t.op == CompareOp::kLe) && t.value > 0) {
        if (tightest == 0 || t.value < tightest) tightest = t.value;
      }
    }
    bound = tightest > 0
                ? std::clamp<int64_t>(static_cast<int64_t>(tightest / 100),
                                      1000, 10'000)
                : 10'000;
  }
  v.dispatch_bound_us = bound;
  const Histogram& dd = measure.Hist(Metric::kDispatchDelay);
  if (!dd.empty()) {
    v.dispatch_p99_us = dd.ValueAtPercentile(99);
    if (v.dispatch_p99_us > static_cast<double>(bound)) {
      v.valid = false;
      v.reasons.push_back(fmt::format(
          "dispatch delay p99 {} exceeds the bound {} (the client could not "
          "keep its schedule)",
          FormatUs(v.dispatch_p99_us), FormatUs(static_cast<double>(bound))));
    }
  }
  if (run.open_loop) {
    // Over the requests that were sent: planned spacing vs actual spacing.
    int64_t n = 0, s0 = 0, s1 = 0, p0 = 0, p1 = 0;
    for (const RequestRecord& r : run.records) {
      if (r.phase != Phase::kMeasure || !r.sent()) continue;
      if (n == 0 || r.t_send_ns < s0) s0 = r.t_send_ns;
      s1 = std::max(s1, r.t_send_ns);
      if (n == 0 || r.t_sched_ns < p0) p0 = r.t_sched_ns;
      p1 = std::max(p1, r.t_sched_ns);
      n++;
    }
    if (n >= 3 && p1 > p0 && s1 > s0) {
      v.send_rate_checked = true;
      v.planned_send_rps =
          static_cast<double>(n - 1) / (static_cast<double>(p1 - p0) / 1e9);
      v.achieved_send_rps =
          static_cast<double>(n - 1) / (static_cast<double>(s1 - s0) / 1e9);
      v.send_shortfall = 1.0 - v.achieved_send_rps / v.planned_send_rps;
      if (v.send_shortfall > options.send_rate_tolerance) {
        v.valid = false;
        v.reasons.push_back(
            fmt::format("achieved send rate {:.2f}/s is {:.1f}% below the "
                        "planned {:.2f}/s (tolerance {:.1f}%)",
                        v.achieved_send_rps, v.send_shortfall * 100,
                        v.planned_send_rps, options.send_rate_tolerance * 100));
      }
    }
  }
  (void)measure;
  return v;
}

TimeSeries BuildTimeSeries(const RunResult& run, int64_t warmup_ns) {
  TimeSeries ts;
  const int64_t t0 = run.start_ns;
  int64_t t_end = t0;
  for (const RequestRecord& r : run.records) {
    if (r.phase == Phase::kCold) continue;
    t_end = std::max(t_end, r.t_end_ns);
  }
  const double span_s = static_cast<double>(t_end - t0) / 1e9;
  if (span_s <= 0) return ts;
  // At most ~120 buckets, at least 1 s each (sub-second runs: 10 buckets).
  double bucket = span_s < 2 ? std::max(span_s / 10, 0.05)
                             : std::max(1.0, std::ceil(span_s / 120.0));
  ts.bucket_s = bucket;
  ts.warmup_end_s = static_cast<double>(warmup_ns) / 1e9;
  const size_t n = static_cast<size_t>(std::ceil(span_s / bucket)) + 1;
  ts.t_s.resize(n);
  for (size_t i = 0; i < n; ++i) ts.t_s[i] = static_cast<double>(i) * bucket;
  ts.sent.assign(n, 0);
  ts.ok.assign(n, 0);
  ts.failed.assign(n, 0);
  ts.output_tps.assign(n, 0);
  ts.in_flight.assign(n, 0);
  std::vector<Histogram> ttft(n), e2e(n), itl(n);
  const int64_t bucket_ns = static_cast<int64_t>(bucket * 1e9);
  auto index = [&](int64_t t) -> size_t {
    if (t < t0) return 0;
    return std::min(n - 1, static_cast<size_t>((t - t0) / bucket_ns));
  };
  for (const RequestRecord& r : run.records) {
    if (r.phase == Phase::kCold) continue;
    if (r.sent()) ts.sent[index(r.t_send_ns)]++;
    const size_t e = index(r.t_end_ns);
    if (!r.ok()) {
      ts.failed[e]++;
    } else {
      ts.ok[e]++;
      RequestLatencies lat = ComputeLatencies(r);
      if (lat.ttft_us) ttft[e].Record(*lat.ttft_us);
      if (lat.e2e_us) e2e[e].Record(*lat.e2e_us);
      for (size_t j = 1; j < r.chunk_ns.size(); ++j)
        itl[index(r.chunk_ns[j])].Record(
            NsToUs(r.chunk_ns[j] - r.chunk_ns[j - 1]));
      if (r.output_tokens > 0) {
        if (r.chunk_ns.empty()) {
          ts.output_tps[e] += static_cast<double>(r.output_tokens);
        } else {
          const double per = static_cast<double>(r.output_tokens) /
                             static_cast<double>(r.chunk_ns.size());
          for (int64_t c : r.chunk_ns) ts.output_tps[index(c)] += per;
        }
      }
    }
    // In flight: spread the request's [t_send, t_end) over the buckets.
    if (r.sent() && r.t_end_ns > r.t_send_ns) {
      int64_t a = r.t_send_ns, b = r.t_end_ns;
      for (size_t i = index(a); i < n; ++i) {
        const int64_t lo = t0 + static_cast<int64_t>(i) * bucket_ns,
                      hi = lo + bucket_ns;
        const int64_t overlap = std::min(b, hi) - std::max(a, lo);
        if (overlap > 0)
          ts.in_flight[i] +=
              static_cast<double>(overlap) / static_cast<double>(bucket_ns);
        if (hi >= b) break;
      }
    }
  }
  auto pct = [](const Histogram& h, double q) {
    return h.empty() ? std::nan("") : h.ValueAtPercentile(q);
  };
  for (size_t i = 0; i < n; ++i) {
    ts.output_tps[i] /= bucket;
    ts.ttft_p50_us.push_back(pct(ttft[i], 50));
    ts.ttft_p99_us.push_back(pct(ttft[i], 99));
    ts.e2e_p50_us.push_back(pct(e2e[i], 50));
    ts.e2e_p90_us.push_back(pct(e2e[i], 90));
    ts.e2e_p99_us.push_back(pct(e2e[i], 99));
    ts.itl_p50_us.push_back(pct(itl[i], 50));
    ts.itl_p99_us.push_back(pct(itl[i], 99));
  }
  return ts;
}

std::vector<std::pair<double, double>> BuildCdf(const Histogram& h,
                                                size_t max_points) {
  std::vector<std::pair<double, double>> pts;
  if (h.empty()) return pts;
  int64_t seen = 0;
  h.ForEachBucket([&](int64_t value, int64_t count) {
    seen += count;
    pts.emplace_back(
        static_cast<double>(value),
        static_cast<double>(seen) / static_cast<double>(h.count()));
  });
  if (pts.size() <= max_points) return pts;
  // Keep evenly spaced fractions plus the tail.
  std::vector<std::pair<double, double>> out;
  double next = 0;
  const double step = 1.0 / static_cast<double>(max_points - 20);
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].second >= next || pts[i].second > 0.99 || i + 1 == pts.size()) {
      out.push_back(pts[i]);
      next = pts[i].second + step;
    }
  }
  if (out.size() > max_points * 2) out.resize(max_points * 2);
  return out;
}

namespace {

std::string NowIso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

BenchReport BuildReport(const RunResult& run, const ReportInputs& in) {
  BenchReport rep;
  rep.config = in.config;
  rep.config_echo = in.config_echo;
  rep.started_at = NowIso8601();
  rep.task_names = in.task_names;
  rep.goodput = in.goodput ? *in.goodput : GoodputFromThresholds(in.thresholds);
  bool has_cold = false, has_warmup = false;
  for (const RequestRecord& r : run.records) {
    has_cold |= r.phase == Phase::kCold;
    has_warmup |= r.phase == Phase::kWarmup;
  }
  if (has_cold)
    rep.cold = ComputePhaseStats(run.records, Phase::kCold, rep.goodput);
  if (has_warmup) {
    rep.warmup = ComputePhaseStats(run.records, Phase::kWarmup, rep.goodput,
                                   run.open_loop ? run.planned_warmup : -1);
  }
  rep.measure = ComputePhaseStats(run.records, Phase::kMeasure, rep.goodput,
                                  run.open_loop ? run.planned_measure : -1);
  rep.routes = ComputeRouteStats(run.records, Phase::kMeasure);

  PhaseStatsSet set;
  set.cold = rep.cold ? &*rep.cold : nullptr;
  set.warmup = rep.warmup ? &*rep.warmup : nullptr;
  set.measure = &*rep.measure;
  rep.thresholds = EvaluateThresholds(in.thresholds, set);
  rep.validity = CheckValidity(run, *rep.measure, in.thresholds, in.validity);
  rep.cpu_seconds = run.cpu_seconds;
  rep.wall_seconds = run.wall_seconds;
  rep.connections_opened = run.connections_opened;
  rep.interrupted = run.interrupted;
  rep.abort = run.abort;

  if (in.expected_rps && *in.expected_rps > 0) {
    PeakCheck pc;
    pc.expected_rps = *in.expected_rps;
    pc.target_rps = 1.2 * pc.expected_rps;
    const PhaseStats& m = *rep.measure;
    const double span =
        m.sched_window_s + (pc.target_rps > 0 ? 1.0 / pc.target_rps : 0);
    pc.completed_rps = span > 0 ? static_cast<double>(m.ok) / span : 0;
    // Arrival sampling: Poisson/gamma counts vary by ~sqrt(N); allow 3 sigma.
    const double n = static_cast<double>(std::max<int64_t>(m.planned, 1));
    pc.tolerance = in.arrival == ArrivalKind::kConstant
                       ? 0.01
                       : std::max(0.01, 3.0 / std::sqrt(n));
    pc.pass = pc.completed_rps >= pc.target_rps * (1.0 - pc.tolerance);
    rep.peak = pc;
  }

  // Warnings the user should see next to the numbers.
  for (const std::string& n : run.notes) rep.warnings.push_back(n);
  const PhaseStats& m = *rep.measure;
  if (m.MixedTokenSources()) {
    rep.warnings.push_back(
        fmt::format("token counts mix sources (usage {}, chunks {}): compare "
                    "token rates with care",
                    m.token_sources[static_cast<int>(TokenSource::kUsage)],
                    m.token_sources[static_cast<int>(TokenSource::kChunks)]));
  }
  if (run.wall_seconds > 1 && run.cpu_seconds / run.wall_seconds > 0.9) {
    rep.warnings.push_back(
        fmt::format("bench used {:.0f}% of a CPU: the client may be the "
                    "bottleneck (k6 advises 20% idle)",
                    100 * run.cpu_seconds / run.wall_seconds));
  }
  if (m.Hist(Metric::kE2e).clamped() > 0)
    rep.warnings.push_back(
        "some latencies exceeded the histogram range and were clamped");
  if (m.attempted == 0)
    rep.warnings.push_back("no requests in the measurement phase");
  if (m.ok > 0 && m.Hist(Metric::kTtft).empty() &&
      m.Hist(Metric::kE2e).count() > 0) {
    rep.warnings.push_back(
        "no streamed output: TTFT, TPOT and ITL are not measured "
        "(non-streaming or empty responses)");
  }
  rep.series = BuildTimeSeries(run, in.warmup_ns);
  rep.cdf_ttft = BuildCdf(m.Hist(Metric::kTtft));
  rep.cdf_e2e = BuildCdf(m.Hist(Metric::kE2e));
  rep.max_error_rate = in.max_error_rate;
  rep.decomposition =
      BuildDecomposition(run.records, run.start_ns, rep.series.bucket_s);
  rep.trace_ids = BuildTraceIds(run.records, run.start_ns);
  DecideVerdict(rep);
  return rep;
}

void DecideVerdict(BenchReport& rep) {
  rep.failed_checks.clear();
  if (rep.interrupted) {
    rep.verdict = Verdict::kInvalid;
    rep.verdict_reason = "the run was interrupted before it finished";
    rep.exit_code = kExitToolError;
    return;
  }
  if (!rep.validity.valid) {
    rep.verdict = Verdict::kInvalid;
    rep.verdict_reason = rep.validity.reasons.empty()
                             ? "invalid run"
                             : rep.validity.reasons.front();
    rep.exit_code = kExitInvalidRun;
    return;
  }
  if (rep.abort) {
    // k6 exits with ThresholdsHaveFailed after abortOnFail: the verdict is
    // known, the run just did not spend its remaining time proving it again.
    rep.verdict = Verdict::kFail;
    rep.failed_checks = {rep.abort->threshold};
    rep.verdict_reason = fmt::format("aborted early at {:.1f} s: {}",
                                     rep.abort->at_s, rep.abort->reason);
    rep.exit_code = kExitSloFailed;
    return;
  }
  std::vector<std::string> failed;
  if (rep.measure && rep.measure->attempted == 0) {
    failed.push_back("the measurement phase measured no request");
  } else if (rep.measure) {
    const double rate = rep.measure->ErrorRate(std::nullopt);
    if (rate > rep.max_error_rate) {
      const auto& labels = rep.measure->failure_labels;
      failed.push_back(fmt::format(
          "{:.1f}% of requests failed, over --max-error-rate {:.1f}%{}",
          100 * rate, 100 * rep.max_error_rate,
          labels.empty() ? std::string()
                         : " (most often: " + labels.front().first + ")"));
    }
  }
  for (const ThresholdResult& t : rep.thresholds) {
    if (!t.pass) failed.push_back(t.threshold.source);
  }
  if (rep.peak && !rep.peak->pass) {
    failed.push_back(
        fmt::format("peak rate: completed {:.2f}/s < 1.2 x expected = {:.2f}/s",
                    rep.peak->completed_rps, rep.peak->target_rps));
  }
  if (rep.capacity && rep.capacity->expected_rps > 0 &&
      rep.capacity->headroom < 1.2) {
    // The peak rule holds only when the range's low end reaches the peak.
    failed.push_back(fmt::format(
        "capacity {:.2f}/s is not shown to sustain 1.2 x expected = {:.2f}/s",
        rep.capacity->capacity_rps, rep.capacity->peak_rps));
  }
  rep.failed_checks = failed;
  if (!failed.empty()) {
    rep.verdict = Verdict::kFail;
    // The error-rate bound and the peak checks are not thresholds.
    rep.verdict_reason = failed.size() == 1
                             ? "failed: " + failed.front()
                             : fmt::format("{} checks failed, first: {}",
                                           failed.size(), failed.front());
    rep.exit_code = kExitSloFailed;
    return;
  }
  rep.verdict = Verdict::kPass;
  rep.verdict_reason = rep.thresholds.empty() && !rep.peak
                           ? "valid run (no thresholds given)"
                           : "every threshold holds";
  rep.exit_code = kExitPass;
}

}  // namespace redline::bench

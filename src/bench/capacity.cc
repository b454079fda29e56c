#include "bench/capacity.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "bench/metrics.h"
#include "bench/quantile_ci.h"
#include "bench/scrape.h"
#include "bench/units.h"
#include "http/client.h"
#include "http/event_loop.h"
#include "http/url.h"

namespace redline::bench {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kNsPerSec = 1'000'000'000;
// Between polls of the scrape URL while draining.
constexpr int64_t kDrainPollNs = 100'000'000;
constexpr int64_t kScrapeTimeoutMs = 2'000;

bool IsPercentileThreshold(const Threshold& t) {
  return t.phase == Phase::kMeasure &&
         (t.aggregation == Aggregation::kPercentile ||
          t.aggregation == Aggregation::kMed) &&
         MetricFromKey(t.metric_key).has_value();
}

double QuantileOf(const Threshold& t) {
  return t.aggregation == Aggregation::kMed ? 0.5 : t.percentile / 100;
}

// An upper limit (p(99)<3s) needs the interval's upper end to pass; a lower
// limit needs its lower end, which for q needs as many samples as the
// upper end for 1 - q.
int64_t NeededFor(const Threshold& t, const CapacityOptions& o) {
  const double q = QuantileOf(t);
  const bool upper_limit = t.op == CompareOp::kLt || t.op == CompareOp::kLe;
  const int64_t bound =
      SamplesForUpperBound(upper_limit ? q : 1 - q, o.confidence);
  return std::max(o.min_samples, bound);
}

std::string FormatEstimate(const QuantileEstimate& e) {
  return FormatEstimateWithInterval(e);
}

// One GET of a Prometheus endpoint; nullopt when it did not answer 2xx.
std::optional<std::vector<PromSample>> FetchMetrics(
    const RunConfig& base, const http::ParsedUrl& url) {
  struct Handler : http::ResponseHandler {
    http::EventLoop* loop = nullptr;
    int status = 0;
    std::string body;
    bool ok = false;
    void OnHeaders(const http::ResponseHead& h, int64_t) override {
      status = h.status;
    }
    void OnBody(std::string_view data, int64_t) override {
      if (body.size() < (4 << 20)) body.append(data);
    }
    void OnComplete(const http::TransportResult& r, int64_t) override {
      ok = r.error == http::TransportError::kNone && status >= 200 &&
           status <= 299;
      loop->Stop();
    }
  } handler;
  http::EventLoop loop;
  http::ClientOptions opts;
  opts.connect_timeout_ms = kScrapeTimeoutMs;
  opts.tls_verify = base.tls_verify;
  opts.tls_ca_file = base.tls_ca_file;
  http::Client client(loop, opts);
  handler.loop = &loop;
  http::ClientRequest req;
  req.method = "GET";
  req.target = url.target;
  req.total_timeout_ms = kScrapeTimeoutMs;
  client.Send(url.origin, std::move(req), &handler);
  loop.Run();
  if (!handler.ok) return std::nullopt;
  return ParsePrometheusText(handler.body);
}

using GaugeMap = std::map<std::string, double>;

GaugeMap LoadGauges(const std::vector<PromSample>& samples) {
  GaugeMap out;
  for (const PromSample& s : samples) {
    if (IsLoadGauge(s.name)) out[s.name + "{" + s.labels + "}"] = s.value;
  }
  return out;
}

struct DrainResult {
  double waited_s = 0;
  bool idle = true;
};

// Polls until every load gauge is at or below its idle value (the value
// before the search, or 0), or the bound passes.
DrainResult Drain(const RunConfig& base,
                  const std::optional<http::ParsedUrl>& url,
                  const GaugeMap& idle, int64_t timeout_ns) {
  DrainResult d;
  if (!url || idle.empty()) return d;
  const int64_t t0 = http::NowNs();
  while (true) {
    bool busy = false;
    if (auto samples = FetchMetrics(base, *url)) {
      for (const auto& [key, value] : LoadGauges(*samples)) {
        auto it = idle.find(key);
        const double limit = it == idle.end() ? 0 : std::max(0.0, it->second);
        busy |= value > limit;
      }
    } else {
      busy = true;  // an unanswered scrape is no sign of an idle server
    }
    const int64_t now = http::NowNs();
    d.waited_s = static_cast<double>(now - t0) / 1e9;
    if (!busy) return d;
    if (now - t0 >= timeout_ns) {
      d.idle = false;
      return d;
    }
    struct timespec ts {
      0, kDrainPollNs
    };
    nanosleep(&ts, nullptr);
  }
}

bool SameRate(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

}  // namespace

bool IsLoadGauge(std::string_view name) {
  for (std::string_view suffix :
       {"num_requests_waiting", "num_requests_running", "requests_processing",
        "requests_deferred"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

int64_t StepSamplesNeeded(const std::vector<Threshold>& thresholds,
                          const CapacityOptions& options) {
  int64_t n = std::max<int64_t>(1, options.min_samples);
  for (const Threshold& t : thresholds) {
    if (IsPercentileThreshold(t)) n = std::max(n, NeededFor(t, options));
  }
  return n;
}

namespace {

// The step's samples of `m` (us) in the order the requests were sent, as
// its histogram holds them: one per successful request, and +inf per failed
// one for error-adjusted metrics. Empty for ITL (per chunk, not per
// request).
std::vector<double> SamplesInSendOrder(const RunResult& run, Metric m) {
  std::vector<double> out;
  if (m == Metric::kItl) return out;
  std::vector<const RequestRecord*> sent;
  for (const RequestRecord& r : run.records)
    if (r.phase == Phase::kMeasure && r.sent()) sent.push_back(&r);
  std::sort(sent.begin(), sent.end(),
            [](const RequestRecord* a, const RequestRecord* b) {
              return a->t_send_ns < b->t_send_ns;
            });
  out.reserve(sent.size());
  for (const RequestRecord* r : sent) {
    const RequestLatencies lat = ComputeLatencies(*r);
    if (m == Metric::kDispatchDelay) {
      if (lat.dispatch_delay_us)
        out.push_back(static_cast<double>(*lat.dispatch_delay_us));
      continue;
    }
    if (!r->ok()) {
      if (MetricIsErrorAdjusted(m))
        out.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    std::optional<int64_t> v;
    switch (m) {
      case Metric::kTtft:
        v = lat.ttft_us;
        break;
      case Metric::kTtfo:
        v = lat.ttfo_us;
        break;
      case Metric::kTtftSched:
        v = lat.ttft_sched_us;
        break;
      case Metric::kE2e:
        v = lat.e2e_us;
        break;
      case Metric::kE2eStream:
        v = lat.e2e_stream_us;
        break;
      case Metric::kE2eSched:
        v = lat.e2e_sched_us;
        break;
      case Metric::kTpot:
        v = lat.tpot_us;
        break;
      case Metric::kNtpot:
        v = lat.ntpot_us;
        break;
      case Metric::kItl:
      case Metric::kDispatchDelay:
        break;
    }
    if (v) out.push_back(static_cast<double>(*v));
  }
  return out;
}

}  // namespace

CapacityPoint JudgeStep(const RunResult& run,
                        const std::vector<Threshold>& thresholds,
                        const ValidityOptions& validity, double offered,
                        const CapacityOptions& options) {
  CapacityPoint p;
  p.offered_rps = offered;
  PhaseStats s = ComputePhaseStats(run.records, Phase::kMeasure,
                                   GoodputFromThresholds(thresholds),
                                   run.open_loop ? run.planned_measure : -1);
  // The step's own requests: those whose t_sched lies in its measurement
  // window, followed until the last of them finished.
  int64_t first_sched = std::numeric_limits<int64_t>::max(), last_sched = 0,
          last_end = 0;
  for (const RequestRecord& r : run.records) {
    if (r.phase != Phase::kMeasure) continue;
    first_sched = std::min(first_sched, r.t_sched_ns);
    last_sched = std::max(last_sched, r.t_sched_ns);
    if (r.sent()) last_end = std::max(last_end, r.t_end_ns);
  }
  p.sent = s.sent;
  p.completed = s.ok;
  if (last_sched > 0) {
    const double window = static_cast<double>(last_sched - first_sched) / 1e9 +
                          (offered > 0 ? 1.0 / offered : 0);
    const double span =
        std::max(window, static_cast<double>(last_end - first_sched) / 1e9);
    p.sent_rps = window > 0 ? static_cast<double>(p.sent) / window : 0;
    p.completed_rps = span > 0 ? static_cast<double>(p.completed) / span : 0;
    p.tail_s =
        static_cast<double>(std::max<int64_t>(0, last_end - last_sched)) / 1e9;
    // Backlog: requests arrived (t_sched) and not finished, early in the
    // window and at its end. A target that keeps up holds it steady; one
    // that does not adds (offered - served) x window. The early count is
    // taken once the load has run for two median latencies (at most half
    // way in), so the ramp of a warm-up shorter than the latency does not
    // read as growth.
    auto in_flight_at = [&](int64_t t) {
      int64_t n = 0;
      for (const RequestRecord& r : run.records) {
        if (r.phase == Phase::kCold || r.t_sched_ns > t) continue;
        if (r.t_end_ns == 0 || r.t_end_ns > t) n++;
      }
      return n;
    };
    const double median_us = s.Hist(Metric::kE2e).empty()
                                 ? 0
                                 : s.Percentile(Metric::kE2e, 50, false);
    const int64_t settle = std::max(
        first_sched, run.start_ns + static_cast<int64_t>(2 * median_us * 1e3));
    const int64_t early =
        std::min(settle, first_sched + (last_sched - first_sched) / 2);
    p.backlog_growth =
        static_cast<double>(in_flight_at(last_sched) - in_flight_at(early));
    const double n = static_cast<double>(std::max<int64_t>(p.sent, 1));
    const double allowed =
        0.02 * n + 4 * std::sqrt(std::max(0.0, s.mean_concurrency) + 1);
    p.kept_up = !run.open_loop || p.backlog_growth <= allowed;
  }
  const double conf = options.confidence;
  auto est = [&](Metric m, double q) {
    return EstimateQuantile(s.Hist(m), s.Infinite(m), q, conf);
  };
  p.ttft_p50 = est(Metric::kTtft, 0.5);
  p.ttft_p99 = est(Metric::kTtft, 0.99);
  p.e2e_p50 = est(Metric::kE2e, 0.5);
  p.e2e_p99 = est(Metric::kE2e, 0.99);
  p.error_rate = s.ErrorRate(std::nullopt);
  p.dispatch_p99_us = s.Hist(Metric::kDispatchDelay).empty()
                          ? 0
                          : s.Percentile(Metric::kDispatchDelay, 99, false);
  const Validity v = CheckValidity(run, s, thresholds, validity);
  p.valid = v.valid;

  std::vector<std::string> fails, insufficient, inconclusive;
  for (const Threshold& t : thresholds) {
    if (!IsPercentileThreshold(t)) continue;
    const Metric m = *MetricFromKey(t.metric_key);
    PercentileCheck c;
    c.threshold = t.source;
    c.estimate = EstimateQuantile(s.Hist(m),
                                  MetricIsErrorAdjusted(m) ? s.Infinite(m) : 0,
                                  QuantileOf(t), conf);
    c.needed_samples = NeededFor(t, options);
    {
      const CorrelatedEstimate w = WidenForCorrelation(
          c.estimate, SamplesInSendOrder(run, m), QuantileOf(t), conf);
      c.estimate = w.estimate;
      c.effective_samples = w.effective_n;
    }
    const double lo = c.estimate.lower, hi = c.estimate.upper, x = t.value;
    bool pass = false, fail = false;
    switch (t.op) {
      case CompareOp::kLt:
        pass = hi < x;
        fail = lo >= x;
        break;
      case CompareOp::kLe:
        pass = hi <= x;
        fail = lo > x;
        break;
      case CompareOp::kGt:
        pass = lo > x;
        fail = hi <= x;
        break;
      case CompareOp::kGe:
        pass = lo >= x;
        fail = hi < x;
        break;
      case CompareOp::kEq:
      case CompareOp::kNe:
        // No interval reading; judged on the point like other thresholds.
        pass = (t.op == CompareOp::kEq) == (c.estimate.point == x);
        fail = !pass;
        break;
    }
    const std::string where = fmt::format(
        "{}: {} at {:.0f} %", t.source, FormatEstimate(c.estimate), conf * 100);
    if (c.estimate.n < options.min_samples) {
      c.verdict = StepVerdict::kInsufficient;
      insufficient.push_back(fmt::format("{} has {} samples, needs {}",
                                         t.source, c.estimate.n,
                                         options.min_samples));
    } else if (fail) {
      c.verdict = StepVerdict::kFail;
      fails.push_back(where);
    } else if (pass) {
      c.verdict = StepVerdict::kPass;
    } else if (c.estimate.n < c.needed_samples) {
      c.verdict = StepVerdict::kInsufficient;
      insufficient.push_back(fmt::format("{} has {} samples, needs {} to pass",
                                         t.source, c.estimate.n,
                                         c.needed_samples));
    } else if (!std::isfinite(t.op == CompareOp::kLt || t.op == CompareOp::kLe
                                  ? hi
                                  : lo)) {
      // Enough requests, but they came in runs (a queue near saturation),
      // too few independent ones to bound the quantile: a longer step is
      // what can tell.
      c.verdict = StepVerdict::kInsufficient;
      insufficient.push_back(fmt::format(
          "{} has {} samples worth {} independent ones, needs {} to pass",
          t.source, c.estimate.n, c.effective_samples, c.needed_samples));
    } else {
      c.verdict = StepVerdict::kInconclusive;
      inconclusive.push_back(where + " contains the limit");
    }
    p.checks.push_back(std::move(c));
  }
  PhaseStatsSet set;
  set.measure = &s;
  for (const ThresholdResult& t : EvaluateThresholds(thresholds, set)) {
    if (IsPercentileThreshold(t.threshold)) continue;
    p.point_checks.push_back(
        {t.threshold.source, t.observed,
         FormatThresholdValue(t.threshold, t.observed),
         t.pass ? StepVerdict::kPass : StepVerdict::kFail});
    if (t.pass) continue;
    fails.push_back(
        fmt::format("{}: {}", t.threshold.source, p.point_checks.back().shown));
  }
  if (s.ok == 0) fails.push_back("no successful request");
  if (!p.kept_up)
    fails.push_back(fmt::format(
        "not keeping up: {:.0f} more requests in flight at the end of the "
        "window than at its start",
        p.backlog_growth));
  if (!fails.empty()) {
    p.verdict = StepVerdict::kFail;
    p.reason = fails.front();
  } else if (!p.valid) {
    p.verdict = StepVerdict::kInvalid;
    p.reason = v.reasons.empty() ? "invalid run" : v.reasons.front();
  } else if (!insufficient.empty()) {
    p.verdict = StepVerdict::kInsufficient;
    p.reason = insufficient.front();
  } else if (!inconclusive.empty()) {
    p.verdict = StepVerdict::kInconclusive;
    p.reason = inconclusive.front();
  } else {
    p.verdict = StepVerdict::kPass;
  }
  return p;
}

double KneeRate(std::span<const double> pass_rps,
                std::span<const double> fail_rps) {
  double top_pass = 0;
  for (double r : pass_rps) top_pass = std::max(top_pass, r);
  double knee = 0;
  for (double r : fail_rps) {
    if (r > top_pass && (knee == 0 || r < knee)) knee = r;
  }
  return knee;
}

CapacitySearch RangeFromSteps(const std::vector<CapacityPoint>& steps,
                              double ceiling_rps) {
  struct Agg {
    double rate;
    int n = 0, pass = 0, fail = 0;
  };
  std::vector<Agg> rates;
  for (const CapacityPoint& p : steps) {
    auto it = std::find_if(rates.begin(), rates.end(), [&](const Agg& a) {
      return SameRate(a.rate, p.offered_rps);
    });
    if (it == rates.end()) {
      rates.push_back({p.offered_rps});
      it = rates.end() - 1;
    }
    it->n++;
    it->pass += p.verdict == StepVerdict::kPass;
    it->fail += p.verdict == StepVerdict::kFail;
  }
  CapacitySearch cs;
  cs.ceiling_rps = ceiling_rps;
  const Agg* high = nullptr;
  for (const Agg& a : rates) {
    if (a.fail == a.n && (high == nullptr || a.rate < high->rate)) high = &a;
  }
  const Agg* low = nullptr;
  for (const Agg& a : rates) {
    if (a.pass != a.n || (high != nullptr && a.rate >= high->rate)) continue;
    if (low == nullptr || a.rate > low->rate) low = &a;
  }
  if (low != nullptr) cs.low_rps = low->rate;
  if (high != nullptr && (low == nullptr || high->rate > low->rate))
    cs.high_rps = high->rate;
  cs.confirmed =
      low != nullptr && low->n >= 2 && (high == nullptr || high->n >= 2);
  return cs;
}

Result<CapacityRun> FindMaxRate(const RunConfig& base, Workload& workload,
                                const std::vector<Threshold>& thresholds,
                                const ValidityOptions& validity,
                                const CapacityOptions& options) {
  CapacityRun out;
  CapacityResult& res = out.result;
  res.expected_rps = options.expected_rps;
  res.confidence = options.confidence;
  res.resolution = options.resolution;
  const int64_t needed = StepSamplesNeeded(thresholds, options);
  res.min_samples = needed;
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };

  std::optional<http::ParsedUrl> scrape_url;
  GaugeMap idle;
  if (!options.scrape_url.empty()) {
    auto u = http::ParseUrl(options.scrape_url);
    if (!u.ok()) return u.status();
    scrape_url = *u;
    if (auto samples = FetchMetrics(base, *scrape_url)) {
      idle = LoadGauges(*samples);
      if (idle.empty())
        res.notes.push_back(
            "the scrape URL has no waiting/running gauges: steps start when "
            "the client's requests are done");
    } else {
      res.notes.push_back(
          "the scrape URL did not answer before the search: steps start when "
          "the client's requests are done");
    }
  }

  // Step length: long enough for `needed` measured requests at the step's
  // rate, with room for Poisson shortfall, within the bound.
  const int64_t base_ns =
      base.duration_ns > 0 ? base.duration_ns : 10 * kNsPerSec;
  const int64_t max_step_ns =
      options.max_step_ns > 0 ? options.max_step_ns
                              : std::max<int64_t>(5 * base_ns, 10 * kNsPerSec);
  auto step_ns = [&](double rate) {
    const double target = static_cast<double>(needed) * 1.1 +
                          3 * std::sqrt(static_cast<double>(needed));
    int64_t ns = static_cast<int64_t>(target / rate * 1e9);
    if (base.duration_ns <= 0 && base.max_requests > 0)
      ns = std::max<int64_t>(
          ns, static_cast<int64_t>(static_cast<double>(base.max_requests) /
                                   rate * 1e9));
    return std::clamp<int64_t>(std::max(ns, base.duration_ns), 1, max_step_ns);
  };

  const int repeats = std::max(1, options.repeat);
  std::vector<std::pair<double, RunResult>> passes;
  // The failed steps of every search above every pass so far: the knee is
  // chosen among them once all passes are known.
  std::vector<std::pair<double, RunResult>> failed;
  std::optional<RunResult> last;
  for (int rep = 0; rep < repeats; ++rep) {
    RunConfig b = base;
    b.seed = base.seed + static_cast<uint64_t>(rep) * 7919;
    // 1. Saturation probe: closed loop at high concurrency.
    RunConfig probe = b;
    probe.mode = RunConfig::Mode::kClosed;
    probe.users = options.probe_users;
    probe.think = ThinkTime{};
    if (probe.duration_ns <= 0 && probe.max_requests <= 0)
      probe.duration_ns = base_ns;
    if (rep > 0) probe.cold_requests = 0;
    RL_ASSIGN_OR_RETURN(RunResult sat, RunLoad(probe, workload));
    const PhaseStats s = ComputePhaseStats(sat.records, Phase::kMeasure, {});
    int64_t probe_requests = 0;
    for (const RequestRecord& r : sat.records) probe_requests += r.sent();
    const double ceiling = s.completed_rps;
    log(fmt::format(
        "{}saturation probe: {} users -> {:.2f} completed/s, e2e p99 {}",
        repeats > 1 ? fmt::format("[search {}/{}] ", rep + 1, repeats) : "",
        options.probe_users, ceiling,
        FormatUs(s.Percentile(Metric::kE2e, 99, true))));
    if (ceiling <= 0) {
      res.searches.push_back({0, probe_requests, 0, 0, false});
      last = std::move(sat);
      continue;
    }
    std::vector<CapacityPoint> steps;
    passes.clear();
    auto run_step = [&](double rate, bool remeasure) -> Result<CapacityPoint> {
      int64_t duration_ns = step_ns(rate);
      int64_t discarded_requests = 0;
      double discarded_drain_s = 0;
      CapacityPoint p;
      RunResult run;
      // A step short of samples (a slow arrival sample, errors) runs again
      // from a drained target, twice as long, within the bound; the short
      // run is discarded whole rather than merged, so the step stays one
      // isolated window.
      for (int attempt = 0;; ++attempt) {
        const DrainResult d =
            Drain(b, scrape_url, idle, options.drain_timeout_ns);
        RunConfig rc = b;
        // A fresh arrival sample per step: a re-measurement with the same
        // seed would repeat the same arrival pattern, not check it.
        rc.seed = b.seed + 1'000'003 * static_cast<uint64_t>(steps.size() + 1) +
                  static_cast<uint64_t>(attempt);
        rc.mode = RunConfig::Mode::kOpen;
        rc.rate_rps = rate;
        rc.stages.clear();
        rc.cold_requests = 0;
        rc.duration_ns = duration_ns;
        rc.max_requests = -1;
        // Each step starts with an empty connection pool; a warm-up keeps
        // the connects out of the measured dispatch delay.
        if (rc.warmup_ns == 0 && rc.warmup_requests == 0)
          rc.warmup_ns = std::max<int64_t>(rc.duration_ns / 5, 500'000'000);
        rc.warmup_requests = 0;
        if (rc.max_in_flight == 0)
          rc.max_in_flight = std::max(4 * options.probe_users, 256);
        RL_ASSIGN_OR_RETURN(run, RunLoad(rc, workload));
        p = JudgeStep(run, thresholds, validity, rate, options);
        for (const RequestRecord& r : run.records) p.requests += r.sent();
        p.step_s = static_cast<double>(rc.duration_ns) / 1e9;
        p.drain_s = discarded_drain_s + d.waited_s;
        p.drained = d.idle;
        if (p.verdict != StepVerdict::kInsufficient ||
            duration_ns >= max_step_ns || attempt == 2)
          break;
        log(fmt::format(
            "step {:.2f}/s: {} after {:.1f} s; again for {:.1f} s", rate,
            p.reason, p.step_s,
            static_cast<double>(std::min(2 * duration_ns, max_step_ns)) / 1e9));
        discarded_requests += p.requests;
        discarded_drain_s += d.waited_s;
        duration_ns = std::min(2 * duration_ns, max_step_ns);
      }
      p.requests += discarded_requests;
      p.repeat = rep;
      p.remeasure = remeasure;
      log(fmt::format(
          "{}{:.2f}/s for {:.1f} s: sent {} ({:.2f}/s), completed {} "
          "({:.2f}/s), e2e p99 {}, tail {:.2f} s, drain {:.2f} s{} -> {}{}",
          remeasure ? "re-measure " : "step ", rate, p.step_s, p.sent,
          p.sent_rps, p.completed, p.completed_rps, FormatEstimate(p.e2e_p99),
          p.tail_s, p.drain_s, p.drained ? "" : " (not idle)",
          StepVerdictName(p.verdict),
          p.reason.empty() ? "" : " (" + p.reason + ")"));
      if (p.verdict == StepVerdict::kFail) failed.emplace_back(rate, run);
      if (p.pass()) {
        // A failure at or below a rate that held can no longer be the knee.
        std::erase_if(failed,
                      [rate](const auto& f) { return f.first <= rate; });
        passes.emplace_back(rate, std::move(run));
      } else {
        last = std::move(run);
      }
      steps.push_back(p);
      return p;
    };

    // 2. Bisection of the offered rate in (0, ceiling]. Anything but a pass
    // moves the search down: a rate that could not be shown to hold is not
    // a capacity.
    double lo = 0, hi = ceiling, rate = ceiling;
    bool ceiling_passed = false;
    for (int i = 0; i < options.max_probes; ++i) {
      RL_ASSIGN_OR_RETURN(CapacityPoint p, run_step(rate, false));
      if (p.pass()) {
        lo = rate;
        if (i == 0) {
          ceiling_passed = true;
          break;
        }
      } else {
        hi = rate;
      }
      if (lo > 0 && hi - lo <= options.resolution * hi) break;
      rate = lo > 0 ? (lo + hi) / 2 : hi / 2;
      if (lo == 0 && i >= 3)
        rate = hi / 4;  // keep looking lower when even small rates fail
    }
    // 3. Close the range: while no rate above the highest pass has failed
    // conclusively (only inconclusive or short steps there), look higher,
    // past the ceiling if need be (an open-loop rate above what the target
    // completes flat out cannot hold), a few steps at most.
    {
      double top = 0;
      for (const CapacityPoint& p : steps) top = std::max(top, p.offered_rps);
      for (int k = 0; k < 3 && RangeFromSteps(steps, ceiling).high_rps <= 0;
           ++k) {
        top *= 1 + std::max(2 * options.resolution, 0.1);
        RL_RETURN_IF_ERROR(run_step(top, false).status());
      }
    }
    // 4. The final pair again: a pass or fail that does not repeat is noise,
    // and RangeFromSteps keeps only rates whose measurements agree.
    {
      const CapacitySearch first = RangeFromSteps(steps, ceiling);
      if (first.low_rps > 0) {
        RL_RETURN_IF_ERROR(run_step(first.low_rps, true).status());
      }
      if (first.high_rps > 0) {
        RL_RETURN_IF_ERROR(run_step(first.high_rps, true).status());
      }
      // A low end the re-measurement did not confirm (a rate just above the
      // capacity that passed once) leaves no rate that held: step down from
      // it, a few steps at most, until one holds on every measurement.
      double down = first.low_rps;
      for (int k = 0;
           k < 3 && down > 0 && RangeFromSteps(steps, ceiling).low_rps <= 0;
           ++k) {
        down *= 1 - std::max(2 * options.resolution, 0.05);
        RL_RETURN_IF_ERROR(run_step(down, false).status());
      }
    }
    CapacitySearch cs = RangeFromSteps(steps, ceiling);
    cs.probe_requests = probe_requests;
    if (ceiling_passed && cs.high_rps <= 0)
      res.notes.push_back(
          "the saturation ceiling itself passed: capacity is at least the "
          "ceiling (raise --probe-users to look higher)");
    res.searches.push_back(cs);
    res.curve.insert(res.curve.end(), steps.begin(), steps.end());
    log(fmt::format("range: {:.2f}-{}/s{}", cs.low_rps,
                    cs.high_rps > 0 ? fmt::format("{:.2f}", cs.high_rps) : "?",
                    cs.confirmed ? "" : " (not confirmed by re-measurement)"));
  }

  // Steps cut short by the bound: say how long they would need.
  double short_rate = 0;
  for (const CapacityPoint& p : res.curve) {
    if (p.verdict == StepVerdict::kInsufficient &&
        p.step_s * 1e9 >= static_cast<double>(max_step_ns) - 1 &&
        (short_rate == 0 || p.offered_rps < short_rate))
      short_rate = p.offered_rps;
  }
  if (short_rate > 0)
    res.notes.push_back(fmt::format(
        "steps were capped by --max-step ({:.4g} s) before they had the {} "
        "samples the thresholds need; at {:.4g}/s that takes about {:.4g} s",
        static_cast<double>(max_step_ns) / 1e9, needed, short_rate,
        static_cast<double>(needed) * 1.2 / short_rate));

  // Combine the searches: the range spans all of them.
  bool any_low = false, all_high = true;
  double min_low = kInf, max_low = 0, max_high = 0;
  res.confirmed = true;
  for (const CapacitySearch& cs : res.searches) {
    res.ceiling_rps = std::max(res.ceiling_rps, cs.ceiling_rps);
    min_low = std::min(min_low, cs.low_rps);
    max_low = std::max(max_low, cs.low_rps);
    any_low |= cs.low_rps > 0;
    all_high &= cs.high_rps > 0;
    max_high = std::max(max_high, cs.high_rps);
    res.confirmed &= cs.confirmed;
  }
  res.capacity_rps = any_low ? min_low : 0;
  res.capacity_high_rps = all_high ? max_high : 0;
  res.spread = max_low > 0 ? (max_low - min_low) / max_low : 0;
  out.found = res.capacity_rps > 0;
  if (res.searches.size() > 1 && res.spread > 2 * options.resolution)
    res.notes.push_back(fmt::format(
        "the searches disagree by {:.0f} % (more than twice the resolution): "
        "the target or this machine is noisy; plan with the low end",
        res.spread * 100));

  if (options.expected_rps > 0) {
    res.peak_rps = 1.2 * options.expected_rps;
    res.headroom = res.capacity_rps / options.expected_rps;
    if (res.capacity_rps >= res.peak_rps) {
      res.peak_sustained = "yes";
    } else if (res.capacity_high_rps > 0 &&
               res.capacity_high_rps <= res.peak_rps) {
      res.peak_sustained = "no";
    } else {
      res.peak_sustained = "uncertain";
    }
    if (res.capacity_rps > 0)
      res.replicas = static_cast<int64_t>(
          std::ceil(res.peak_rps / res.capacity_rps - 1e-9));
    if (res.capacity_high_rps > 0)
      res.replicas_optimistic = static_cast<int64_t>(
          std::ceil(res.peak_rps / res.capacity_high_rps - 1e-9));
  }

  {
    std::vector<double> pass_rps, fail_rps;
    for (const CapacityPoint& p : res.curve) {
      if (p.pass()) pass_rps.push_back(p.offered_rps);
    }
    for (const auto& f : failed) fail_rps.push_back(f.first);
    out.knee_rps = KneeRate(pass_rps, fail_rps);
    for (auto& [rate, run] : failed) {
      if (out.knee_rps > 0 && rate == out.knee_rps) {
        out.knee_run = std::move(run);
        break;
      }
    }
  }

  // The report's main run: a passing step at the low end, else the last.
  for (auto& [rate, run] : passes) {
    if (SameRate(rate, res.capacity_rps)) out.best_run = std::move(run);
  }
  if (out.best_run.records.empty()) {
    if (!passes.empty()) {
      out.best_run = std::move(passes.back().second);
    } else if (last) {
      out.best_run = std::move(*last);
    }
  }
  return out;
}

}  // namespace redline::bench

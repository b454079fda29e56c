// BenchReport: everything `redline bench` concludes from a run: per-phase
// statistics, threshold results, run validity (docs/METRICS.md#run-validity),
// the verdict and exit code (docs/METRICS.md#exit-codes), time series and
// CDFs for the charts, scraped server series, cold-start and capacity
// results. Renderers turn it into the terminal table (report_text.cc), the
// JSON result (report_json.cc, docs/BENCH_JSON.md) and the HTML report
// (report_html.cc).
//
// Thread-safety: plain values; thread-compatible. Cost: building it is
// O(records + chunks) plus one histogram pass per time bucket.
#ifndef REDLINE_BENCH_REPORT_H_
#define REDLINE_BENCH_REPORT_H_

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/bottleneck.h"
#include "bench/config_echo.h"
#include "bench/decomposition.h"
#include "bench/event.h"
#include "bench/metrics.h"
#include "bench/quantile_ci.h"
#include "bench/route_stats.h"
#include "bench/runner.h"
#include "bench/scrape.h"
#include "bench/threshold.h"

namespace redline::bench {

// Exit codes (docs/METRICS.md#exit-codes).
inline constexpr int kExitPass = 0;
inline constexpr int kExitSloFailed = 99;
inline constexpr int kExitInvalidRun = 100;
inline constexpr int kExitToolError = 101;

enum class Verdict { kPass, kFail, kInvalid };
std::string_view VerdictName(Verdict v);

struct ValidityOptions {
  // Dispatch-delay p99 bound in us; 0 picks the default: 1 % of the tightest
  // time threshold, clamped to [1 ms, 10 ms] (10 ms without time thresholds).
  int64_t dispatch_bound_us = 0;
  // Open loop: allowed shortfall of the achieved send rate vs the planned
  // rate over the same requests.
  double send_rate_tolerance = 0.05;
};

struct Validity {
  bool valid = true;
  std::vector<std::string> reasons;
  double dispatch_p99_us = 0;
  int64_t dispatch_bound_us = 0;
  bool send_rate_checked = false;
  double planned_send_rps = 0;
  double achieved_send_rps = 0;
  double send_shortfall = 0;  // 1 - achieved/planned
};

// Checks run validity (docs/METRICS.md#run-validity) on the measurement
// phase.
Validity CheckValidity(const RunResult& run, const PhaseStats& measure,
                       const std::vector<Threshold>& thresholds,
                       const ValidityOptions& options);

struct TimeSeries {
  double bucket_s = 1;
  // Where the measurement phase starts on the time axis.
  double warmup_end_s = 0;
  // Bucket starts, seconds from the load timeline start.
  std::vector<double> t_s;
  std::vector<int64_t> sent, ok, failed;
  std::vector<double> output_tps;
  std::vector<double> ttft_p50_us, ttft_p99_us, e2e_p50_us, e2e_p90_us,
      e2e_p99_us, itl_p50_us, itl_p99_us;
  // Mean requests in flight over the bucket.
  std::vector<double> in_flight;
};
TimeSeries BuildTimeSeries(const RunResult& run, int64_t warmup_ns);

// (value_us, cumulative fraction) points of a success-only distribution.
std::vector<std::pair<double, double>> BuildCdf(const Histogram& h,
                                                size_t max_points = 200);

struct ColdStartInfo {
  std::string command;
  std::string ready_url;
  bool ready = false;
  double time_to_ready_s = 0;
  std::string note;
};

// One rate step of the capacity search (docs/BENCH.md#capacity-search).
// Every figure is over the requests *sent* in the step's measurement window
// (by t_sched), measured until the last of them finished, so completed can
// never exceed sent.
enum class StepVerdict { kPass, kFail, kInconclusive, kInsufficient, kInvalid };
// "pass", "fail", "inconclusive", "insufficient samples", "invalid".
std::string_view StepVerdictName(StepVerdict v);

// A percentile threshold judged with its confidence interval.
struct PercentileCheck {
  std::string threshold;       // as written, e.g. "e2e: p(99)<3s"
  QuantileEstimate estimate;   // us, error-adjusted where the threshold is
  int64_t needed_samples = 0;  // for any verdict on it
  // Independent samples the step's correlated ones are worth
  // (WidenForCorrelation), which the interval is computed from.
  int64_t effective_samples = 0;
  StepVerdict verdict = StepVerdict::kInconclusive;
};

// A threshold that is not a percentile (an error rate, a mean, a
// throughput), judged on the step's point value: kPass or kFail.
struct PointCheck {
  std::string threshold;  // as written, e.g. "errors: rate<1%"
  // The value judged: us for latencies, a fraction for rates, else plain
  // (Threshold::value's units); `shown` formats it ("0.12%").
  double observed = 0;
  std::string shown;
  StepVerdict verdict = StepVerdict::kFail;
};

struct CapacityPoint {
  int repeat = 0;          // 0-based search repetition (--repeat)
  bool remeasure = false;  // re-measurement of the final pass/fail pair
  double offered_rps = 0;  // nominal rate of the step
  double step_s = 0;       // measurement window planned for the step
  int64_t sent = 0;        // measured requests sent
  int64_t requests = 0;    // every request of the step, warm-up included
  int64_t completed = 0;   // of those, successful
  double sent_rps = 0;     // sent / arrival window
  // completed / max(arrival window, first arrival -> last completion).
  double completed_rps = 0;
  double tail_s = 0;    // last arrival -> last completion of the step
  double drain_s = 0;   // waited before the step for an idle target
  bool drained = true;  // false: the drain hit its bound
  // Requests in flight at the end minus at the start of the window.
  double backlog_growth = 0;
  bool kept_up = true;
  QuantileEstimate ttft_p50, ttft_p99, e2e_p50, e2e_p99;  // error-adjusted, us
  double error_rate = 0;
  double dispatch_p99_us = 0;
  bool valid = true;
  std::vector<PercentileCheck> checks;
  std::vector<PointCheck> point_checks;
  StepVerdict verdict = StepVerdict::kInconclusive;
  std::string reason;  // why it is not a pass, one line
  bool pass() const { return verdict == StepVerdict::kPass; }
};

// The result of one whole search (one --repeat).
struct CapacitySearch {
  double ceiling_rps = 0;
  int64_t probe_requests = 0;  // sent by the saturation probe (cold included)
  double low_rps = 0;          // highest rate that passed (0: none)
  double high_rps = 0;         // lowest rate above it that failed (0: none)
  bool confirmed = false;      // the re-measured pair gave the same verdicts
};

struct CapacityResult {
  double ceiling_rps = 0;  // saturation probe (closed loop)
  // The capacity range: every rate up to capacity_rps passed, capacity_high
  // failed (0 when no rate failed conclusively: "at least capacity_rps").
  // capacity_rps is the range's low end (0 when no rate passed).
  double capacity_rps = 0;
  double capacity_high_rps = 0;
  double confidence = 0.95;  // of each interval, and of the range
  bool confirmed = false;
  double resolution = 0.05;
  int64_t min_samples = 0;
  std::vector<std::string> notes;
  // --repeat: one entry per search; the range above spans all of them
  // (lowest low, highest high) and `spread` is (max - min) / max of the lows.
  std::vector<CapacitySearch> searches;
  double spread = 0;
  // --expected-rate planning (docs/BENCH.md#planning-replicas).
  double expected_rps = 0;          // 0 when not given
  double headroom = 0;              // capacity_rps / expected
  double peak_rps = 0;              // 1.2 x expected
  std::string peak_sustained;       // "yes", "no", "uncertain"
  int64_t replicas = 0;             // ceil(peak / capacity_rps); 0: unknown
  int64_t replicas_optimistic = 0;  // ceil(peak / capacity_high)
  std::vector<CapacityPoint> curve;
};

struct PeakCheck {
  double expected_rps = 0;
  double target_rps = 0;     // 1.2 x expected
  double completed_rps = 0;  // ok / (schedule span + one mean gap)
  double tolerance = 0;      // allowed shortfall for arrival sampling
  bool pass = false;
};

struct BenchReport {
  // Echo, in display order.
  std::vector<std::pair<std::string, std::string>> config;
  // The same settings as values (JSON `config`, compare's warnings).
  ConfigEcho config_echo;
  // Wall clock, ISO 8601 (for humans).
  std::string started_at;
  std::optional<PhaseStats> cold, warmup, measure;
  std::vector<ThresholdResult> thresholds;
  Validity validity;
  std::optional<PeakCheck> peak;
  // Error rate above which the verdict is a fail whatever the thresholds.
  double max_error_rate = 0.01;
  Verdict verdict = Verdict::kPass;
  std::string verdict_reason;
  int exit_code = kExitPass;
  // Every check that failed (error-rate bound, thresholds as written, peak
  // and capacity checks), in that order; verdict_reason names the first.
  std::vector<std::string> failed_checks;
  std::vector<std::string> warnings;
  double cpu_seconds = 0, wall_seconds = 0;
  uint64_t connections_opened = 0;
  bool interrupted = false;
  // An abort-on-fail threshold stopped the run early.
  std::optional<AbortInfo> abort;
  TimeSeries series;
  std::vector<std::pair<double, double>> cdf_ttft, cdf_e2e;
  std::string scrape_url;
  std::vector<ScrapeSeries> scrape;
  // The curated latency histograms' buckets (server_series.h).
  std::vector<ScrapeHistogram> scrape_histograms;
  std::optional<ColdStartInfo> cold_start;
  std::optional<CapacityResult> capacity;
  std::vector<std::string> task_names;
  GoodputSlo goodput;
  // The first failure of each error class with the start of its body
  // (RunResult::first_errors).
  std::vector<ErrorSample> first_errors;
  // Where the time went and which requests to open in a trace viewer
  // (docs/OBSERVABILITY.md#bench), filled by BuildReport.
  Decomposition decomposition;
  TraceIds trace_ids;
  // The bottleneck finder's verdict (AttachBottleneck).
  std::optional<BottleneckReport> bottleneck;
  // Measured requests by the route that answered (x-redline-route); empty
  // when no response named one.
  std::vector<RouteStats> routes;
  // `--event` commands and what became of them, by scheduled offset.
  std::vector<EventRecord> events;
};

struct ReportInputs {
  std::vector<std::pair<std::string, std::string>> config;
  ConfigEcho config_echo;
  std::vector<Threshold> thresholds;
  std::optional<GoodputSlo> goodput;  // default: GoodputFromThresholds()
  ValidityOptions validity;
  int64_t warmup_ns = 0;
  std::optional<double> expected_rps;  // enables the peak check
  ArrivalKind arrival = ArrivalKind::kPoisson;
  std::vector<std::string> task_names;
  double max_error_rate = 0.01;
};

BenchReport BuildReport(const RunResult& run, const ReportInputs& inputs);

// Decides verdict and exit code from validity, the error-rate bound, the
// thresholds and the peak check. A measurement phase with no request, or
// with an error rate above max_error_rate, fails (exit 99) even when no
// threshold was given.
void DecideVerdict(BenchReport& report);

// Runs the bottleneck finder (bench/bottleneck.h) on `run` (the report's
// run, or for a search the step at the knee) with `scrape` (its series
// relative to run.start_ns) and sets report.bottleneck; for a search it adds
// the knees. `scope` says what was analysed (report_decomposition.cc).
void AttachBottleneck(BenchReport& report, const RunResult& run,
                      std::span<const ScrapeSeries> scrape, int max_connections,
                      std::string scope);

// ---- renderers ----
// The report's observability sections (report_decomposition.cc): the
// bottleneck first (text and HTML put it at the top), then the E2E
// decomposition by percentile and over time, and the traced requests.
std::string RenderBottleneckText(const BenchReport& report);
std::string RenderDecompositionText(const BenchReport& report);
std::string RenderBottleneckHtml(const BenchReport& report);
std::string RenderDecompositionHtml(const BenchReport& report);
// Adds "bottleneck", "decomposition" and "traces" to the JSON result, and a
// request's trace id and server timing to its JSONL line.
void AddObservabilityJson(const BenchReport& report, boost::json::object& out);
void AddRequestObservabilityJson(const RequestRecord& r,
                                 boost::json::object& out);
// The final table for the terminal (UTF-8; ✓/✗ per threshold).
std::string RenderText(const BenchReport& report);
// The JSON result (schema "redline.bench.result/2", docs/BENCH_JSON.md).
std::string RenderJson(const BenchReport& report);
// A self-contained HTML page (inline CSS and SVG, no scripts, no external
// resources).
std::string RenderHtml(const BenchReport& report);
// One JSON line per request with every timestamp (ns relative to the load
// timeline start) for offline recomputation.
// One JSON object a line per RunResult::debug_exchanges entry: request_id,
// method, target, request_body, status, class, detail, response_body.
std::string RenderDebugExchangesJsonl(const RunResult& run);

std::string RenderRequestsJsonl(const RunResult& run,
                                const std::vector<std::string>& task_names);

// The capacity range as one phrase: "1.2–1.31 req/s at 95 %".
std::string FormatCapacityRange(const CapacityResult& capacity);
// "1.56s [1.2s, 1.7s]": a point and its interval.
std::string FormatEstimateWithInterval(const QuantileEstimate& estimate);
// "[1.2s, 1.7s] at 95 %": the interval of a percentile threshold's value
// on its phase, "" for other thresholds.
std::string ThresholdInterval(const BenchReport& report,
                              const Threshold& threshold);
// The capacity section of the text and HTML reports (report_capacity.cc).
std::string RenderCapacityText(const CapacityResult& capacity);
std::string RenderCapacityHtml(const CapacityResult& capacity);

// ---- compare ----
struct CompareOptions {
  // Relative increase flagged as a regression.
  double latency_tolerance = 0.10;
  // ... only when it is also at least this large (noise). Request-level
  // latencies (ttft, e2e): an absolute floor, their noise is scheduling and
  // network jitter of the order of a millisecond.
  double latency_floor_us = 1000;
  // Per-token latencies (tpot, itl, ntpot) are often below 1 ms, where an
  // absolute 1 ms floor hides any regression (0.35 -> 1.33 ms is +280 %):
  // their floor is this fraction of A's value, and at least
  // per_token_min_floor_us (timer and histogram resolution).
  double per_token_floor = 0.05;
  double per_token_min_floor_us = 20;
  // Relative decrease flagged.
  double throughput_tolerance = 0.10;
  // Absolute increase flagged.
  double error_rate_tolerance = 0.001;
};
struct CompareRow {
  std::string metric;
  double a = 0, b = 0;
  double change = 0;  // relative (latency, throughput) or absolute (rates)
  bool regression = false;
  bool higher_is_better = false;
};
struct CompareResult {
  std::vector<CompareRow> rows;
  // The two runs were not set up alike (target, model, load, lengths,
  // dataset, ...): one line per difference, "model: 'a' vs 'b'".
  std::vector<std::string> warnings;
  bool any_regression = false;
  std::string verdict_a, verdict_b;
};
// True for the per-token metrics compare floors relatively (tpot, itl,
// ntpot).
bool IsPerTokenMetric(std::string_view metric_key);
// The smallest increase (us) of `metric_key` from `a_us` that counts as a
// regression (besides the relative tolerance).
double LatencyFloorUs(std::string_view metric_key, double a_us,
                      const CompareOptions& options);
// Whether a latency going from `a_us` to `b_us` is a regression.
bool IsLatencyRegression(std::string_view metric_key, double a_us, double b_us,
                         const CompareOptions& options);

// Compares two JSON results (the text of the files).
Result<CompareResult> CompareResults(std::string_view json_a,
                                     std::string_view json_b,
                                     const CompareOptions& options);
std::string RenderCompare(const CompareResult& result, std::string_view name_a,
                          std::string_view name_b);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_REPORT_H_

// JSON result (docs/BENCH_JSON.md), per-request JSONL, and `bench compare`.
#include <fmt/format.h>

#include <boost/json.hpp>
#include <cmath>

#include "base/utf8.h"
#include "bench/report.h"
#include "bench/server_series.h"
#include "bench/units.h"

namespace redline::bench {

namespace json = boost::json;

namespace {

constexpr std::string_view kSchema = "redline.bench.result/2";
constexpr double kReportConfidence = 0.95;

// +inf -> "inf" (a failed request in an error-adjusted view); NaN -> null.
json::value Num(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? json::value("inf") : json::value("-inf");
  return v;
}

json::object Distribution(const PhaseStats& s, Metric m, bool adjusted) {
  json::object o;
  o["count"] = s.SampleCount(m, adjusted);
  if (adjusted) o["infinite"] = s.Infinite(m);
  o["mean"] = Num(s.Mean(m, adjusted));
  o["min"] = Num(s.Min(m, adjusted));
  o["p50"] = Num(s.Percentile(m, 50, adjusted));
  o["p90"] = Num(s.Percentile(m, 90, adjusted));
  o["p95"] = Num(s.Percentile(m, 95, adjusted));
  o["p99"] = Num(s.Percentile(m, 99, adjusted));
  o["p99.9"] = Num(s.Percentile(m, 99.9, adjusted));
  o["max"] = Num(s.Max(m, adjusted));
  // 95 % order-statistic intervals of the percentiles (bench/quantile_ci.h).
  json::object ci;
  for (const auto& [key, q] : {std::pair<const char*, double>{"p50", 0.5},
                               {"p90", 0.9},
                               {"p95", 0.95},
                               {"p99", 0.99},
                               {"p99.9", 0.999}}) {
    const QuantileEstimate e = EstimateQuantile(
        s.Hist(m), adjusted ? s.Infinite(m) : 0, q, kReportConfidence);
    ci[key] = json::array{Num(e.lower), Num(e.upper)};
  }
  o["ci95"] = std::move(ci);
  return o;
}

json::object PhaseJson(const PhaseStats& s) {
  json::object o;
  o["requests"] = json::object{
      {"planned", s.planned}, {"attempted", s.attempted}, {"sent", s.sent},
      {"ok", s.ok},           {"failed", s.failed},       {"good", s.good}};
  json::object errors;
  for (int c = 1; c < kNumErrorClasses; ++c) {
    const auto cls = static_cast<ErrorClass>(c);
    errors[ErrorClassKey(cls)] =
        json::object{{"count", s.errors[static_cast<size_t>(c)]},
                     {"rate", s.ErrorRate(cls)}};
  }
  errors["all"] =
      json::object{{"count", s.failed}, {"rate", s.ErrorRate(std::nullopt)}};
  errors["timeouts_by_reason"] =
      json::object{{"total", s.timeouts_total}, {"idle", s.timeouts_idle}};
  json::array labels;
  for (const auto& [label, count] : s.failure_labels)
    labels.push_back(json::object{{"label", label}, {"count", count}});
  errors["by_label"] = std::move(labels);
  o["errors"] = std::move(errors);
  o["rates"] = json::object{{"window_s", s.window_s},
                            {"offered_rps", s.offered_rps},
                            {"achieved_send_rps", s.achieved_send_rps},
                            {"completed_rps", s.completed_rps},
                            {"output_tps", s.output_tps},
                            {"peak_output_tps", s.peak_output_tps},
                            {"mean_concurrency", s.mean_concurrency},
                            {"goodput_rps", s.goodput_rps},
                            {"token_goodput_tps", s.token_goodput_tps},
                            {"good_fraction", s.good_fraction}};
  json::object sources;
  for (int i = 0; i < 4; ++i)
    sources[TokenSourceName(static_cast<TokenSource>(i))] =
        s.token_sources[static_cast<size_t>(i)];
  o["tokens"] = json::object{{"output_total", s.output_tokens},
                             {"sources", std::move(sources)},
                             {"mixed", s.MixedTokenSources()}};
  json::object lat;
  for (Metric m : kAllMetrics) {
    json::object d;
    d["success"] = Distribution(s, m, false);
    if (MetricIsErrorAdjusted(m)) d["adjusted"] = Distribution(s, m, true);
    lat[MetricKey(m)] = std::move(d);
  }
  o["latency_us"] = std::move(lat);
  return o;
}

template <typename T>
json::array Arr(const std::vector<T>& v) {
  json::array a;
  a.reserve(v.size());
  for (const T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      a.push_back(Num(x));
    } else if constexpr (std::is_same_v<T, std::string>) {
      a.push_back(json::string(x));
    } else {
      a.push_back(x);
    }
  }
  return a;
}

json::value LengthDistJson(const std::string& spec,
                           const std::optional<LengthDist>& d) {
  if (!d) return nullptr;
  json::object o{{"spec", spec},
                 {"kind", LengthDistKindName(d->kind)},
                 {"mean", d->mean},
                 {"min", d->min},
                 {"max", d->max}};
  if (d->kind == LengthDist::Kind::kNormal ||
      d->kind == LengthDist::Kind::kLognormal)
    o["stddev"] = d->stddev;
  return o;
}

// docs/BENCH_JSON.md#config.
json::object ConfigJson(const BenchReport& r) {
  const ConfigEcho& e = r.config_echo;
  json::object load{{"model", e.load_model}};
  if (e.load_model == "open") {
    load["rate_rps"] = e.stages.empty() ? json::value(e.rate_rps) : nullptr;
    load["stages"] =
        e.stages.empty() ? json::value(nullptr) : json::value(e.stages);
    load["arrival"] = e.arrival;
    load["burstiness"] = e.burstiness;
    load["max_in_flight"] = e.max_in_flight;
  } else {
    load["users"] = e.users;
    load["think"] = e.think;
    load["ramp_up_s"] = e.ramp_up_s;
  }
  json::object input{{"source", e.input_source}};
  if (e.input_source == "prompt") input["prompt_chars"] = e.prompt_chars;
  if (e.input_source == "synthetic")
    input["tokens"] = LengthDistJson(e.input_tokens_spec, e.input_tokens);
  json::object c;
  c["url"] = e.url;
  c["api"] = e.api;
  c["scenario"] =
      e.scenario.empty() ? json::value(nullptr) : json::value(e.scenario);
  c["stream"] = e.stream;
  c["model"] = e.model;
  c["load"] = std::move(load);
  c["length"] = json::object{{"duration_s", e.duration_s},
                             {"requests", e.requests},
                             {"warmup_s", e.warmup_s},
                             {"warmup_requests", e.warmup_requests},
                             {"cold_requests", e.cold_requests}};
  c["max_tokens"] = e.max_tokens > 0 ? json::value(e.max_tokens) : nullptr;
  c["output_tokens"] = LengthDistJson(e.output_tokens_spec, e.output_tokens);
  c["pin_output_length"] = e.pin_output_length;
  c["input"] = std::move(input);
  c["dataset"] = e.dataset.empty()
                     ? json::value(nullptr)
                     : json::value(json::object{{"path", e.dataset},
                                                {"format", e.dataset_format}});
  c["temperature"] =
      e.temperature >= 0 ? json::value(e.temperature) : json::value(nullptr);
  c["seed"] = e.seed;
  c["timeouts_s"] = json::object{{"request", e.request_timeout_s},
                                 {"idle", e.idle_timeout_s},
                                 {"connect", e.connect_timeout_s}};
  c["profile"] = e.profile;
  c["thresholds"] = Arr(e.thresholds);
  c["argv"] = Arr(e.argv);
  c["tool_version"] = e.tool_version;
  json::object display;
  for (const auto& [k, v] : r.config) display[k] = v;
  c["display"] = std::move(display);
  return c;
}

json::array Points(const std::vector<std::pair<double, double>>& pts) {
  json::array a;
  for (const auto& [x, y] : pts) a.push_back(json::array{x, y});
  return a;
}

}  // namespace

std::string RenderJson(const BenchReport& r) {
  json::object o;
  o["schema"] = kSchema;
  o["tool"] =
      json::object{{"name", "redline bench"}, {"version", ToolVersion()}};
  o["started_at"] = r.started_at;
  o["config"] = ConfigJson(r);
  o["method"] = json::object{
      {"time_unit", "us"},
      {"percentiles",
       "nearest rank on HDR histograms (>= 3 significant digits); value = "
       "highest equivalent of the bucket"},
      {"itl",
       "per chunk (one sample per chunk gap, pooled over successful requests)"},
      {"verdict_view",
       "error-adjusted (one +inf per failed request) for ttft, ttfo, "
       "ttft_sched, e2e, e2e_stream, e2e_sched, tpot, ntpot"},
      {"clock", "steady_clock (monotonic)"}};
  json::object phases;
  if (r.cold) phases["cold"] = PhaseJson(*r.cold);
  if (r.warmup) phases["warmup"] = PhaseJson(*r.warmup);
  if (r.measure) phases["measure"] = PhaseJson(*r.measure);
  o["phases"] = std::move(phases);
  o["goodput_slo_us"] = json::object{{"ttft", r.goodput.ttft_us},
                                     {"tpot", r.goodput.tpot_us},
                                     {"e2e", r.goodput.e2e_us},
                                     {"itl", r.goodput.itl_us}};
  json::array th;
  for (const ThresholdResult& t : r.thresholds) {
    json::object x;
    x["expr"] = t.threshold.source;
    x["metric"] = t.threshold.metric_key;
    x["phase"] = PhaseName(t.threshold.phase);
    x["limit"] = t.threshold.value;
    x["op"] = CompareOpText(t.threshold.op);
    x["observed"] = Num(t.observed);
    x["success_only"] =
        t.success_only ? Num(*t.success_only) : json::value(nullptr);
    x["pass"] = t.pass;
    x["display"] = FormatThresholdValue(t.threshold, t.observed);
    if (!t.note.empty()) x["note"] = t.note;
    th.push_back(std::move(x));
  }
  o["thresholds"] = std::move(th);
  const Validity& v = r.validity;
  json::object validity{{"valid", v.valid},
                        {"reasons", Arr(v.reasons)},
                        {"dispatch_delay_p99_us", Num(v.dispatch_p99_us)},
                        {"dispatch_delay_bound_us", v.dispatch_bound_us}};
  if (v.send_rate_checked) {
    validity["send_rate"] = json::object{{"planned_rps", v.planned_send_rps},
                                         {"achieved_rps", v.achieved_send_rps},
                                         {"shortfall", v.send_shortfall}};
  }
  o["validity"] = std::move(validity);
  if (r.peak) {
    o["peak_check"] = json::object{{"expected_rps", r.peak->expected_rps},
                                   {"target_rps", r.peak->target_rps},
                                   {"completed_rps", r.peak->completed_rps},
                                   {"tolerance", r.peak->tolerance},
                                   {"pass", r.peak->pass}};
  }
  o["verdict"] = VerdictName(r.verdict);
  o["verdict_reason"] = r.verdict_reason;
  o["failed_checks"] = Arr(r.failed_checks);
  if (r.abort) {
    o["abort"] = json::object{{"threshold", r.abort->threshold},
                              {"reason", r.abort->reason},
                              {"certain", r.abort->certain},
                              {"at_s", r.abort->at_s},
                              {"cancelled", r.abort->cancelled}};
  } else {
    o["abort"] = nullptr;
  }
  o["exit_code"] = r.exit_code;
  json::array first_errors;
  for (const ErrorSample& e : r.first_errors) {
    first_errors.push_back(json::object{{"class", ErrorClassKey(e.error)},
                                        {"request_id", e.request_id},
                                        {"status", e.http_status},
                                        {"label", e.label},
                                        {"detail", e.detail},
                                        {"body", e.body}});
  }
  o["first_errors"] = std::move(first_errors);
  json::array routes;
  for (const RouteStats& s : r.routes) {
    routes.push_back(json::object{{"route", s.route},
                                  {"requests", s.requests},
                                  {"ok", s.ok},
                                  {"share", s.share},
                                  {"e2e_p50_us", Num(s.e2e_p50_us)},
                                  {"e2e_p95_us", Num(s.e2e_p95_us)},
                                  {"e2e_p99_us", Num(s.e2e_p99_us)}});
  }
  o["routes"] = std::move(routes);
  json::array events;
  for (const EventRecord& e : r.events) {
    auto opt = [](bool present, double v) {
      return present ? json::value(v) : json::value(nullptr);
    };
    json::object ej{
        {"offset_s", static_cast<double>(e.spec.offset_ns) / 1e9},
        {"command", utf8::Sanitize(e.spec.command)},
        {"started", e.started},
        {"start_s", opt(e.started, e.start_s)},
        {"end_s", opt(e.finished, e.end_s)},
        {"finished", e.finished},
        {"exit_code", e.finished && e.signal == 0 ? json::value(e.exit_code)
                                                  : json::value(nullptr)},
        {"signal", e.signal != 0 ? json::value(SignalName(e.signal))
                                 : json::value(nullptr)},
        {"timed_out", e.timed_out},
        {"timeout_s", e.timeout_s},
        {"killed_at_end", e.killed_at_end},
        {"outcome", e.Outcome()},
        {"error", e.error},
        {"stdout_tail", e.stdout_tail},
        {"stderr_tail", e.stderr_tail},
        {"stdout_bytes", e.stdout_bytes},
        {"stderr_bytes", e.stderr_bytes}};
    events.push_back(std::move(ej));
  }
  o["events"] = std::move(events);
  o["warnings"] = Arr(r.warnings);
  AddObservabilityJson(r, o);
  o["client"] =
      json::object{{"cpu_seconds", r.cpu_seconds},
                   {"wall_seconds", r.wall_seconds},
                   {"cpu_utilization",
                    r.wall_seconds > 0 ? r.cpu_seconds / r.wall_seconds : 0.0},
                   {"connections_opened", r.connections_opened},
                   {"interrupted", r.interrupted}};
  const TimeSeries& ts = r.series;
  o["timeseries"] = json::object{{"bucket_s", ts.bucket_s},
                                 {"warmup_end_s", ts.warmup_end_s},
                                 {"t_s", Arr(ts.t_s)},
                                 {"sent", Arr(ts.sent)},
                                 {"ok", Arr(ts.ok)},
                                 {"failed", Arr(ts.failed)},
                                 {"output_tps", Arr(ts.output_tps)},
                                 {"in_flight", Arr(ts.in_flight)},
                                 {"ttft_p50_us", Arr(ts.ttft_p50_us)},
                                 {"ttft_p99_us", Arr(ts.ttft_p99_us)},
                                 {"e2e_p50_us", Arr(ts.e2e_p50_us)},
                                 {"e2e_p90_us", Arr(ts.e2e_p90_us)},
                                 {"e2e_p99_us", Arr(ts.e2e_p99_us)},
                                 {"itl_p50_us", Arr(ts.itl_p50_us)},
                                 {"itl_p99_us", Arr(ts.itl_p99_us)}};
  o["cdf"] =
      json::object{{"ttft", Points(r.cdf_ttft)}, {"e2e", Points(r.cdf_e2e)}};
  if (r.cold_start) {
    o["cold_start"] =
        json::object{{"command", r.cold_start->command},
                     {"ready_url", r.cold_start->ready_url},
                     {"ready", r.cold_start->ready},
                     {"time_to_ready_s", r.cold_start->time_to_ready_s},
                     {"note", r.cold_start->note}};
  } else {
    o["cold_start"] = nullptr;
  }
  if (!r.scrape_url.empty()) {
    json::array series;
    for (const ScrapeSeries& s : r.scrape) {
      series.push_back(json::object{{"name", s.name},
                                    {"labels", s.labels},
                                    {"counter", s.counter},
                                    {"t_s", Arr(s.t_s)},
                                    {"value", Arr(s.value)}});
    }
    const ServerMetricsView view =
        CurateServerMetrics(r.scrape, r.scrape_histograms);
    json::array panels;
    for (const ServerPanel& p : view.panels) {
      json::array lines;
      for (const ServerLine& l : p.lines) lines.push_back(json::string(l.name));
      panels.push_back(json::object{{"id", p.id}, {"lines", std::move(lines)}});
    }
    json::object server{{"ttft_p50_us", Num(view.ttft_p50_us)},
                        {"ttft_p99_us", Num(view.ttft_p99_us)},
                        {"e2e_p50_us", Num(view.e2e_p50_us)},
                        {"e2e_p99_us", Num(view.e2e_p99_us)},
                        {"panels", std::move(panels)},
                        {"constant", Arr(view.constant)},
                        {"missing", Arr(view.missing)}};
    o["scrape"] = json::object{{"url", r.scrape_url},
                               {"series", std::move(series)},
                               {"server", std::move(server)}};
  } else {
    o["scrape"] = nullptr;
  }
  if (r.capacity) {
    const CapacityResult& c = *r.capacity;
    auto ci = [](const QuantileEstimate& e) {
      return json::object{{"n", e.n},
                          {"point_us", Num(e.point)},
                          {"lower_us", Num(e.lower)},
                          {"upper_us", Num(e.upper)}};
    };
    json::array curve;
    for (const CapacityPoint& p : c.curve) {
      json::array checks;
      for (const PercentileCheck& k : p.checks) {
        checks.push_back(
            json::object{{"threshold", k.threshold},
                         {"estimate", ci(k.estimate)},
                         {"needed_samples", k.needed_samples},
                         {"effective_samples", k.effective_samples},
                         {"verdict", StepVerdictName(k.verdict)}});
      }
      json::array point_checks;
      for (const PointCheck& k : p.point_checks) {
        point_checks.push_back(
            json::object{{"threshold", k.threshold},
                         {"observed", Num(k.observed)},
                         {"verdict", StepVerdictName(k.verdict)}});
      }
      curve.push_back(json::object{{"search", p.repeat},
                                   {"remeasure", p.remeasure},
                                   {"offered_rps", p.offered_rps},
                                   {"step_s", p.step_s},
                                   {"requests", p.requests},
                                   {"sent", p.sent},
                                   {"completed", p.completed},
                                   {"sent_rps", p.sent_rps},
                                   {"completed_rps", p.completed_rps},
                                   {"tail_s", p.tail_s},
                                   {"drain_s", p.drain_s},
                                   {"drained", p.drained},
                                   {"backlog_growth", p.backlog_growth},
                                   {"kept_up", p.kept_up},
                                   {"ttft_p50_us", Num(p.ttft_p50.point)},
                                   {"ttft_p99_us", Num(p.ttft_p99.point)},
                                   {"e2e_p50_us", Num(p.e2e_p50.point)},
                                   {"e2e_p99_us", Num(p.e2e_p99.point)},
                                   {"ttft_p50_ci", ci(p.ttft_p50)},
                                   {"ttft_p99_ci", ci(p.ttft_p99)},
                                   {"e2e_p50_ci", ci(p.e2e_p50)},
                                   {"e2e_p99_ci", ci(p.e2e_p99)},
                                   {"error_rate", p.error_rate},
                                   {"dispatch_p99_us", Num(p.dispatch_p99_us)},
                                   {"valid", p.valid},
                                   {"pass", p.pass()},
                                   {"verdict", StepVerdictName(p.verdict)},
                                   {"reason", p.reason},
                                   {"checks", std::move(checks)},
                                   {"point_checks", std::move(point_checks)}});
    }
    json::array searches;
    for (const CapacitySearch& s : c.searches) {
      searches.push_back(json::object{{"ceiling_rps", s.ceiling_rps},
                                      {"probe_requests", s.probe_requests},
                                      {"low_rps", s.low_rps},
                                      {"high_rps", s.high_rps},
                                      {"confirmed", s.confirmed}});
    }
    json::object planning;
    if (c.expected_rps > 0) {
      planning = json::object{{"expected_rps", c.expected_rps},
                              {"peak_rps", c.peak_rps},
                              {"peak_sustained", c.peak_sustained},
                              {"replicas", c.replicas},
                              {"replicas_optimistic", c.replicas_optimistic},
                              {"headroom", c.headroom}};
    }
    o["capacity"] = json::object{
        {"ceiling_rps", c.ceiling_rps},
        {"capacity_rps", c.capacity_rps},
        {"capacity_high_rps", c.capacity_high_rps},
        {"range", FormatCapacityRange(c)},
        {"confidence", c.confidence},
        {"confirmed", c.confirmed},
        {"resolution", c.resolution},
        {"min_samples", c.min_samples},
        {"spread", c.spread},
        {"searches", std::move(searches)},
        {"notes", Arr(c.notes)},
        {"expected_rps", c.expected_rps},
        {"headroom", c.headroom},
        {"planning", c.expected_rps > 0 ? json::value(std::move(planning))
                                        : json::value(nullptr)},
        {"curve", std::move(curve)}};
  } else {
    o["capacity"] = nullptr;
  }
  o["tasks"] = Arr(r.task_names);
  return json::serialize(o) + "\n";
}

std::string RenderDebugExchangesJsonl(const RunResult& run) {
  std::string out;
  for (const DebugExchange& d : run.debug_exchanges) {
    json::object o{
        {"request_id", d.request_id}, {"method", d.method},
        {"target", d.target},         {"request_body", d.request_body},
        {"status", d.http_status},    {"class", d.error_class},
        {"detail", d.detail},         {"response_body", d.response_body}};
    out += json::serialize(o);
    out += "\n";
  }
  return out;
}

std::string RenderRequestsJsonl(const RunResult& run,
                                const std::vector<std::string>& task_names) {
  std::string out;
  const int64_t t0 = run.start_ns;
  auto rel = [&](int64_t t) -> json::value {
    if (t == 0) return nullptr;
    return t - t0;
  };
  for (const RequestRecord& r : run.records) {
    json::object o;
    o["id"] = r.id;
    o["phase"] = PhaseName(r.phase);
    o["task"] = static_cast<size_t>(r.task) < task_names.size()
                    ? json::value(task_names[static_cast<size_t>(r.task)])
                    : json::value(r.task);
    if (r.session >= 0) {
      o["session"] = r.session;
      o["turn"] = r.turn;
    }
    o["stream"] = r.streamed;
    if (!r.route.empty()) o["route"] = r.route;
    o["status"] = r.http_status;
    o["class"] = ErrorClassKey(r.error);
    if (!r.ok()) {
      o["label"] = r.FailureLabel();
      o["detail"] = r.error_detail;
    }
    o["t_sched_ns"] = rel(r.t_sched_ns);
    o["t_send_ns"] = rel(r.t_send_ns);
    o["t_first_ns"] = rel(r.t_first_ns);
    o["t_first_output_ns"] = rel(r.t_first_output_ns);
    o["t_last_ns"] = rel(r.t_last_ns);
    o["t_end_ns"] = rel(r.t_end_ns);
    o["output_tokens"] = r.output_tokens;
    o["token_source"] = TokenSourceName(r.token_source);
    o["prompt_tokens"] = r.prompt_tokens;
    if (r.cached_tokens >= 0) o["cached_tokens"] = r.cached_tokens;
    if (r.input_tokens_planned >= 0)
      o["input_tokens_planned"] = r.input_tokens_planned;
    o["done"] = r.done_seen;
    o["finish"] = r.finish_seen;
    AddRequestObservabilityJson(r, o);
    json::array chunks;
    chunks.reserve(r.chunk_ns.size());
    for (int64_t c : r.chunk_ns) chunks.push_back(c - t0);
    o["chunk_ns"] = std::move(chunks);
    out += json::serialize(o);
    out += '\n';
  }
  return out;
}

namespace {

// Reads phases.measure.<path...> as a number (inf -> +inf, null -> NaN).
double Get(const json::value& root,
           std::initializer_list<std::string_view> path) {
  const json::value* v = &root;
  for (std::string_view key : path) {
    if (!v->is_object()) return std::nan("");
    v = v->get_object().if_contains(key);
    if (v == nullptr) return std::nan("");
  }
  if (v->is_double()) return v->get_double();
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  if (v->is_string() && v->get_string() == "inf") return INFINITY;
  return std::nan("");
}

// A config value as text for comparison ("" when absent or null).
std::string ConfigText(const json::value& root,
                       std::initializer_list<std::string_view> path) {
  const json::value* v = &root;
  for (std::string_view key : path) {
    if (!v->is_object()) return "";
    v = v->get_object().if_contains(key);
    if (v == nullptr) return "";
  }
  if (v->is_null()) return "";
  if (v->is_string()) return std::string(v->get_string());
  // Plain decimals ("30", "0.5"), not Boost's "3E1".
  if (v->is_double()) return fmt::format("{}", v->get_double());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  return json::serialize(*v);
}

// What must match for two runs to be comparable (docs/BENCH.md#compare).
// Schema /1 files hold display strings only: their url, api, load and
// length strings are compared instead (a /2 file keeps them under display).
std::vector<std::string> ConfigDifferences(const json::value& a,
                                           const json::value& b) {
  std::vector<std::string> out;
  const json::value* ca = a.get_object().if_contains("config");
  const json::value* cb = b.get_object().if_contains("config");
  if (ca == nullptr || cb == nullptr || !ca->is_object() || !cb->is_object())
    return {"a file has no config: cannot tell whether the runs match"};
  auto structured = [](const json::value& c) {
    return c.get_object().contains("display");
  };
  auto differ = [&](std::string_view name, const std::string& x,
                    const std::string& y) {
    if (x != y)
      out.push_back(fmt::format("{}: '{}' vs '{}'", name, x.empty() ? "-" : x,
                                y.empty() ? "-" : y));
  };
  if (structured(*ca) && structured(*cb)) {
    struct Field {
      const char* name;
      std::initializer_list<std::string_view> path;
    };
    const Field kFields[] = {
        {"url", {"url"}},
        {"api", {"api"}},
        {"scenario", {"scenario"}},
        {"stream", {"stream"}},
        {"model", {"model"}},
        {"load model", {"load", "model"}},
        {"rate", {"load", "rate_rps"}},
        {"stages", {"load", "stages"}},
        {"arrival", {"load", "arrival"}},
        {"burstiness", {"load", "burstiness"}},
        {"max in flight", {"load", "max_in_flight"}},
        {"users", {"load", "users"}},
        {"think", {"load", "think"}},
        {"max_tokens", {"max_tokens"}},
        {"output tokens", {"output_tokens", "spec"}},
        {"pinned output length", {"pin_output_length"}},
        {"input", {"input", "source"}},
        {"input tokens", {"input", "tokens", "spec"}},
        {"prompt length", {"input", "prompt_chars"}},
        {"dataset", {"dataset", "path"}},
        {"temperature", {"temperature"}},
        {"tool version", {"tool_version"}},
    };
    for (const Field& f : kFields)
      differ(f.name, ConfigText(*ca, f.path), ConfigText(*cb, f.path));
    return out;
  }
  auto display = [&](const json::value& c, std::string_view key) {
    return structured(c) ? ConfigText(c, {"display", key})
                         : ConfigText(c, {key});
  };
  for (std::string_view key : {"url", "api", "load", "length"})
    differ(key, display(*ca, key), display(*cb, key));
  return out;
}

}  // namespace

bool IsPerTokenMetric(std::string_view metric_key) {
  return metric_key == "tpot" || metric_key == "itl" || metric_key == "ntpot";
}

double LatencyFloorUs(std::string_view metric_key, double a_us,
                      const CompareOptions& opt) {
  if (!IsPerTokenMetric(metric_key)) return opt.latency_floor_us;
  return std::max(opt.per_token_min_floor_us,
                  opt.per_token_floor * std::max(a_us, 0.0));
}

bool IsLatencyRegression(std::string_view metric_key, double a_us, double b_us,
                         const CompareOptions& opt) {
  if (std::isnan(a_us) || std::isnan(b_us)) return false;
  if (std::isinf(b_us)) return !std::isinf(a_us);
  if (!(a_us > 0) || std::isinf(a_us)) return false;
  return b_us / a_us - 1 > opt.latency_tolerance &&
         b_us - a_us >= LatencyFloorUs(metric_key, a_us, opt);
}

Result<CompareResult> CompareResults(std::string_view text_a,
                                     std::string_view text_b,
                                     const CompareOptions& opt) {
  json::error_code ec;
  json::value a = json::parse(text_a, ec);
  if (ec || !a.is_object())
    return Status::InvalidArgument("first file is not a bench JSON result");
  json::value b = json::parse(text_b, ec);
  if (ec || !b.is_object())
    return Status::InvalidArgument("second file is not a bench JSON result");
  for (const json::value* v : {&a, &b}) {
    const json::value* s = v->get_object().if_contains("schema");
    if (s == nullptr || !s->is_string() ||
        std::string_view(s->get_string()).substr(0, 21) !=
            "redline.bench.result/") {
      return Status::InvalidArgument("not a redline.bench.result JSON file");
    }
  }
  CompareResult res;
  auto verdict = [](const json::value& v) {
    const json::value* x = v.get_object().if_contains("verdict");
    return x && x->is_string() ? std::string(x->get_string())
                               : std::string("?");
  };
  res.verdict_a = verdict(a);
  res.verdict_b = verdict(b);
  res.warnings = ConfigDifferences(a, b);
  auto add_latency = [&](std::string_view metric, std::string_view pct) {
    CompareRow row;
    row.metric = fmt::format("{} {} (adjusted)", metric, pct);
    row.a =
        Get(a, {"phases", "measure", "latency_us", metric, "adjusted", pct});
    row.b =
        Get(b, {"phases", "measure", "latency_us", metric, "adjusted", pct});
    if (std::isnan(row.a) && std::isnan(row.b)) return;
    if (std::isinf(row.b) && !std::isinf(row.a)) {
      row.change = INFINITY;
    } else if (row.a > 0 && std::isfinite(row.a) && std::isfinite(row.b)) {
      row.change = row.b / row.a - 1;
    }
    row.regression = IsLatencyRegression(metric, row.a, row.b, opt);
    res.rows.push_back(row);
  };
  for (std::string_view m : {"ttft", "e2e", "itl", "tpot", "ntpot"}) {
    for (std::string_view p : {"p50", "p95", "p99"}) {
      if (m == "itl") {
        CompareRow row;
        row.metric = fmt::format("itl {}", p);
        row.a =
            Get(a, {"phases", "measure", "latency_us", "itl", "success", p});
        row.b =
            Get(b, {"phases", "measure", "latency_us", "itl", "success", p});
        if (std::isnan(row.a) && std::isnan(row.b)) continue;
        if (row.a > 0 && std::isfinite(row.b)) {
          row.change = row.b / row.a - 1;
          row.regression = IsLatencyRegression("itl", row.a, row.b, opt);
        }
        res.rows.push_back(row);
      } else {
        add_latency(m, p);
      }
    }
  }
  for (std::string_view k : {"completed_rps", "output_tps", "goodput_rps"}) {
    CompareRow row;
    row.metric = std::string(k);
    row.higher_is_better = true;
    row.a = Get(a, {"phases", "measure", "rates", k});
    row.b = Get(b, {"phases", "measure", "rates", k});
    if (row.a > 0) {
      row.change = row.b / row.a - 1;
      row.regression = row.change < -opt.throughput_tolerance;
    }
    res.rows.push_back(row);
  }
  for (std::string_view k : {"all", "timeout", "http_5xx", "http_429"}) {
    CompareRow row;
    row.metric = fmt::format("error rate {}", k);
    row.a = Get(a, {"phases", "measure", "errors", k, "rate"});
    row.b = Get(b, {"phases", "measure", "errors", k, "rate"});
    if (std::isnan(row.a) || std::isnan(row.b)) continue;
    row.change = row.b - row.a;
    row.regression = row.change > opt.error_rate_tolerance;
    res.rows.push_back(row);
  }
  for (const CompareRow& r : res.rows) res.any_regression |= r.regression;
  if (res.verdict_a == "pass" && res.verdict_b != "pass")
    res.any_regression = true;
  return res;
}

std::string RenderCompare(const CompareResult& res, std::string_view name_a,
                          std::string_view name_b) {
  std::string out = fmt::format("A = {} (verdict {})\nB = {} (verdict {})\n",
                                name_a, res.verdict_a, name_b, res.verdict_b);
  if (!res.warnings.empty()) {
    out +=
        "warning: the runs were not set up alike; differences may come "
        "from the setup, not the code:\n";
    for (const std::string& w : res.warnings) out += "  " + w + "\n";
  }
  out += "\n";
  out +=
      fmt::format("  {:<26}{:>14}{:>14}{:>11}\n", "metric", "A", "B", "change");
  for (const CompareRow& r : res.rows) {
    const bool is_rate = r.metric.rfind("error rate", 0) == 0;
    const bool is_latency = !r.higher_is_better && !is_rate;
    auto cell = [&](double v) -> std::string {
      if (is_latency) return FormatUs(v);
      if (is_rate) return std::isnan(v) ? "-" : fmt::format("{:.3f}%", v * 100);
      return std::isnan(v) ? "-" : fmt::format("{:.2f}", v);
    };
    std::string change;
    if (std::isinf(r.change)) {
      change = "→ ∞";
    } else if (is_rate) {
      change = fmt::format("{:+.3f}pp", r.change * 100);
    } else {
      change = fmt::format("{:+.1f}%", r.change * 100);
    }
    out += fmt::format("  {:<26}{:>14}{:>14}{:>11}{}\n", r.metric, cell(r.a),
                       cell(r.b), change, r.regression ? "  REGRESSION" : "");
  }
  out += res.any_regression ? "\nregressions found (exit 99)\n"
                            : "\nno regression\n";
  return out;
}

}  // namespace redline::bench

// Self-contained HTML report: inline CSS and SVG, no scripts, no external
// resources, so it opens offline and can be attached to a CI run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/html_escape.h"
#include "bench/report.h"
#include "bench/report_html_chart.h"
#include "bench/report_html_sections.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

using html::BarChart;
using html::ChartOptions;
using html::LineChart;
using html::Series;

std::string Ms(double us) { return FormatUs(us); }

std::string LatencyRows(const PhaseStats& s, GlossaryTerms* terms) {
  std::string out;
  for (Metric m : kAllMetrics) {
    if (s.Hist(m).empty() && s.Infinite(m) == 0) continue;
    if (s.Hist(m).empty()) continue;
    terms->Use(MetricKey(m));
    if (MetricIsErrorAdjusted(m)) terms->Use("success");
    if (MetricIsErrorAdjusted(m) && s.failed > 0) terms->Use("error-adjusted");
    for (int v = 0; v < (MetricIsErrorAdjusted(m) && s.failed > 0 ? 2 : 1);
         ++v) {
      const bool adj = v == 1;
      out += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
          "td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
          v == 0 ? MetricKey(m) : "",
          MetricIsErrorAdjusted(m) ? (adj ? "error-adjusted" : "success")
                                   : "all",
          Ms(s.Mean(m, adj)), Ms(s.Percentile(m, 50, adj)),
          Ms(s.Percentile(m, 90, adj)), Ms(s.Percentile(m, 95, adj)),
          Ms(s.Percentile(m, 99, adj)), Ms(s.Percentile(m, 99.9, adj)),
          Ms(s.Max(m, adj)), s.SampleCount(m, adj));
    }
  }
  return out;
}

// Every check that failed, not only the first the verdict line names.
std::string FailedChecksHtml(const BenchReport& r) {
  if (r.failed_checks.empty()) return "";
  std::string h =
      fmt::format("<p class=\"bad\">{} failed:</p><ul id=\"failed-checks\">",
                  r.failed_checks.size() == 1
                      ? "1 check"
                      : fmt::format("{} checks", r.failed_checks.size()));
  for (const std::string& f : r.failed_checks)
    h += "<li><code>" + HtmlEscape(f) + "</code></li>";
  return h + "</ul>\n";
}

std::string ColdWarmRow(std::string_view name, const PhaseStats* s) {
  if (s == nullptr || s->attempted == 0)
    return fmt::format("<tr><td>{}</td><td colspan=\"7\">not run</td></tr>",
                       name);
  return fmt::format(
      "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
      "td><td>{}</td><td>{:.2f}%</td></tr>",
      name, s->attempted, Ms(s->Percentile(Metric::kTtft, 50, true)),
      Ms(s->Percentile(Metric::kTtft, 99, true)),
      Ms(s->Percentile(Metric::kE2e, 50, true)),
      Ms(s->Percentile(Metric::kE2e, 99, true)), Ms(s->Max(Metric::kE2e, true)),
      100 * s->ErrorRate(std::nullopt));
}

}  // namespace

std::string RenderHtml(const BenchReport& r) {
  std::string h;
  h.reserve(1 << 16);
  const std::string verdict(VerdictName(r.verdict));
  h +=
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta "
      "name=\"viewport\" "
      "content=\"width=device-width, initial-scale=1\"><title>redline bench "
      "report</title>\n<style>\n"
      "body{font:14px/1.45 system-ui,-apple-system,Segoe "
      "UI,Roboto,sans-serif;margin:24px "
      "auto;max-width:1360px;color:#222;padding:0 16px}"
      "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 "
      "8px;border-bottom:1px solid #ddd;padding-bottom:4px}"
      ".badge{display:inline-block;padding:4px "
      "12px;border-radius:4px;color:#fff;font-weight:600;text-transform:"
      "uppercase}"
      ".pass{background:#2e7d32}.fail{background:#c62828}.invalid{background:#"
      "ef6c00}"
      "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid "
      "#ddd;padding:3px 8px;text-align:right}"
      "td:first-child,th:first-child{text-align:left}th{background:#f5f5f5}."
      "ok{color:#2e7d32}.bad{color:#c62828;font-weight:600}"
      ".charts{display:flex;flex-wrap:wrap;gap:12px}figure.chart{margin:0;"
      "border:1px solid #e5e5e5;border-radius:6px;padding:6px;flex:1 1 "
      "540px;max-width:"
      "654px;box-sizing:border-box}figure.chart svg{max-width:100%;height:auto}"
      "figcaption{font-weight:600;margin:0 0 2px "
      "6px}.grid{stroke:#eee}.axis{stroke:#888}.line{fill:none;stroke-width:1."
      "6}"
      ".tick{font-size:11px;fill:#555}.label,.legend{font-size:11px;fill:#333}"
      ".empty{fill:#999}.warmup{fill:#f3f3f3}"
      ".slo{stroke:#2e7d32;stroke-width:1.3;stroke-dasharray:7,4}"
      ".slo.failed{stroke:#c62828}.slo-label{font-size:10px;fill:#444}"
      ".slo-off,.note{font-weight:400}"
      ".event{stroke:#6a1b9a;stroke-width:1.5}.event.failed{stroke:#c62828}"
      ".event-label{font-size:10px;fill:#6a1b9a}"
      "pre.tail{max-height:12em;overflow:auto;background:#f7f7f7;padding:4px;"
      "margin:2px 0;white-space:pre-wrap}"
      "dl.glossary{display:grid;grid-template-columns:max-content auto;gap:"
      "2px 14px}dl.glossary dt{font-family:monospace}dl.glossary dd{margin:0}"
      ".muted{color:#666}.kv "
      "td{text-align:left}code{background:#f5f5f5;padding:1px "
      "4px}\n</style></head><body>\n";
  h += fmt::format(
      "<h1>redline bench <span class=\"badge {}\" "
      "id=\"verdict\">{}</span></h1>\n",
      verdict, verdict);
  h += fmt::format("<p>{} · exit code {} · started {}</p>\n",
                   HtmlEscape(r.verdict_reason), r.exit_code,
                   HtmlEscape(r.started_at));
  h += FailedChecksHtml(r);
  GlossaryTerms terms;
  if (r.abort) {
    h += fmt::format(
        "<p id=\"abort\" class=\"bad\">Aborted early at {:.1f} s by "
        "<code>{}</code>; {} request(s) in flight "
        "were cancelled and excluded (cooldown).</p>\n",
        r.abort->at_s, HtmlEscape(r.abort->threshold), r.abort->cancelled);
  }
  h += "<p class=\"muted\">Percentiles: nearest rank on HDR histograms (&ge; 3 "
       "significant digits). ITL: one sample per chunk. "
       "Verdicts use error-adjusted distributions: each failed request counts "
       "as +&infin;.</p>\n";

  h += RenderBottleneckHtml(r);
  h += "<h2>Configuration</h2><table class=\"kv\" id=\"config\">";
  for (const auto& [k, v] : r.config)
    h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", HtmlEscape(k),
                     HtmlEscape(v));
  h += ConfigEchoRows(r.config_echo);
  h += "</table>\n";

  h += "<h2>SLO verdict</h2>";
  if (r.thresholds.empty() && !r.peak) {
    h += "<p>No thresholds given.</p>";
  } else {
    h += "<table "
         "id=\"thresholds\"><tr><th>threshold</th><th>result</th><th>observed "
         "(adjusted)</th><th>success-only</th><th>note</th></tr>";
    for (const ThresholdResult& t : r.thresholds) {
      terms.Use(t.threshold.metric_key);
      h += fmt::format(
          "<tr><td><code>{}</code></td><td "
          "class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
          HtmlEscape(t.threshold.source), t.pass ? "ok" : "bad",
          t.pass ? "&#10003; pass" : "&#10007; fail",
          HtmlEscape(FormatThresholdValue(t.threshold, t.observed) + " " +
                     ThresholdInterval(r, t.threshold)),
          t.success_only
              ? HtmlEscape(FormatThresholdValue(t.threshold, *t.success_only))
              : "",
          HtmlEscape(t.note));
    }
    if (r.peak) {
      h += fmt::format(
          "<tr><td><code>completed &ge; 1.2 &times; expected "
          "({:.2f}/s)</code></td><td "
          "class=\"{}\">{}</td><td>{:.2f}/s</td><td></td><td>tolerance "
          "{:.1f}%</td></tr>",
          r.peak->target_rps, r.peak->pass ? "ok" : "bad",
          r.peak->pass ? "&#10003; pass" : "&#10007; fail",
          r.peak->completed_rps, r.peak->tolerance * 100);
    }
    h += "</table>";
  }
  if (r.capacity) {
    h += RenderCapacityHtml(*r.capacity);
    for (const char* t :
         {"CI", "tail", "drain", "offered", "sent", "completed", "errors"})
      terms.Use(t);
  }
  const Validity& v = r.validity;
  h += fmt::format(
      "<p>Run validity: <b class=\"{}\">{}</b> · dispatch delay p99 {} (bound "
      "{})",
      v.valid ? "ok" : "bad", v.valid ? "valid" : "invalid",
      HtmlEscape(FormatUs(v.dispatch_p99_us)),
      HtmlEscape(FormatUs(static_cast<double>(v.dispatch_bound_us))));
  if (v.send_rate_checked) {
    h += fmt::format(" · send rate {:.2f}/s of {:.2f}/s planned",
                     v.achieved_send_rps, v.planned_send_rps);
  }
  h += fmt::format(
      " · client CPU {:.0f}%</p>",
      r.wall_seconds > 0 ? 100 * r.cpu_seconds / r.wall_seconds : 0.0);
  for (const std::string& reason : v.reasons)
    h += "<p class=\"bad\">" + HtmlEscape(reason) + "</p>";
  for (const std::string& w : r.warnings)
    h += "<p class=\"muted\">warning: " + HtmlEscape(w) + "</p>";

  if (r.measure) {
    const PhaseStats& s = *r.measure;
    h += "<h2>Measurement phase</h2>";
    for (const char* t : {"offered", "sent", "completed", "output tok/s",
                          "goodput", "good_fraction", "concurrency"})
      terms.Use(t);
    h += fmt::format(
        "<p>{} requests ({} ok, {} failed) in {:.2f} s · offered {:.2f}/s · "
        "sent {:.2f}/s · completed {:.2f}/s · "
        "output {:.1f} tok/s (peak {:.1f}) · goodput {:.2f}/s · good fraction "
        "{:.2f}% · concurrency {:.1f}</p>",
        s.attempted, s.ok, s.failed, s.window_s, s.offered_rps,
        s.achieved_send_rps, s.completed_rps, s.output_tps, s.peak_output_tps,
        s.goodput_rps, s.good_fraction * 100, s.mean_concurrency);
    h += "<table "
         "id=\"latency\"><tr><th>metric</th><th>view</th><th>mean</th><th>p50</"
         "th><th>p90</th><th>p95</th><th>p99</th>"
         "<th>p99.9</th><th>max</th><th>n</th></tr>";
    h += LatencyRows(s, &terms);
    h += "</table>";
  }

  h += "<h2>Cold vs warm</h2><table "
       "id=\"coldwarm\"><tr><th>phase</th><th>requests</th><th>ttft "
       "p50</th><th>ttft p99</th>"
       "<th>e2e p50</th><th>e2e p99</th><th>e2e max</th><th>errors</th></tr>";
  h += ColdWarmRow("cold (first request)", r.cold ? &*r.cold : nullptr);
  h += ColdWarmRow("warm (measurement)", r.measure ? &*r.measure : nullptr);
  h += "</table>";
  if (r.cold_start) {
    h += fmt::format(
        "<p>Cold start: <code>{}</code> · time to ready {:.2f} s · {}</p>",
        HtmlEscape(r.cold_start->command), r.cold_start->time_to_ready_s,
        r.cold_start->ready ? "ready"
                            : HtmlEscape("not ready: " + r.cold_start->note));
  }

  const TimeSeries& ts = r.series;
  auto ms_fmt = [](double us) { return FormatUs(us); };
  auto s_fmt = [](double s) { return FormatSeconds(s); };
  terms.Use("ttft");
  terms.Use("e2e");
  terms.Use("dispatch_delay");
  h += RenderDecompositionHtml(r);
  h += "<h2>Charts</h2><div class=\"charts\">";
  {
    ChartOptions o;
    o.title =
        "Latency percentiles over time (success only, by completion time)";
    o.x_label = "time since load start";
    o.y_format = ms_fmt;
    o.x_format = s_fmt;
    o.y_label = "latency";
    o.y_lines = SloLines(r, {"ttft", "e2e"});
    o.id = "chart-latency";
    o.marks = EventMarks(r);
    if (ts.warmup_end_s > 0) {
      o.marker_x = ts.warmup_end_s;
      o.marker_label = "warm-up";
    }
    h += LineChart({{"e2e p50", ts.t_s, ts.e2e_p50_us, "", false},
                    {"e2e p99", ts.t_s, ts.e2e_p99_us, "", false},
                    {"ttft p50", ts.t_s, ts.ttft_p50_us, "", true},
                    {"ttft p99", ts.t_s, ts.ttft_p99_us, "", true}},
                   o);
  }
  {
    ChartOptions o;
    o.title = "Latency CDF (measurement phase, success only)";
    o.x_label = "latency (log scale)";
    o.log_x = true;
    o.x_format = ms_fmt;
    o.y_format = [](double f) { return fmt::format("{:.0f}%", f * 100); };
    Series e2e{"e2e", {}, {}, "", false}, ttft{"ttft", {}, {}, "", false};
    for (const auto& [x, y] : r.cdf_e2e) {
      e2e.x.push_back(x);
      e2e.y.push_back(y);
    }
    for (const auto& [x, y] : r.cdf_ttft) {
      ttft.x.push_back(x);
      ttft.y.push_back(y);
    }
    o.x_lines = SloLines(r, {"ttft", "e2e"});
    o.id = "chart-cdf";
    h += LineChart({e2e, ttft}, o);
  }
  if (r.measure && !r.measure->Hist(Metric::kItl).empty()) {
    terms.Use("itl");
    ChartOptions o;
    o.title = "Inter-token latency over time (ITL, by chunk arrival)";
    o.x_label = "time since load start";
    o.y_format = ms_fmt;
    o.x_format = s_fmt;
    o.y_label = "latency";
    o.y_lines = SloLines(r, {"itl"});
    o.id = "chart-itl";
    o.marks = EventMarks(r);
    h += LineChart({{"itl p50", ts.t_s, ts.itl_p50_us, "", false},
                    {"itl p99", ts.t_s, ts.itl_p99_us, "", false}},
                   o);
  }
  {
    ChartOptions o;
    o.title = "Throughput (requests per second)";
    o.x_label = "time since load start";
    o.x_format = s_fmt;
    o.y_label = "req/s";
    o.id = "chart-throughput";
    o.marks = EventMarks(r);
    if (ts.warmup_end_s > 0) {
      o.marker_x = ts.warmup_end_s;
      o.marker_label = "warm-up";
    }
    std::vector<double> sent, ok, failed;
    for (size_t i = 0; i < ts.t_s.size(); ++i) {
      sent.push_back(static_cast<double>(ts.sent[i]) / ts.bucket_s);
      ok.push_back(static_cast<double>(ts.ok[i]) / ts.bucket_s);
      failed.push_back(static_cast<double>(ts.failed[i]) / ts.bucket_s);
    }
    h += LineChart({{"sent/s", ts.t_s, sent, "", true},
                    {"completed/s", ts.t_s, ok, "#2ca02c", false},
                    {"failed/s", ts.t_s, failed, "#c62828", false}},
                   o);
  }
  {
    ChartOptions o;
    o.title = "Output tokens per second (client)";
    o.x_label = "time since load start";
    o.x_format = s_fmt;
    o.y_label = "tok/s";
    o.marks = EventMarks(r);
    h += LineChart({{"output tok/s", ts.t_s, ts.output_tps, "", false}}, o);
    ChartOptions c = o;
    c.title = "Requests in flight (mean per bucket)";
    terms.Use("in flight");
    c.y_label = "requests";
    h += LineChart({{"in flight", ts.t_s, ts.in_flight, "#9467bd", false}}, c);
  }
  {
    std::vector<std::pair<std::string, double>> bars;
    if (r.measure) {
      for (int c = 1; c < kNumErrorClasses; ++c) {
        bars.emplace_back(
            std::string(ErrorClassKey(static_cast<ErrorClass>(c))),
            static_cast<double>(r.measure->errors[static_cast<size_t>(c)]));
      }
    }
    terms.Use("errors");
    for (const auto& [cls, count] : bars) {
      if (count > 0) terms.Use(cls);
    }
    h += BarChart("Errors by class (measurement phase)", bars,
                  [](double v) { return fmt::format("{:.0f}", v); });
  }
  if (r.capacity && !r.capacity->curve.empty()) {
    ChartOptions o;
    o.title = "Capacity search: latency vs offered rate";
    o.x_label = "offered rate (req/s)";
    o.y_format = ms_fmt;
    o.y_label = "latency";
    o.y_lines = SloLines(r, {"ttft", "e2e"});
    std::vector<CapacityPoint> pts = r.capacity->curve;
    std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
      return a.offered_rps < b.offered_rps;
    });
    Series p99{"e2e p99", {}, {}, "", false}, p50{"e2e p50", {}, {}, "", false},
        t99{"ttft p99", {}, {}, "", true};
    for (const auto& p : pts) {
      p99.x.push_back(p.offered_rps);
      p99.y.push_back(p.e2e_p99.point);
      p50.x.push_back(p.offered_rps);
      p50.y.push_back(p.e2e_p50.point);
      t99.x.push_back(p.offered_rps);
      t99.y.push_back(p.ttft_p99.point);
    }
    h += LineChart({p50, p99, t99}, o);
  }
  h += "</div>";
  h += EventsSection(r);

  if (r.measure && !r.measure->failure_labels.empty()) {
    h += "<h2>Failures by label</h2><table "
         "id=\"failures\"><tr><th>label</th><th>count</th></tr>";
    for (const auto& [label, count] : r.measure->failure_labels) {
      h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", HtmlEscape(label),
                       count);
    }
    h += "</table>";
  }

  h += ServerMetricsSection(r, &terms);
  h += GlossarySection(terms);
  h += "<p class=\"muted\">Generated by redline bench. JSON schema: "
       "docs/BENCH_JSON.md.</p></body></html>\n";
  return h;
}

}  // namespace redline::bench

// Self-contained HTML report: inline CSS and SVG, no scripts, no external
// resources, so it opens offline and can be attached to a CI run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/html_escape.h"
#include "bench/report.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::string color;
  bool dashed = false;
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::function<std::string(double)> y_format = [](double v) {
    return fmt::format("{:.3g}", v);
  };
  std::function<std::string(double)> x_format = [](double v) {
    return fmt::format("{:.3g}", v);
  };
  bool log_x = false;
  std::optional<double> marker_x;  // vertical line (end of warm-up)
  std::string marker_label;
  double y_min_force = 0;  // y axis starts at 0 unless data is negative
};

// "Nice" tick step for a range (1, 2, 5 x 10^k).
double NiceStep(double range, int target) {
  if (range <= 0) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

std::string LineChart(const std::vector<Series>& series,
                      const ChartOptions& o) {
  const double W = 640, H = 260, L = 70, R = 16, T = 28, B = 40;
  double x0 = INFINITY, x1 = -INFINITY, y0 = o.y_min_force, y1 = -INFINITY;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      if (o.log_x && s.x[i] <= 0) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  }
  std::string svg = fmt::format(
      "<figure class=\"chart\"><figcaption>{}</figcaption><svg "
      "xmlns=\"http://www.w3.org/2000/svg\" "
      "viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" "
      "aria-label=\"{}\">",
      HtmlEscape(o.title), W, H, W, H, HtmlEscape(o.title));
  if (!std::isfinite(x0) || !std::isfinite(y1)) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" class=\"empty\">no data</text></svg></figure>",
        W / 2 - 30, H / 2);
    return svg;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const double lx0 = o.log_x ? std::log10(x0) : x0,
               lx1 = o.log_x ? std::log10(x1) : x1;
  auto px = [&](double x) {
    return L + ((o.log_x ? std::log10(x) : x) - lx0) /
                   (lx1 - lx0 == 0 ? 1 : lx1 - lx0) * (W - L - R);
  };
  const double ystep = NiceStep(y1 - y0, 5);
  y1 = std::ceil(y1 / ystep) * ystep;
  auto py = [&](double y) {
    return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  };
  // Grid and y ticks.
  for (double y = y0; y <= y1 + ystep / 2; y += ystep) {
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" "
        "y2=\"{:.1f}\"/>",
        L, py(y), W - R, py(y));
    svg += fmt::format(
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>",
        L - 6, py(y) + 4, HtmlEscape(o.y_format(y)));
  }
  // X ticks.
  if (o.log_x) {
    // 1-2-5 ticks per decade when the range is narrow, decades otherwise.
    std::vector<double> ticks;
    for (double d = std::floor(lx0); d <= std::ceil(lx1); d += 1) {
      for (double m : lx1 - lx0 < 2.5 ? std::vector<double>{1, 2, 5}
                                      : std::vector<double>{1}) {
        const double x = m * std::pow(10.0, d);
        if (x >= x0 * 0.999 && x <= x1 * 1.001) ticks.push_back(x);
      }
    }
    for (double x : ticks) {
      svg += fmt::format(
          "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" "
          "y2=\"{:.1f}\"/>",
          px(x), T, px(x), H - B);
      svg += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
          "text-anchor=\"middle\">{}</text>",
          px(x), H - B + 16, HtmlEscape(o.x_format(x)));
    }
  } else {
    const double xstep = NiceStep(x1 - x0, 6);
    for (double x = std::ceil(x0 / xstep) * xstep; x <= x1 + 1e-9; x += xstep) {
      svg += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
          "text-anchor=\"middle\">{}</text>",
          px(x), H - B + 16, HtmlEscape(o.x_format(x)));
    }
  }
  svg += fmt::format(
      "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", L,
      H - B, W - R, H - B);
  svg += fmt::format(
      "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", L, T, L,
      H - B);
  svg += fmt::format(
      "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" "
      "text-anchor=\"middle\">{}</text>",
      (L + W - R) / 2, H - 6, HtmlEscape(o.x_label));
  if (o.marker_x && *o.marker_x > x0 && *o.marker_x < x1) {
    const double mx = px(*o.marker_x);
    svg += fmt::format(
        "<rect class=\"warmup\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" "
        "height=\"{}\"/>",
        L, T, mx - L, H - T - B);
    svg += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{}\">{}</text>",
                       L + 4, T + 12, HtmlEscape(o.marker_label));
  }
  // Lines (NaN breaks the line).
  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    std::string d;
    bool pen = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) ||
          (o.log_x && s.x[i] <= 0)) {
        pen = false;
        continue;
      }
      d += fmt::format("{}{:.1f},{:.1f} ", pen ? "L" : "M", px(s.x[i]),
                       py(s.y[i]));
      pen = true;
    }
    const std::string color =
        s.color.empty() ? kColors[si % std::size(kColors)] : s.color;
    if (!d.empty()) {
      svg += fmt::format("<path class=\"line\" d=\"{}\" stroke=\"{}\"{}/>", d,
                         color, s.dashed ? " stroke-dasharray=\"5,3\"" : "");
    }
    // Legend.
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"8\" width=\"10\" height=\"10\" "
        "fill=\"{}\"/><text class=\"legend\" "
        "x=\"{:.1f}\" y=\"17\">{}</text>",
        L + 8 + static_cast<double>(si) * 120, color,
        L + 22 + static_cast<double>(si) * 120, HtmlEscape(s.name));
  }
  svg += "</svg></figure>";
  return svg;
}

std::string BarChart(const std::string& title,
                     const std::vector<std::pair<std::string, double>>& bars,
                     const std::function<std::string(double)>& fmt_value) {
  const double W = 640, row = 24, L = 180, R = 90;
  const double H = std::max(60.0, 30 + row * static_cast<double>(bars.size()));
  std::string svg = fmt::format(
      "<figure class=\"chart\"><figcaption>{}</figcaption><svg "
      "xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">",
      HtmlEscape(title), W, H, W, H, HtmlEscape(title));
  double max = 0;
  for (const auto& [k, v] : bars) max = std::max(max, v);
  if (bars.empty() || max <= 0) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"35\" class=\"empty\">no "
        "errors</text></svg></figure>",
        W / 2 - 30);
    return svg;
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = 15 + row * static_cast<double>(i);
    const double w = (W - L - R) * bars[i].second / max;
    svg += fmt::format(
        "<text class=\"tick\" x=\"{}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>",
        L - 8, y + 14, HtmlEscape(bars[i].first));
    svg += fmt::format(
        "<rect class=\"bar\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"{}\" fill=\"{}\"/>",
        L, y, std::max(w, 1.0), row - 6, kColors[(i + 1) % std::size(kColors)]);
    svg +=
        fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
                    L + w + 6, y + 14, HtmlEscape(fmt_value(bars[i].second)));
  }
  svg += "</svg></figure>";
  return svg;
}

std::string Ms(double us) { return FormatUs(us); }

std::string LatencyRows(const PhaseStats& s) {
  std::string out;
  for (Metric m : kAllMetrics) {
    if (s.Hist(m).empty() && s.Infinite(m) == 0) continue;
    if (s.Hist(m).empty()) continue;
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
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta "
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
       "border:1px solid #e5e5e5;border-radius:6px;padding:6px}"
       "figcaption{font-weight:600;margin:0 0 2px "
       "6px}.grid{stroke:#eee}.axis{stroke:#888}.line{fill:none;stroke-width:1."
       "6}"
       ".tick{font-size:11px;fill:#555}.label,.legend{font-size:11px;fill:#333}"
       ".empty{fill:#999}.warmup{fill:#f3f3f3}"
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
  h += "<h2>Configuration</h2><table class=\"kv\">";
  for (const auto& [k, v] : r.config)
    h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", HtmlEscape(k),
                     HtmlEscape(v));
  h += "</table>\n";

  h += "<h2>SLO verdict</h2>";
  if (r.thresholds.empty() && !r.peak) {
    h += "<p>No thresholds given.</p>";
  } else {
    h += "<table "
         "id=\"thresholds\"><tr><th>threshold</th><th>result</th><th>observed "
         "(adjusted)</th><th>success-only</th><th>note</th></tr>";
    for (const ThresholdResult& t : r.thresholds) {
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
  if (r.capacity) h += RenderCapacityHtml(*r.capacity);
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
    h += LatencyRows(s);
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
  auto s_fmt = [](double s) { return fmt::format("{:.3g}s", s); };
  h += RenderDecompositionHtml(r);
  h += "<h2>Charts</h2><div class=\"charts\">";
  {
    ChartOptions o;
    o.title =
        "Latency percentiles over time (success only, by completion time)";
    o.x_label = "time since load start";
    o.y_format = ms_fmt;
    o.x_format = s_fmt;
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
    h += LineChart({e2e, ttft}, o);
  }
  {
    ChartOptions o;
    o.title = "Throughput (requests per second)";
    o.x_label = "time since load start";
    o.x_format = s_fmt;
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
    o.title = "Output tokens per second and requests in flight";
    o.x_label = "time since load start";
    o.x_format = s_fmt;
    h += LineChart({{"output tok/s", ts.t_s, ts.output_tps, "", false}}, o);
    ChartOptions c = o;
    c.title = "Requests in flight (mean per bucket)";
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
    h += BarChart("Errors by class (measurement phase)", bars,
                  [](double v) { return fmt::format("{:.0f}", v); });
  }
  if (r.capacity && !r.capacity->curve.empty()) {
    ChartOptions o;
    o.title = "Capacity search: latency vs offered rate";
    o.x_label = "offered rate (req/s)";
    o.y_format = ms_fmt;
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

  if (r.measure && !r.measure->failure_labels.empty()) {
    h += "<h2>Failures by label</h2><table "
         "id=\"failures\"><tr><th>label</th><th>count</th></tr>";
    for (const auto& [label, count] : r.measure->failure_labels) {
      h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", HtmlEscape(label),
                       count);
    }
    h += "</table>";
  }

  if (!r.scrape_url.empty()) {
    h += fmt::format("<h2>Server metrics ({})</h2>", HtmlEscape(r.scrape_url));
    if (r.scrape.empty()) h += "<p>No matching series were scraped.</p>";
    h += "<div class=\"charts\">";
    int shown = 0;
    for (const ScrapeSeries& s : r.scrape) {
      if (shown++ == 16) break;
      ChartOptions o;
      o.title = s.name + (s.labels.empty() ? "" : "{" + s.labels + "}") +
                (s.counter ? " (rate per second)" : "");
      o.x_label = "time since load start";
      o.x_format = s_fmt;
      Series ser{s.name, {}, {}, "", false};
      if (s.counter) {
        for (size_t i = 1; i < s.t_s.size(); ++i) {
          const double dt = s.t_s[i] - s.t_s[i - 1];
          if (dt <= 0) continue;
          ser.x.push_back(s.t_s[i]);
          ser.y.push_back((s.value[i] - s.value[i - 1]) / dt);
        }
      } else {
        ser.x = s.t_s;
        ser.y = s.value;
      }
      h += LineChart({ser}, o);
    }
    h += "</div>";
  }
  h += "<p class=\"muted\">Generated by redline bench. JSON schema: "
       "docs/BENCH_JSON.md.</p></body></html>\n";
  return h;
}

}  // namespace redline::bench

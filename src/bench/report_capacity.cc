// The capacity search's part of the text and HTML reports
// (docs/BENCH.md#reading-the-capacity-range).
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "base/html_escape.h"
#include "bench/report.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

std::string Bound(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v < 0 ? "-∞" : "∞";
  return FormatUs(v);
}

std::string Planning(const CapacityResult& c) {
  if (c.expected_rps <= 0) return "";
  std::string s = fmt::format(
      "peak 1.2 × expected {:.4g}/s = {:.4g}/s: sustained within SLO: {}",
      c.expected_rps, c.peak_rps, c.peak_sustained);
  if (c.replicas > 0) {
    s += fmt::format(" · replicas for the peak: {}", c.replicas);
    if (c.replicas_optimistic > 0 && c.replicas_optimistic != c.replicas)
      s += fmt::format(" ({} at the range's high end)", c.replicas_optimistic);
  } else {
    s += " · replicas for the peak: unknown (no rate passed)";
  }
  s += fmt::format(" · headroom {:.2f}×", c.headroom);
  return s;
}

}  // namespace

std::string FormatEstimateWithInterval(const QuantileEstimate& e) {
  if (e.n == 0) return "-";
  return fmt::format("{} [{}, {}]", Bound(e.point), Bound(e.lower),
                     Bound(e.upper));
}

std::string ThresholdInterval(const BenchReport& r, const Threshold& t) {
  if (t.aggregation != Aggregation::kPercentile &&
      t.aggregation != Aggregation::kMed)
    return "";
  const std::optional<Metric> m = MetricFromKey(t.metric_key);
  const std::optional<PhaseStats>& phase = t.phase == Phase::kCold ? r.cold
                                           : t.phase == Phase::kWarmup
                                               ? r.warmup
                                               : r.measure;
  if (!m || !phase) return "";
  const double q =
      t.aggregation == Aggregation::kMed ? 0.5 : t.percentile / 100;
  const QuantileEstimate e = EstimateQuantile(
      phase->Hist(*m), MetricIsErrorAdjusted(*m) ? phase->Infinite(*m) : 0, q,
      0.95);
  if (e.n == 0) return "";
  return fmt::format("[{}, {}] at 95 %", Bound(e.lower), Bound(e.upper));
}

std::string FormatCapacityRange(const CapacityResult& c) {
  const double conf = c.confidence * 100;
  if (c.capacity_rps <= 0) {
    return c.capacity_high_rps > 0
               ? fmt::format("below {:.4g} req/s (no rate passed)",
                             c.capacity_high_rps)
               : "unknown (no rate passed)";
  }
  if (c.capacity_high_rps <= 0)
    return fmt::format(
        "at least {:.4g} req/s at {:.0f} % (no rate above it "
        "failed conclusively)",
        c.capacity_rps, conf);
  return fmt::format("{:.4g}–{:.4g} req/s at {:.0f} %", c.capacity_rps,
                     c.capacity_high_rps, conf);
}

std::string RenderCapacityText(const CapacityResult& c) {
  std::string out = fmt::format(
      "\ncapacity search: {}{} · ceiling {:.2f}/s (closed loop)\n",
      FormatCapacityRange(c),
      c.confirmed ? " (confirmed by re-measurement)" : " (not confirmed)",
      c.ceiling_rps);
  out += fmt::format(
      "  steps need ≥ {} samples; resolution {:.0f} %; intervals are {:.0f} % "
      "order-statistic intervals, error-adjusted\n",
      c.min_samples, c.resolution * 100, c.confidence * 100);
  if (c.searches.size() > 1) {
    out += "  searches:";
    for (const CapacitySearch& s : c.searches) {
      out += fmt::format("{} {:.4g}–{}", &s == &c.searches.front() ? "" : ",",
                         s.low_rps,
                         s.high_rps > 0 ? fmt::format("{:.4g}", s.high_rps)
                                        : std::string("?"));
    }
    out += fmt::format(" · spread of the low end {:.1f} %\n", c.spread * 100);
  }
  if (const std::string p = Planning(c); !p.empty()) out += "  " + p + "\n";
  for (const std::string& n : c.notes) out += "  note: " + n + "\n";
  out += fmt::format(
      "  {:>3}{:>10}{:>9}{:>13}{:>7}{:>7}{:>7}{:>7}{:>7}  {:<30}{:<30}{:>8}  "
      "{}\n",
      "#", "offered/s", "sent/s", "completed/s", "sent", "ok", "step", "tail",
      "drain", "e2e p50 [CI]", "e2e p99 [CI]", "errors", "verdict");
  int i = 0;
  for (const CapacityPoint& p : c.curve) {
    ++i;
    out += fmt::format(
        "  {:>3}{:>10.2f}{:>9.2f}{:>13.2f}{:>7}{:>7}{:>6.1f}s{:>6.2f}s{:>6.2f}s"
        "  {:<30}{:<30}{:>7.2f}%  {}{}{}\n",
        i, p.offered_rps, p.sent_rps, p.completed_rps, p.sent, p.completed,
        p.step_s, p.tail_s, p.drain_s, FormatEstimateWithInterval(p.e2e_p50),
        FormatEstimateWithInterval(p.e2e_p99), p.error_rate * 100,
        StepVerdictName(p.verdict), p.remeasure ? " (re-measure)" : "",
        c.searches.size() > 1 ? fmt::format(" [search {}]", p.repeat + 1)
                              : std::string());
    for (const PercentileCheck& k : p.checks) {
      out += fmt::format(
          "        {:<28} {} (n={}, needs {}{}) {}\n", k.threshold,
          FormatEstimateWithInterval(k.estimate), k.estimate.n,
          k.needed_samples,
          k.effective_samples > 0 && k.effective_samples < k.estimate.n
              ? fmt::format(", worth {} independent", k.effective_samples)
              : "",
          StepVerdictName(k.verdict));
    }
    for (const PointCheck& k : p.point_checks) {
      out += fmt::format("        {:<28} {} {}\n", k.threshold, k.shown,
                         StepVerdictName(k.verdict));
    }
    if (!p.reason.empty()) out += "        → " + p.reason + "\n";
    if (!p.drained)
      out += "        → the target was not idle before the step\n";
  }
  return out;
}

std::string RenderCapacityHtml(const CapacityResult& c) {
  std::string h = "<h2>Capacity</h2>";
  h += fmt::format(
      "<p id=\"capacity\">Capacity <b>{}</b> {} · ceiling {:.2f}/s (closed "
      "loop) · steps need &ge; {} samples · resolution {:.0f} %</p>",
      HtmlEscape(FormatCapacityRange(c)),
      c.confirmed ? "(confirmed by re-measurement)" : "(not confirmed)",
      c.ceiling_rps, c.min_samples, c.resolution * 100);
  if (const std::string p = Planning(c); !p.empty())
    h += "<p id=\"planning\">" + HtmlEscape(p) + "</p>";
  if (c.searches.size() > 1) {
    h += "<p id=\"repeats\">Searches:";
    for (const CapacitySearch& s : c.searches) {
      h += fmt::format("{} {:.4g}&ndash;{}",
                       &s == &c.searches.front() ? "" : ",", s.low_rps,
                       s.high_rps > 0 ? fmt::format("{:.4g}", s.high_rps)
                                      : std::string("?"));
    }
    h += fmt::format(" · spread of the low end {:.1f} %</p>", c.spread * 100);
  }
  for (const std::string& n : c.notes)
    h += "<p class=\"muted\">" + HtmlEscape(n) + "</p>";
  h += "<table id=\"capacity-steps\"><tr><th>#</th><th>offered/s</th>"
       "<th>sent/s</th><th>completed/s</th><th>sent</th><th>ok</th>"
       "<th>step</th><th>tail</th><th>drain</th><th>e2e p50 [CI]</th>"
       "<th>e2e p99 [CI]</th><th>ttft p99 [CI]</th><th>errors</th>"
       "<th>thresholds [CI]</th><th>verdict</th></tr>";
  int i = 0;
  for (const CapacityPoint& p : c.curve) {
    ++i;
    std::string checks;
    for (const PercentileCheck& k : p.checks) {
      checks += fmt::format(
          "{}{} {} (n={}, needs {}): {}", checks.empty() ? "" : "<br>",
          HtmlEscape(k.threshold),
          HtmlEscape(FormatEstimateWithInterval(k.estimate)), k.estimate.n,
          k.needed_samples, HtmlEscape(StepVerdictName(k.verdict)));
    }
    for (const PointCheck& k : p.point_checks) {
      checks += fmt::format("{}{} {}: {}", checks.empty() ? "" : "<br>",
                            HtmlEscape(k.threshold), HtmlEscape(k.shown),
                            HtmlEscape(StepVerdictName(k.verdict)));
    }
    h += fmt::format(
        "<tr><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{}"
        "</td><td>{}</td><td>{:.1f} s</td><td>{:.2f} s</td><td>{:.2f} s</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{:.2f}%</td><td>{}</td>"
        "<td class=\"{}\">{}{}</td></tr>",
        i, p.offered_rps, p.sent_rps, p.completed_rps, p.sent, p.completed,
        p.step_s, p.tail_s, p.drain_s,
        HtmlEscape(FormatEstimateWithInterval(p.e2e_p50)),
        HtmlEscape(FormatEstimateWithInterval(p.e2e_p99)),
        HtmlEscape(FormatEstimateWithInterval(p.ttft_p99)), p.error_rate * 100,
        checks,
        p.pass() ? "ok" : (p.verdict == StepVerdict::kFail ? "bad" : "muted"),
        HtmlEscape(StepVerdictName(p.verdict)),
        HtmlEscape(p.reason.empty() ? "" : ": " + p.reason));
  }
  h += "</table>";
  return h;
}

}  // namespace redline::bench

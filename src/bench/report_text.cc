// The terminal summary of a run.
#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "bench/report.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

const Metric kTableMetrics[] = {
    Metric::kTtft,      Metric::kTtfo,         Metric::kE2e, Metric::kE2eSched,
    Metric::kTpot,      Metric::kNtpot,        Metric::kItl, Metric::kTtftSched,
    Metric::kE2eStream, Metric::kDispatchDelay};

void PhaseSummary(std::string& out, const PhaseStats& s,
                  std::string_view title) {
  out += fmt::format("{}: {} requests ({} ok, {} failed) in {:.2f} s\n", title,
                     s.attempted, s.ok, s.failed, s.window_s);
  out += fmt::format(
      "  rates: offered {:.2f}/s · sent {:.2f}/s · completed {:.2f}/s · output "
      "{:.1f} tok/s (peak {:.1f}) · "
      "concurrency {:.1f}\n",
      s.offered_rps, s.achieved_send_rps, s.completed_rps, s.output_tps,
      s.peak_output_tps, s.mean_concurrency);
  out += fmt::format(
      "  goodput {:.2f}/s ({:.1f} tok/s) · good fraction {:.2f}% · output "
      "tokens {} (usage {}, chunks {})\n",
      s.goodput_rps, s.token_goodput_tps, s.good_fraction * 100,
      s.output_tokens, s.token_sources[static_cast<int>(TokenSource::kUsage)],
      s.token_sources[static_cast<int>(TokenSource::kChunks)]);
}

void LatencyTable(std::string& out, const PhaseStats& s) {
  out += fmt::format(
      "  {:<15}{:<10}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>8}\n",
      "metric", "view", "mean", "p50", "p90", "p95", "p99", "p99.9", "max",
      "n");
  for (Metric m : kTableMetrics) {
    if (s.Hist(m).empty() && s.Infinite(m) == 0) continue;
    if (s.Hist(m).empty() &&
        (m == Metric::kTtft || m == Metric::kTtfo || m == Metric::kTpot))
      continue;
    for (int v = 0; v < (MetricIsErrorAdjusted(m) && s.failed > 0 ? 2 : 1);
         ++v) {
      const bool adj = v == 1;
      auto cell = [&](double us) {
        if (std::isinf(us)) return std::string("∞");
        return FormatUs(us);
      };
      out += fmt::format(
          "  {:<15}{:<10}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>8}\n",
          v == 0 ? MetricKey(m) : "",
          MetricIsErrorAdjusted(m) ? (adj ? "adjusted" : "success") : "all",
          cell(s.Mean(m, adj)), cell(s.Percentile(m, 50, adj)),
          cell(s.Percentile(m, 90, adj)), cell(s.Percentile(m, 95, adj)),
          cell(s.Percentile(m, 99, adj)), cell(s.Percentile(m, 99.9, adj)),
          cell(s.Max(m, adj)), s.SampleCount(m, adj));
    }
  }
  if (s.failed > 0) {
    std::string classes;
    for (int c = 1; c < kNumErrorClasses; ++c) {
      if (s.errors[static_cast<size_t>(c)] == 0) continue;
      if (!classes.empty()) classes += ", ";
      classes += fmt::format("{} {} ({:.2f}%)",
                             ErrorClassKey(static_cast<ErrorClass>(c)),
                             s.errors[static_cast<size_t>(c)],
                             100.0 * s.ErrorRate(static_cast<ErrorClass>(c)));
    }
    out += "  errors: " + classes + "\n";
    int shown = 0;
    for (const auto& [label, count] : s.failure_labels) {
      if (shown++ == 8) break;
      out += fmt::format("    {:>6} × {}\n", count, label);
    }
  }
}

// Text on one line, control characters escaped, cut at `limit` bytes.
// Per-route share and E2E (x-redline-route), when the server named routes.
void RouteTable(std::string& out, const std::vector<RouteStats>& routes) {
  if (routes.empty()) return;
  out += "\nper route (x-redline-route):\n";
  out += fmt::format("  {:<12} {:>9} {:>7} {:>10} {:>10} {:>10}\n", "route",
                     "requests", "share", "e2e p50", "e2e p95", "e2e p99");
  for (const RouteStats& s : routes) {
    out +=
        fmt::format("  {:<12} {:>9} {:>6.1f}% {:>10} {:>10} {:>10}\n", s.route,
                    s.requests, 100 * s.share, FormatUs(s.e2e_p50_us),
                    FormatUs(s.e2e_p95_us), FormatUs(s.e2e_p99_us));
  }
}

std::string OneLine(std::string_view text, size_t limit) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < limit; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (out.size() >= limit && text.size() > limit) out += " ...";
  return out;
}

// The last non-empty line of an output tail.
std::string_view LastLine(std::string_view tail) {
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r'))
    tail.remove_suffix(1);
  const size_t nl = tail.rfind('\n');
  return nl == std::string_view::npos ? tail : tail.substr(nl + 1);
}

// One line per --event command, on the load timeline's axis.
void EventTable(std::string& out, const std::vector<EventRecord>& events) {
  if (events.empty()) return;
  out += "\nevents (seconds from the load start):\n";
  out += fmt::format("  {:>9} {:>9} {:>9}  {:<44} {}\n", "scheduled", "started",
                     "ended", "outcome", "command");
  for (const EventRecord& e : events) {
    out += fmt::format("  {:>8.2f}s {:>9} {:>9}  {:<44} {}\n",
                       static_cast<double>(e.spec.offset_ns) / 1e9,
                       e.started ? fmt::format("{:.2f}s", e.start_s) : "-",
                       e.finished ? fmt::format("{:.2f}s", e.end_s) : "-",
                       e.Outcome(), OneLine(e.spec.command, 200));
    for (const auto& [name, tail, bytes] :
         {std::tuple{"stdout", &e.stdout_tail, e.stdout_bytes},
          std::tuple{"stderr", &e.stderr_tail, e.stderr_bytes}}) {
      const std::string_view last = LastLine(*tail);
      if (last.empty()) continue;
      out += fmt::format("      {} ({} B, last line): {}\n", name, bytes,
                         OneLine(last, 200));
    }
  }
}

}  // namespace

std::string RenderText(const BenchReport& r) {
  std::string out;
  out += "redline bench";
  for (const auto& [k, v] : r.config) {
    if (k == "url" || k == "load" || k == "length") out += " · " + v;
  }
  out += "\n";
  std::string timeouts;
  for (const auto& [k, v] : r.config) {
    if (k == "timeouts") timeouts = v;
  }
  out += "timeouts: " + timeouts +
         " · percentiles: nearest rank on HDR histograms (>= 3 significant "
         "digits) · ITL per chunk · "
         "verdicts on error-adjusted distributions (failed = ∞)\n\n";
  out += RenderBottleneckText(r);
  if (r.cold && r.cold->attempted > 0) {
    const PhaseStats& c = *r.cold;
    out += fmt::format("cold (first request{}): ", c.attempted > 1 ? "s" : "");
    if (c.ok > 0) {
      out += fmt::format("ttft {} · e2e {}",
                         FormatUs(c.Percentile(Metric::kTtft, 100, false)),
                         FormatUs(c.Percentile(Metric::kE2e, 100, false)));
    }
    if (c.failed > 0)
      out += fmt::format(
          " · {} failed ({})", c.failed,
          c.failure_labels.empty() ? "" : c.failure_labels[0].first);
    out += "\n";
  }
  if (r.cold_start) {
    const ColdStartInfo& cs = *r.cold_start;
    out += fmt::format("cold start: {} · time to ready {:.2f} s ({})\n",
                       cs.command, cs.time_to_ready_s,
                       cs.ready ? "ready" : "NOT ready: " + cs.note);
  }
  if (r.warmup)
    out += fmt::format("warm-up: {} requests excluded from statistics\n",
                       r.warmup->attempted);
  if (r.measure) {
    PhaseSummary(out, *r.measure, "measurement");
    LatencyTable(out, *r.measure);
  }
  out += RenderDecompositionText(r);
  RouteTable(out, r.routes);
  EventTable(out, r.events);
  if (!r.first_errors.empty()) {
    out += "\nfirst error of each class:\n";
    for (const ErrorSample& e : r.first_errors) {
      out += fmt::format("  {} (request {}): {}\n", ErrorClassKey(e.error),
                         e.request_id, e.label);
      // The detail is often the body's start (a non-JSON error page).
      if (!e.detail.empty() && e.label.find(e.detail) == std::string::npos &&
          !e.body.starts_with(e.detail))
        out += "    detail: " + OneLine(e.detail, 200) + "\n";
      if (!e.body.empty()) out += "    body: " + OneLine(e.body, 300) + "\n";
    }
  }
  if (r.peak) {
    const PeakCheck& p = *r.peak;
    out += fmt::format(
        "\npeak check: expected {:.2f}/s → target 1.2× = {:.2f}/s · completed "
        "{:.2f}/s (tolerance {:.1f}%) {}\n",
        p.expected_rps, p.target_rps, p.completed_rps, p.tolerance * 100,
        p.pass ? "✓" : "✗");
  }
  if (r.capacity) out += RenderCapacityText(*r.capacity);
  if (!r.thresholds.empty()) {
    out += "\nthresholds:\n";
    for (const ThresholdResult& t : r.thresholds) {
      out +=
          fmt::format("  {} {:<36} {}", t.pass ? "✓" : "✗", t.threshold.source,
                      FormatThresholdValue(t.threshold, t.observed));
      if (t.success_only &&
          (std::isinf(t.observed) || *t.success_only != t.observed)) {
        out += fmt::format("  (success-only {})",
                           FormatThresholdValue(t.threshold, *t.success_only));
      }
      if (const std::string ci = ThresholdInterval(r, t.threshold); !ci.empty())
        out += "  " + ci;
      if (!t.note.empty()) out += "  [" + t.note + "]";
      out += "\n";
    }
  }
  const Validity& v = r.validity;
  out += fmt::format(
      "\nvalidity: dispatch delay p99 {} (bound {}) {}",
      FormatUs(v.dispatch_p99_us),
      FormatUs(static_cast<double>(v.dispatch_bound_us)),
      v.dispatch_p99_us <= static_cast<double>(v.dispatch_bound_us) ? "✓"
                                                                    : "✗");
  if (v.send_rate_checked) {
    out += fmt::format(" · send rate {:.2f}/s of {:.2f}/s planned {}",
                       v.achieved_send_rps, v.planned_send_rps,
                       v.send_shortfall <= 0.05 ? "✓" : "✗");
  }
  out += fmt::format(
      " · client CPU {:.0f}% · {} connections\n",
      r.wall_seconds > 0 ? 100 * r.cpu_seconds / r.wall_seconds : 0.0,
      r.connections_opened);
  for (const std::string& w : r.warnings) out += "warning: " + w + "\n";
  if (r.abort) {
    out += fmt::format(
        "aborted early at {:.1f} s by '{}' ({}); {} request(s) in flight "
        "cancelled, excluded as cooldown\n",
        r.abort->at_s, r.abort->threshold,
        r.abort->certain ? "failed for good" : "failing after its delay",
        r.abort->cancelled);
  }
  if (!r.failed_checks.empty()) {
    out += fmt::format("\nfailed ({}):\n", r.failed_checks.size());
    for (const std::string& f : r.failed_checks) out += "  ✗ " + f + "\n";
  }
  std::string verdict(VerdictName(r.verdict));
  for (char& ch : verdict)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  out += fmt::format("\nverdict: {} (exit {}) — {}\n", verdict, r.exit_code,
                     r.verdict_reason);
  return out;
}

}  // namespace redline::bench

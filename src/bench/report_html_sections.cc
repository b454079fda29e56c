// The server-metrics section, the glossary, SLO lines and the structured
// configuration rows of the HTML report (see report_html_sections.h).
#include "bench/report_html_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/html_escape.h"
#include "bench/glossary.h"
#include "bench/server_series.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

using html::ChartOptions;
using html::LineChart;
using html::Series;

// At most this many charts of series outside the curated set; the rest are
// a table row each.
constexpr size_t kOtherCharts = 6;

std::function<std::string(double)> UnitFormat(ServerUnit unit) {
  switch (unit) {
    case ServerUnit::kCount:
    case ServerUnit::kTokensPerSecond:
      return [](double v) { return FormatCompact(v); };
    case ServerUnit::kFraction:
      return [](double v) { return FormatPercent(v); };
    case ServerUnit::kLatencyUs:
      return [](double v) { return FormatUs(v); };
    case ServerUnit::kCpuPercent:
      return [](double v) { return FormatCompact(v) + "%"; };
    case ServerUnit::kBytes:
      return [](double v) { return FormatBytes(v); };
  }
  return [](double v) { return FormatCompact(v); };
}

std::string_view UnitLabel(ServerUnit unit) {
  switch (unit) {
    case ServerUnit::kCount:
      return "requests";
    case ServerUnit::kFraction:
      return "used";
    case ServerUnit::kTokensPerSecond:
      return "tok/s";
    case ServerUnit::kLatencyUs:
      return "latency";
    case ServerUnit::kCpuPercent:
      return "CPU";
    case ServerUnit::kBytes:
      return "memory";
  }
  return "";
}

// Glossary terms a panel's lines print.
std::vector<std::string_view> PanelTerms(const ServerPanel& p) {
  if (p.id == "requests") return {"running", "waiting"};
  if (p.id == "kv_cache") return {"kv_cache"};
  if (p.id == "tokens") return {"prompt tok/s", "generation tok/s"};
  if (p.id == "ttft" || p.id == "e2e") return {"server ttft/e2e"};
  if (p.id == "cpu") return {"cpu"};
  if (p.id == "rss") return {"rss"};
  return {};
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// Server-side whole-run percentiles next to what bench measured.
std::string ServerVsClientTable(const BenchReport& r,
                                const ServerMetricsView& v) {
  if (std::isnan(v.ttft_p50_us) && std::isnan(v.e2e_p50_us)) return "";
  std::string h =
      "<table id=\"server-vs-client\"><tr><th>over the run</th><th>server "
      "p50</th><th>server p99</th><th>bench p50</th><th>bench "
      "p99</th><th>server histogram</th></tr>";
  auto row = [&](std::string_view name, double p50, double p99, Metric m,
                 const std::string& source) {
    if (std::isnan(p50)) return;
    const bool has = r.measure && !r.measure->Hist(m).empty();
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>"
        "{}</code></td></tr>",
        name, FormatUs(p50), FormatUs(p99),
        has ? FormatUs(r.measure->Percentile(m, 50, false)) : "-",
        has ? FormatUs(r.measure->Percentile(m, 99, false)) : "-",
        HtmlEscape(source));
  };
  row("ttft", v.ttft_p50_us, v.ttft_p99_us, Metric::kTtft, v.ttft_source);
  row("e2e", v.e2e_p50_us, v.e2e_p99_us, Metric::kE2e, v.e2e_source);
  h += "</table><p class=\"muted\">Server side: from arrival, interpolated in "
       "the histogram buckets (resolution = bucket width), from the first to "
       "the last scrape. Bench: from the request's send, success only, "
       "measurement phase.</p>";
  return h;
}

}  // namespace

void GlossaryTerms::Use(std::string_view term) {
  if (std::find(terms_.begin(), terms_.end(), term) == terms_.end())
    terms_.emplace_back(term);
}

std::vector<html::RefLine> SloLines(
    const BenchReport& r, std::initializer_list<std::string_view> metrics) {
  std::vector<html::RefLine> out;
  for (const ThresholdResult& t : r.thresholds) {
    const Threshold& th = t.threshold;
    if (std::find(metrics.begin(), metrics.end(), th.metric_key) ==
        metrics.end())
      continue;
    if (th.phase != Phase::kMeasure || !MetricFromKey(th.metric_key) ||
        !(th.op == CompareOp::kLt || th.op == CompareOp::kLe) ||
        !(th.value > 0))
      continue;
    out.push_back({th.value, th.source, !t.pass});
  }
  return out;
}

std::string ServerMetricsSection(const BenchReport& r, GlossaryTerms* terms) {
  if (r.scrape_url.empty()) return "";
  const ServerMetricsView view =
      CurateServerMetrics(r.scrape, r.scrape_histograms);
  std::string h = fmt::format(
      "<h2 id=\"server-metrics\">Server metrics (<code>{}</code>)</h2>",
      HtmlEscape(r.scrape_url));
  if (r.scrape.empty() && r.scrape_histograms.empty()) {
    h += "<p>No matching series were scraped.</p>";
    return h;
  }
  const size_t omitted = view.constant.size();
  h += fmt::format(
      "<p id=\"server-summary\">{} curated chart{} · {} other series that "
      "changed · <span id=\"server-omitted-count\" data-count=\"{}\">{} "
      "constant series omitted</span></p>",
      view.panels.size(), view.panels.size() == 1 ? "" : "s",
      view.others.size(), omitted, omitted);
  h += ServerVsClientTable(r, view);
  h += "<div class=\"charts\" id=\"server-curated\">";
  for (const ServerPanel& p : view.panels) {
    for (std::string_view t : PanelTerms(p)) terms->Use(t);
    ChartOptions o;
    o.title = p.title;
    o.id = "server-" + p.id;
    o.x_label = "time since load start";
    o.x_format = [](double s) { return FormatSeconds(s); };
    o.y_format = UnitFormat(p.unit);
    o.y_label = std::string(UnitLabel(p.unit));
    o.note = Join(p.constant, "; ");
    o.binary_y = p.unit == ServerUnit::kBytes;
    if (!p.slo_metric.empty()) o.y_lines = SloLines(r, {p.slo_metric});
    o.marks = EventMarks(r);
    std::vector<Series> lines;
    for (const ServerLine& l : p.lines)
      lines.push_back({l.name, l.t_s, l.y, "", false});
    h += LineChart(lines, o);
  }
  h += "</div>";
  if (!view.others.empty()) {
    h += "<h3>Other series that changed</h3><div class=\"charts\" "
         "id=\"server-others\">";
    for (size_t i = 0; i < view.others.size() && i < kOtherCharts; ++i) {
      const ScrapeSeries& s = *view.others[i].series;
      ChartOptions o;
      o.title = s.name + (s.labels.empty() ? "" : "{" + s.labels + "}") +
                (s.counter ? " (rate per second)" : "");
      o.x_label = "time since load start";
      o.x_format = [](double t) { return FormatSeconds(t); };
      o.marks = EventMarks(r);
      Series ser{s.counter ? "per second" : "value", {}, {}, "", false};
      if (s.counter) {
        for (size_t j = 1; j < s.t_s.size() && j < s.value.size(); ++j) {
          const double dt = s.t_s[j] - s.t_s[j - 1];
          if (dt <= 0) continue;
          const double dv = s.value[j] - s.value[j - 1];
          ser.x.push_back(s.t_s[j]);
          ser.y.push_back(dv >= 0 ? dv / dt : std::nan(""));
        }
      } else {
        ser.x = s.t_s;
        ser.y = s.value;
      }
      h += LineChart({ser}, o);
    }
    h += "</div>";
    if (view.others.size() > kOtherCharts) {
      h += "<table id=\"server-others-table\"><tr><th>series</th><th>min</"
           "th><th>max</th><th>last</th></tr>";
      for (size_t i = kOtherCharts; i < view.others.size(); ++i) {
        const OtherSeries& o = view.others[i];
        h += fmt::format(
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></"
            "tr>",
            HtmlEscape(o.series->name + "{" + o.series->labels + "}"),
            FormatCompact(o.min), FormatCompact(o.max), FormatCompact(o.last));
      }
      h += "</table>";
    }
  }
  if (omitted > 0 || !view.constant_curated.empty()) {
    h += fmt::format(
        "<details id=\"server-omitted\"><summary>{} constant series omitted "
        "(they did not change during the run)</summary><p>",
        omitted);
    if (!view.constant_curated.empty())
      h += HtmlEscape(Join(view.constant_curated, "; ")) + ".<br>";
    std::vector<std::string> escaped;
    for (const std::string& c : view.constant)
      escaped.push_back("<code>" + HtmlEscape(c) + "</code>");
    h += Join(escaped, " ") + "</p></details>";
  }
  if (!view.missing.empty()) {
    h += "<p class=\"muted\" id=\"server-missing\">Not exported by the "
         "target: " +
         HtmlEscape(Join(view.missing, ", ")) + ".</p>";
  }
  return h;
}

std::string GlossarySection(const GlossaryTerms& terms) {
  std::string h = "<h2 id=\"glossary\">Glossary</h2><dl class=\"glossary\">";
  for (const auto& [term, definition] : GlossaryEntries()) {
    const auto& used = terms.terms();
    if (std::find(used.begin(), used.end(), term) == used.end()) continue;
    h += fmt::format("<dt>{}</dt><dd>{}</dd>", HtmlEscape(std::string(term)),
                     HtmlEscape(std::string(definition)));
  }
  h += "</dl><p class=\"muted\">Definitions: docs/METRICS.md and "
       "docs/GLOSSARY.md.</p>";
  return h;
}

std::string ConfigEchoRows(const ConfigEcho& e) {
  std::string h;
  auto row = [&](std::string_view k, const std::string& v) {
    if (v.empty()) return;
    h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", k, HtmlEscape(v));
  };
  std::string input = e.input_source;
  if (!e.input_tokens_spec.empty()) input += " tokens " + e.input_tokens_spec;
  if (e.input_source == "prompt")
    input += fmt::format(" ({} characters)", e.prompt_chars);
  if (!e.dataset.empty()) input += " " + e.dataset;
  row("input", input);
  std::string output =
      e.max_tokens > 0 ? fmt::format("max_tokens {}", e.max_tokens) : "";
  if (!e.output_tokens_spec.empty())
    output += (output.empty() ? "" : ", ") + std::string("distribution ") +
              e.output_tokens_spec +
              (e.pin_output_length ? " (pinned: ignore_eos)" : "");
  row("output", output);
  row("command", Join(e.argv, " "));
  row("tool", "redline " + e.tool_version);
  return h;
}

}  // namespace redline::bench

// The observability sections of the reports (docs/OBSERVABILITY.md#bench):
// the bottleneck finder's verdict, the E2E decomposition by percentile and
// over time, and the trace ids of the requests worth opening. Kept apart
// from the main renderers, which call in here once per section.
#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>

#include "base/html_escape.h"
#include "bench/report.h"
#include "bench/report_html_sections.h"
#include "bench/units.h"

namespace redline::bench {

namespace json = boost::json;

namespace {

// Stacked-bar colours, one per Part (client, network, gateway, queue,
// prefill, decode).
constexpr const char* kPartColors[kNumParts] = {
    "#8c564b", "#7f7f7f", "#9467bd", "#d62728", "#ff7f0e", "#1f77b4"};

std::string Ms(double ms) { return FormatUs(ms * 1000); }

json::value Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

bool ShowPart(const Decomposition& d, Part p) {
  return p != Part::kGateway || d.has_gateway;
}

json::object PartsJson(const PartArray& a) {
  json::object o;
  for (Part p : kAllParts) o[PartKey(p)] = Num(a[static_cast<int>(p)]);
  return o;
}

json::object FindingJson(const Finding& f) {
  json::array evidence;
  for (const std::string& e : f.evidence) evidence.push_back(json::value(e));
  return json::object{{"cause", CauseKey(f.cause)},
                      {"title", f.title},
                      {"score", f.score},
                      {"evidence", std::move(evidence)},
                      {"action", f.action}};
}

json::object TracedJson(const TracedRequest& t) {
  json::object o{{"label", t.label},
                 {"request_id", t.request_id},
                 {"trace_id", t.trace_id.empty() ? json::value(nullptr)
                                                 : json::value(t.trace_id)},
                 {"e2e_ms", t.e2e_ms},
                 {"ttft_ms", t.ttft_ms >= 0 ? json::value(t.ttft_ms)
                                            : json::value(nullptr)},
                 {"t_s", t.t_s}};
  o["parts_ms"] =
      t.parts ? json::value(PartsJson(t.parts->part_ms)) : json::value(nullptr);
  return o;
}

std::string KneeLine(const Knee& k) {
  if (k.breaks_rps <= 0)
    return fmt::format("{} held at every rate tried (up to {:.2f} req/s)",
                       k.threshold, k.holds_rps);
  if (k.holds_rps <= 0)
    return fmt::format(
        "{} broke at {:.2f} req/s, the lowest rate that was "
        "judged",
        k.threshold, k.breaks_rps);
  return fmt::format("{} holds to {:.2f} req/s and breaks at {:.2f} req/s",
                     k.threshold, k.holds_rps, k.breaks_rps);
}

// A stacked bar per bucket: the mean of each part of the requests that
// finished in it.
// `marks` are the --event commands, drawn as on the line charts.
std::string StackedChart(const Decomposition& d,
                         const std::vector<html::TimeMark>& marks) {
  const DecompositionSeries& s = d.series;
  const double W = 640, H = 260, L = 70, R = 16, T = 28, B = 40;
  double y1 = 0;
  for (size_t b = 0; b < s.t_s.size(); ++b) {
    if (s.requests[b] == 0) continue;
    double sum = 0;
    for (Part p : kAllParts)
      sum += std::max(0.0, s.part_ms[static_cast<int>(p)][b]);
    y1 = std::max(y1, sum);
  }
  std::string h = fmt::format(
      "<figure class=\"chart\" id=\"decomposition-chart\"><figcaption>Where "
      "the time goes, over time (mean per request, by finish time)"
      "</figcaption><svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\">",
      W, H, W, H);
  if (y1 <= 0 || s.t_s.empty()) {
    h += fmt::format(
        "<text class=\"empty\" x=\"{}\" y=\"{}\">no data</text></svg></figure>",
        W / 2 - 30, H / 2);
    return h;
  }
  const double pw = W - L - R, ph = H - T - B;
  const double bw = pw / static_cast<double>(s.t_s.size());
  for (int i = 0; i <= 4; ++i) {
    const double v = y1 * i / 4, y = T + ph - ph * i / 4;
    h += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" "
        "y2=\"{:.1f}\"/><text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>",
        L, L + pw, y, y, L - 4, y + 4, Ms(v));
  }
  for (size_t b = 0; b < s.t_s.size(); ++b) {
    if (s.requests[b] == 0) continue;
    double acc = 0;
    for (Part p : kAllParts) {
      const double v = std::max(0.0, s.part_ms[static_cast<int>(p)][b]);
      if (v <= 0) continue;
      const double y = T + ph - ph * (acc + v) / y1;
      h += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "fill=\"{}\"><title>{:.1f} s: {} {}</title></rect>",
          L + bw * static_cast<double>(b) + bw * 0.1, y, bw * 0.8, ph * v / y1,
          kPartColors[static_cast<int>(p)], s.t_s[b], PartKey(p), Ms(v));
      acc += v;
    }
  }
  for (size_t k = 0; k < marks.size() && s.bucket_s > 0; ++k) {
    const html::TimeMark& m = marks[k];
    const double x = L + bw * (m.x - s.t_s.front()) / s.bucket_s;
    if (!std::isfinite(x) || x < L || x > L + pw) continue;
    const bool right_half = x > L + pw / 2;
    h += fmt::format(
        "<line class=\"event{}\" data-event=\"{}\" x1=\"{:.1f}\" "
        "y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/><text class=\"event-label\" "
        "x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\">{}</text>",
        m.failed ? " failed" : "", HtmlEscape(m.label), x, T, x, T + ph,
        right_half ? x - 3 : x + 3, T + 10 + static_cast<double>(k % 4) * 11,
        right_half ? "end" : "start", HtmlEscape(m.label));
  }
  const double step =
      std::max(1.0, std::ceil(static_cast<double>(s.t_s.size()) / 8));
  for (size_t b = 0; b < s.t_s.size(); b += static_cast<size_t>(step)) {
    h += fmt::format(
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"middle\">{:.3g}</text>",
        L + bw * (static_cast<double>(b) + 0.5), T + ph + 14, s.t_s[b]);
  }
  h += fmt::format(
      "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" "
      "text-anchor=\"middle\">seconds</text>",
      L + pw / 2, H - 6);
  double lx = L;
  for (Part p : kAllParts) {
    if (!ShowPart(d, p)) continue;
    h += fmt::format(
        "<rect x=\"{:.1f}\" y=\"8\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text class=\"legend\" x=\"{:.1f}\" y=\"17\">{}</text>",
        lx, kPartColors[static_cast<int>(p)], lx + 13, PartKey(p));
    lx += 78;
  }
  h += "</svg></figure>";
  return h;
}

std::string CoverageLine(const Decomposition& d) {
  return fmt::format("{} of {} successful requests carried the server's timing",
                     d.decomposed, d.ok_requests);
}

}  // namespace

void AttachBottleneck(BenchReport& report, const RunResult& run,
                      std::span<const ScrapeSeries> scrape, int max_connections,
                      std::string scope) {
  const Decomposition d = BuildDecomposition(run.records, run.start_ns, 1);
  BottleneckReport b =
      FindBottleneck(GatherBottleneckInput(run, d, scrape, max_connections));
  b.scope = std::move(scope);
  if (report.capacity) b.knees = FindKnees(*report.capacity);
  report.bottleneck = std::move(b);
}

std::string RenderBottleneckText(const BenchReport& r) {
  if (!r.bottleneck) return "";
  const BottleneckReport& b = *r.bottleneck;
  std::string out =
      fmt::format("bottleneck ({}): {}\n", b.scope, b.primary.title);
  for (const std::string& e : b.primary.evidence) out += "  · " + e + "\n";
  if (!b.primary.action.empty()) out += "  → " + b.primary.action + "\n";
  for (const Finding& f : b.others)
    out += fmt::format("  also: {} (score {:.2f})\n", f.title, f.score);
  for (const Knee& k : b.knees) out += "  knee: " + KneeLine(k) + "\n";
  for (const std::string& m : b.missing) out += "  not used: " + m + "\n";
  return out + "\n";
}

std::string RenderDecompositionText(const BenchReport& r) {
  const Decomposition& d = r.decomposition;
  std::string out;
  if (d.decomposed > 0) {
    out += fmt::format(
        "\nwhere the time goes (dispatch delay + E2E by part, at percentiles "
        "of that total; {}):\n",
        CoverageLine(d));
    out += fmt::format("  {:<6} {:>10} {:>10}", "", "e2e", "total");
    for (Part p : kAllParts)
      if (ShowPart(d, p)) out += fmt::format(" {:>10}", PartKey(p));
    out += "  largest\n";
    for (const DecompositionAt& at : d.at) {
      out += fmt::format("  {:<6} {:>10} {:>10}",
                         fmt::format("p{:g}", at.percentile), Ms(at.e2e_ms),
                         Ms(at.total_ms));
      for (Part p : kAllParts)
        if (ShowPart(d, p))
          out += fmt::format(" {:>10}", Ms(at.part_ms[static_cast<int>(p)]));
      out += fmt::format("  {} {:.0f} %\n", PartKey(at.dominant),
                         100 * at.Share(at.dominant));
    }
    out +=
        fmt::format("  {:<6} {:>10} {:>10}", "mean", "", Ms(d.mean_total_ms));
    for (Part p : kAllParts)
      if (ShowPart(d, p))
        out += fmt::format(" {:>10}", Ms(d.mean_ms[static_cast<int>(p)]));
    out += "\n";
  } else if (d.ok_requests > 0) {
    out +=
        "\nwhere the time goes: the server sent no timing (Server-Timing "
        "or `timings`), so E2E is not decomposed\n";
  }
  const TraceIds& t = r.trace_ids;
  if (t.sent && !t.percentile.empty()) {
    out += "\ntraces to open (trace id, E2E):\n";
    auto line = [&](const TracedRequest& q) {
      out += fmt::format("  {:<10} {}  {:>10}  request {} at {:.2f} s\n",
                         q.label, q.trace_id.empty() ? "-" : q.trace_id,
                         Ms(q.e2e_ms), q.request_id, q.t_s);
    };
    for (const TracedRequest& q : t.percentile) line(q);
    for (size_t i = 0; i < std::min<size_t>(5, t.slowest.size()); ++i)
      line(t.slowest[i]);
  }
  return out;
}

std::string RenderBottleneckHtml(const BenchReport& r) {
  if (!r.bottleneck) return "";
  const BottleneckReport& b = *r.bottleneck;
  std::string h = fmt::format(
      "<h2>Bottleneck</h2><div id=\"bottleneck\" "
      "data-cause=\"{}\"><p><b>{}</b> "
      "<span class=\"muted\">({})</span></p><ul>",
      CauseKey(b.primary.cause), HtmlEscape(b.primary.title),
      HtmlEscape(b.scope));
  for (const std::string& e : b.primary.evidence)
    h += "<li>" + HtmlEscape(e) + "</li>";
  h += "</ul>";
  if (!b.primary.action.empty())
    h += "<p>Suggested: " + HtmlEscape(b.primary.action) + "</p>";
  if (!b.others.empty()) {
    h += "<p class=\"muted\">Also seen: ";
    for (size_t i = 0; i < b.others.size(); ++i)
      h += fmt::format("{}{} ({:.2f})", i ? "; " : "",
                       HtmlEscape(b.others[i].title), b.others[i].score);
    h += "</p>";
  }
  if (!b.knees.empty()) {
    h += "<table id=\"knees\"><tr><th>SLO</th><th>holds to</th><th>breaks "
         "at</th></tr>";
    for (const Knee& k : b.knees)
      h += fmt::format(
          "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
          HtmlEscape(k.threshold),
          k.holds_rps > 0 ? fmt::format("{:.2f} req/s", k.holds_rps) : "–",
          k.breaks_rps > 0 ? fmt::format("{:.2f} req/s", k.breaks_rps) : "–");
    h += "</table>";
  }
  for (const std::string& m : b.missing)
    h += "<p class=\"muted\">Not used: " + HtmlEscape(m) + "</p>";
  return h + "</div>\n";
}

std::string RenderDecompositionHtml(const BenchReport& r) {
  const Decomposition& d = r.decomposition;
  const TraceIds& t = r.trace_ids;
  if (d.ok_requests == 0) return "";
  std::string h = "<h2>Where the time goes</h2>";
  if (d.decomposed == 0) {
    h += "<p id=\"decomposition\">The server sent no timing (Server-Timing or "
         "<code>timings</code>), so E2E is not decomposed.</p>";
  } else {
    h += "<p class=\"muted\">" + HtmlEscape(CoverageLine(d)) +
         ". Each row is the mean of the requests nearest that percentile of "
         "the total (dispatch delay + E2E, i.e. e2e_sched); the parts add up "
         "to it.</p>";
    h += "<table id=\"decomposition\"><tr><th>percentile</th><th>e2e</th><th>"
         "total</th>";
    for (Part p : kAllParts)
      if (ShowPart(d, p)) h += fmt::format("<th>{}</th>", PartKey(p));
    h += "<th>largest</th></tr>";
    for (const DecompositionAt& at : d.at) {
      h += fmt::format("<tr><td>p{:g}</td><td>{}</td><td>{}</td>",
                       at.percentile, Ms(at.e2e_ms), Ms(at.total_ms));
      for (Part p : kAllParts)
        if (ShowPart(d, p))
          h += fmt::format("<td>{} <span class=\"muted\">{:.0f} %</span></td>",
                           Ms(at.part_ms[static_cast<int>(p)]),
                           100 * at.Share(p));
      h += fmt::format("<td>{}</td></tr>", PartKey(at.dominant));
    }
    h += "</table><div class=\"charts\">" + StackedChart(d, EventMarks(r)) +
         "</div>";
  }
  if (t.sent && !t.percentile.empty()) {
    h += "<h3>Traces to open</h3><table id=\"traces\"><tr><th>request</th>"
         "<th>trace id</th><th>E2E</th><th>TTFT</th><th>sent at</th>"
         "<th>largest part</th></tr>";
    auto row = [&](const TracedRequest& q) {
      std::string largest = "–";
      if (q.parts) {
        const auto i =
            std::max_element(q.parts->part_ms.begin(), q.parts->part_ms.end()) -
            q.parts->part_ms.begin();
        largest =
            fmt::format("{} {}", PartKey(kAllParts[static_cast<size_t>(i)]),
                        Ms(q.parts->part_ms[static_cast<size_t>(i)]));
      }
      h += fmt::format(
          "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>"
          "<td>{:.2f} s</td><td>{}</td></tr>",
          HtmlEscape(q.label), HtmlEscape(q.trace_id), Ms(q.e2e_ms),
          q.ttft_ms >= 0 ? Ms(q.ttft_ms) : "–", q.t_s, largest);
    };
    for (const TracedRequest& q : t.percentile) row(q);
    for (const TracedRequest& q : t.slowest) row(q);
    h += "</table>";
  }
  return h + "\n";
}

void AddObservabilityJson(const BenchReport& r, json::object& o) {
  if (r.bottleneck) {
    const BottleneckReport& b = *r.bottleneck;
    json::object bo = FindingJson(b.primary);
    json::array others, missing, knees;
    for (const Finding& f : b.others) others.push_back(FindingJson(f));
    for (const std::string& m : b.missing) missing.push_back(json::value(m));
    for (const Knee& k : b.knees)
      knees.push_back(json::object{
          {"threshold", k.threshold},
          {"holds_rps",
           k.holds_rps > 0 ? json::value(k.holds_rps) : json::value(nullptr)},
          {"breaks_rps", k.breaks_rps > 0 ? json::value(k.breaks_rps)
                                          : json::value(nullptr)}});
    bo["scope"] = b.scope;
    bo["others"] = std::move(others);
    bo["missing"] = std::move(missing);
    bo["knees"] = std::move(knees);
    o["bottleneck"] = std::move(bo);
  } else {
    o["bottleneck"] = nullptr;
  }
  const Decomposition& d = r.decomposition;
  json::object dj{{"ok_requests", d.ok_requests},
                  {"decomposed", d.decomposed},
                  {"has_gateway", d.has_gateway}};
  if (d.decomposed > 0) {
    dj["mean_ms"] = PartsJson(d.mean_ms);
    dj["mean_total_ms"] = d.mean_total_ms;
    dj["max_sum_error_ms"] = d.max_sum_error_ms;
    json::array at;
    for (const DecompositionAt& a : d.at) {
      PartArray shares{};
      for (Part p : kAllParts) shares[static_cast<int>(p)] = a.Share(p);
      at.push_back(json::object{{"percentile", a.percentile},
                                {"rank_total_ms", a.rank_total_ms},
                                {"e2e_ms", a.e2e_ms},
                                {"requests", a.requests},
                                {"total_ms", a.total_ms},
                                {"parts_ms", PartsJson(a.part_ms)},
                                {"shares", PartsJson(shares)},
                                {"dominant", PartKey(a.dominant)}});
    }
    dj["at"] = std::move(at);
    json::object parts;
    for (Part p : kAllParts) {
      json::array v;
      for (double x : d.series.part_ms[static_cast<int>(p)])
        v.push_back(Num(x));
      parts[PartKey(p)] = std::move(v);
    }
    json::array t_s, n;
    for (double x : d.series.t_s) t_s.push_back(json::value(x));
    for (int64_t x : d.series.requests) n.push_back(json::value(x));
    dj["series"] = json::object{{"bucket_s", d.series.bucket_s},
                                {"t_s", std::move(t_s)},
                                {"requests", std::move(n)},
                                {"parts_ms", std::move(parts)}};
  }
  o["decomposition"] = std::move(dj);
  json::array pct, slow;
  for (const TracedRequest& t : r.trace_ids.percentile)
    pct.push_back(TracedJson(t));
  for (const TracedRequest& t : r.trace_ids.slowest)
    slow.push_back(TracedJson(t));
  o["traces"] = json::object{{"traceparent_sent", r.trace_ids.sent},
                             {"percentile", std::move(pct)},
                             {"slowest", std::move(slow)}};
}

void AddRequestObservabilityJson(const RequestRecord& r, json::object& o) {
  if (!r.trace_id.empty()) o["trace_id"] = r.trace_id;
  if (r.server_queue_ms >= 0 || r.server_prefill_ms >= 0 ||
      r.server_decode_ms >= 0 || r.gateway_ms >= 0) {
    auto v = [](double x) {
      return x >= 0 ? json::value(x) : json::value(nullptr);
    };
    o["server_timing_ms"] = json::object{{"queue", v(r.server_queue_ms)},
                                         {"prefill", v(r.server_prefill_ms)},
                                         {"decode", v(r.server_decode_ms)},
                                         {"e2e", v(r.server_e2e_ms)},
                                         {"gateway", v(r.gateway_ms)}};
  }
}

}  // namespace redline::bench

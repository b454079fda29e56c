// The `--event` commands in the HTML report: marks on the time-axis charts
// and the events table with each command's outcome and output tails.
#include <fmt/format.h>

#include "base/html_escape.h"
#include "bench/report_html_sections.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

constexpr size_t kMarkLabelChars = 40;

// A tail as a collapsed block; "" when the stream carried nothing.
std::string TailBlock(std::string_view name, const std::string& tail,
                      int64_t bytes) {
  if (bytes == 0) return "";
  return fmt::format(
      "<details><summary>{} ({} bytes{})</summary><pre "
      "class=\"tail\">{}</pre></details>",
      name, bytes,
      static_cast<size_t>(bytes) > tail.size() ? ", last ones shown" : "",
      HtmlEscape(tail));
}

}  // namespace

std::vector<html::TimeMark> EventMarks(const BenchReport& report) {
  std::vector<html::TimeMark> marks;
  for (const EventRecord& e : report.events) {
    html::TimeMark m;
    const double offset_s = static_cast<double>(e.spec.offset_ns) / 1e9;
    m.x = e.started ? e.start_s : offset_s;
    std::string command = e.spec.command;
    if (command.size() > kMarkLabelChars)
      command = command.substr(0, kMarkLabelChars - 3) + "...";
    m.label = "@" + FormatSeconds(offset_s) + " " + command;
    m.failed = e.Failed();
    marks.push_back(std::move(m));
  }
  return marks;
}

std::string EventsSection(const BenchReport& report) {
  if (report.events.empty()) return "";
  std::string h =
      "<h2 id=\"events-title\">Events</h2><p class=\"muted\">Commands given "
      "with <code>--event</code>, seconds from the load start (the time axis "
      "of the charts, where each is marked).</p><table "
      "id=\"events\"><tr><th>scheduled</th><th>started</th><th>ended</"
      "th><th>outcome</th><th>command and output</th></tr>";
  for (const EventRecord& e : report.events) {
    h += fmt::format(
        "<tr data-offset-s=\"{:.3f}\"><td>{:.2f} s</td><td>{}</td><td>{}</"
        "td><td class=\"{}\">{}</td><td style=\"text-align:left\"><code>{}</"
        "code>{}{}</td></tr>",
        static_cast<double>(e.spec.offset_ns) / 1e9,
        static_cast<double>(e.spec.offset_ns) / 1e9,
        e.started ? fmt::format("{:.2f} s", e.start_s) : "–",
        e.finished ? fmt::format("{:.2f} s", e.end_s) : "–",
        e.Failed() ? "bad" : "ok", HtmlEscape(e.Outcome()),
        HtmlEscape(e.spec.command),
        TailBlock("stdout", e.stdout_tail, e.stdout_bytes),
        TailBlock("stderr", e.stderr_tail, e.stderr_bytes));
  }
  return h + "</table>\n";
}

}  // namespace redline::bench

// Inline SVG charts of the HTML report (report_html.cc and the sections in
// report_html_*.cc): line charts with optional reference lines (SLO
// thresholds, drawn dashed with a label) and bar charts. Output is a
// <figure> element; values are HTML-escaped. Pure functions.
#ifndef REDLINE_BENCH_REPORT_HTML_CHART_H_
#define REDLINE_BENCH_REPORT_HTML_CHART_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redline::bench::html {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::string color;
  bool dashed = false;
};

// A moment on a time axis (an `--event` command): a solid vertical line
// with its label at the top.
struct TimeMark {
  double x = 0;
  std::string label;    // "@20s kill replica"
  bool failed = false;  // the command did not exit 0: drawn red
};

// A horizontal (y) or vertical (x) reference line, e.g. an SLO threshold.
struct RefLine {
  double value = 0;
  std::string label;    // "e2e: p(99)<3s"
  bool failed = false;  // drawn red when the threshold failed
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;  // unit, shown above the y axis
  // Tick labels; the defaults print compact numbers ("1.2k"), never an
  // exponent.
  std::function<std::string(double)> y_format;
  std::function<std::string(double)> x_format;
  bool log_x = false;
  std::optional<double> marker_x;  // vertical line (end of warm-up)
  std::string marker_label;
  double y_min_force = 0;  // y axis starts at 0 unless data is negative
  bool binary_y = false;   // y in bytes: ticks at 1-2-5 x KiB/MiB/GiB
  // Reference lines. One within 4x of the data is drawn (the axis grows to
  // show it); one further away is named in the caption instead, so it does
  // not flatten the data.
  std::vector<RefLine> y_lines, x_lines;
  // Events on a time x axis; the axis widens to show each one.
  std::vector<TimeMark> marks;
  // Free text under the caption ("waiting constant at 0").
  std::string note;
  std::string id;  // element id of the <figure>, "" for none
};

std::string LineChart(const std::vector<Series>& series, const ChartOptions& o);
std::string BarChart(const std::string& title,
                     const std::vector<std::pair<std::string, double>>& bars,
                     const std::function<std::string(double)>& fmt_value);

}  // namespace redline::bench::html

#endif  // REDLINE_BENCH_REPORT_HTML_CHART_H_

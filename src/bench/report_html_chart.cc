// The SVG drawing of the HTML report. Layout constants are in SVG user
// units; every chart is 640 x 260 so they tile in the report's flex rows.
#include "bench/report_html_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/html_escape.h"
#include "bench/units.h"

namespace redline::bench::html {

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// "Nice" tick step for a range (1, 2, 5 x 10^k).
double NiceStep(double range, int target) {
  if (range <= 0) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

std::string Compact(double v) { return FormatCompact(v); }

}  // namespace

std::string LineChart(const std::vector<Series>& series,
                      const ChartOptions& o) {
  const double W = 640, H = 260, L = 70, R = 16, T = 28, B = 40;
  const auto& y_format = o.y_format ? o.y_format : Compact;
  const auto& x_format = o.x_format ? o.x_format : Compact;
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
  // Reference lines near the data widen the axes; far ones are only named.
  std::vector<const RefLine*> y_drawn, x_drawn, far;
  if (std::isfinite(y1)) {
    for (const RefLine& r : o.y_lines) {
      if (std::isfinite(r.value) && r.value <= 4 * std::max(y1, 1e-12) &&
          r.value >= y0) {
        y_drawn.push_back(&r);
        y1 = std::max(y1, r.value);
      } else {
        far.push_back(&r);
      }
    }
  }
  if (std::isfinite(x1)) {
    for (const RefLine& r : o.x_lines) {
      const bool near = std::isfinite(r.value) && r.value > 0 &&
                        (o.log_x ? r.value <= 10 * x1 : r.value <= 4 * x1);
      if (near) {
        x_drawn.push_back(&r);
        x1 = std::max(x1, r.value);
        x0 = std::min(x0, r.value);
      } else {
        far.push_back(&r);
      }
    }
  }
  // Event marks widen a linear time axis to show every one.
  if (std::isfinite(x1) && !o.log_x) {
    for (const TimeMark& m : o.marks) {
      if (!std::isfinite(m.x)) continue;
      x0 = std::min(x0, m.x);
      x1 = std::max(x1, m.x);
    }
  }
  std::string caption = HtmlEscape(o.title);
  if (!far.empty()) caption += "<br>";
  for (const RefLine* r : far) {
    caption += fmt::format(
        "<span class=\"muted slo-off\" data-slo=\"{}\">{} is off the "
        "chart. </span>",
        HtmlEscape(r->label), HtmlEscape(r->label));
  }
  if (!o.note.empty())
    caption +=
        "<br><span class=\"muted note\">" + HtmlEscape(o.note) + "</span>";
  std::string svg = fmt::format(
      "<figure class=\"chart\"{}><figcaption>{}</figcaption><svg "
      "xmlns=\"http://www.w3.org/2000/svg\" "
      "viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" "
      "aria-label=\"{}\">",
      o.id.empty() ? "" : " id=\"" + HtmlEscape(o.id) + "\"", caption, W, H, W,
      H, HtmlEscape(o.title));
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
  // Binary units tick at multiples of a power of 1024 (1, 2, 5 MiB).
  double tick_unit = 1;
  if (o.binary_y) {
    while (tick_unit * 1024 <= (y1 - y0)) tick_unit *= 1024;
  }
  const double ystep = NiceStep((y1 - y0) / tick_unit, 5) * tick_unit;
  y1 = std::ceil(y1 / ystep) * ystep;
  auto py = [&](double y) {
    return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  };
  // Grid and y ticks (counted, not accumulated: no drift past the top).
  const int ny = static_cast<int>(std::llround((y1 - y0) / ystep));
  for (int k = 0; k <= ny; ++k) {
    const double y = y0 + k * ystep;
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" "
        "y2=\"{:.1f}\"/>",
        L, py(y), W - R, py(y));
    svg += fmt::format(
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>",
        L - 6, py(y) + 4, k == 0 && y == 0 ? "0" : HtmlEscape(y_format(y)));
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
          px(x), H - B + 16, HtmlEscape(x_format(x)));
    }
  } else {
    const double xstep = NiceStep(x1 - x0, 6);
    const double first = std::ceil(x0 / xstep) * xstep;
    const int nx = static_cast<int>(std::floor((x1 - first) / xstep + 1e-9));
    for (int k = 0; k <= nx; ++k) {
      const double x = first + k * xstep;
      svg += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
          "text-anchor=\"middle\">{}</text>",
          px(x), H - B + 16, HtmlEscape(x_format(x)));
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
  if (!o.y_label.empty()) {
    svg += fmt::format("<text class=\"label\" x=\"4\" y=\"{}\">{}</text>",
                       T - 6, HtmlEscape(o.y_label));
  }
  if (o.marker_x && *o.marker_x > x0 && *o.marker_x < x1) {
    const double mx = px(*o.marker_x);
    svg += fmt::format(
        "<rect class=\"warmup\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" "
        "height=\"{}\"/>",
        L, T, mx - L, H - T - B);
    svg += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{}\">{}</text>",
                       L + 4, T + 12, HtmlEscape(o.marker_label));
  }
  // SLO lines under the data, labelled at their right end.
  // Labels of neighbouring lines are staggered so they do not overlap.
  for (size_t k = 0; k < y_drawn.size(); ++k) {
    const RefLine* r = y_drawn[k];
    svg += fmt::format(
        "<line class=\"slo{}\" data-slo=\"{}\" x1=\"{}\" y1=\"{:.1f}\" "
        "x2=\"{}\" y2=\"{:.1f}\"/><text class=\"slo-label\" x=\"{}\" "
        "y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
        r->failed ? " failed" : "", HtmlEscape(r->label), L, py(r->value),
        W - R, py(r->value), W - R - 2 - static_cast<double>(k) * 130,
        py(r->value) - 3, HtmlEscape(r->label));
  }
  for (size_t k = 0; k < x_drawn.size(); ++k) {
    const RefLine* r = x_drawn[k];
    svg += fmt::format(
        "<line class=\"slo{}\" data-slo=\"{}\" x1=\"{:.1f}\" y1=\"{}\" "
        "x2=\"{:.1f}\" y2=\"{}\"/><text class=\"slo-label\" x=\"{:.1f}\" "
        "y=\"{}\" text-anchor=\"end\">{}</text>",
        r->failed ? " failed" : "", HtmlEscape(r->label), px(r->value), T,
        px(r->value), H - B, px(r->value) - 3,
        T + 24 + static_cast<double>(k) * 12, HtmlEscape(r->label));
  }
  // Event marks: a solid vertical line, its label at the top (staggered).
  for (size_t k = 0; k < o.marks.size(); ++k) {
    const TimeMark& m = o.marks[k];
    if (o.log_x || !std::isfinite(m.x) || m.x < x0 || m.x > x1) continue;
    const double mx = px(m.x);
    const bool right_half = mx > (L + W - R) / 2;
    svg += fmt::format(
        "<line class=\"event{}\" data-event=\"{}\" x1=\"{:.1f}\" y1=\"{}\" "
        "x2=\"{:.1f}\" y2=\"{}\"/><text class=\"event-label\" x=\"{:.1f}\" "
        "y=\"{}\" text-anchor=\"{}\">{}</text>",
        m.failed ? " failed" : "", HtmlEscape(m.label), mx, T, mx, H - B,
        right_half ? mx - 3 : mx + 3, T + 10 + static_cast<double>(k % 4) * 11,
        right_half ? "end" : "start", HtmlEscape(m.label));
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
      svg += fmt::format(
          "<path class=\"line\" data-series=\"{}\" d=\"{}\" stroke=\"{}\"{}/>",
          HtmlEscape(s.name), d, color,
          s.dashed ? " stroke-dasharray=\"5,3\"" : "");
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

}  // namespace redline::bench::html

// Sections of the HTML report that live outside report_html.cc: the
// server-metrics section (the curated view of server_series.h), the
// glossary, SLO reference lines for the latency charts, and the rows of the
// structured configuration. Internal to the report renderers.
#ifndef REDLINE_BENCH_REPORT_HTML_SECTIONS_H_
#define REDLINE_BENCH_REPORT_HTML_SECTIONS_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "bench/report.h"
#include "bench/report_html_chart.h"

namespace redline::bench {

// The names a report printed, in first-use order, for its glossary.
class GlossaryTerms {
 public:
  void Use(std::string_view term);
  const std::vector<std::string>& terms() const { return terms_; }

 private:
  std::vector<std::string> terms_;
};

// The latency thresholds on `metrics` (metric keys, measurement phase, an
// upper bound) as reference lines in microseconds, labelled as written.
std::vector<html::RefLine> SloLines(
    const BenchReport& report, std::initializer_list<std::string_view> metrics);

// The `--event` commands as marks on a time axis ("@20s kill ..."), at the
// moment each was started (its scheduled offset when it never started).
std::vector<html::TimeMark> EventMarks(const BenchReport& report);

// <h2>Events</h2>: a row per `--event` command with its outcome and output
// tails; "" without events.
std::string EventsSection(const BenchReport& report);

// <h2>Server metrics</h2> and its charts; "" without --scrape.
std::string ServerMetricsSection(const BenchReport& report,
                                 GlossaryTerms* terms);

// <h2>Glossary</h2>: a definition of every used term that has one.
std::string GlossarySection(const GlossaryTerms& terms);

// Table rows (<tr>) of the structured settings the display pairs do not
// show: command line, tool version, input and output lengths.
std::string ConfigEchoRows(const ConfigEcho& echo);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_REPORT_HTML_SECTIONS_H_

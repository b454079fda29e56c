// Parsing and printing of durations, rates and percentages for bench flags,
// thresholds and scenario files. Durations always need a unit.
#ifndef REDLINE_BENCH_UNITS_H_
#define REDLINE_BENCH_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace redline::bench {

// "250us", "20ms", "1.5s", "2m", "1h" -> nanoseconds. A bare number is an
// error unless `default_unit_ns` is non-zero (then it is in that unit).
Result<int64_t> ParseDurationNs(std::string_view text,
                                int64_t default_unit_ns = 0);

// "5rps", "5/s", "300/m", "5" -> requests per second.
Result<double> ParseRate(std::string_view text);

// "0.1%" -> 0.001, "0.001" -> 0.001.
Result<double> ParsePercentOrFraction(std::string_view text);

// Human-readable duration from microseconds: "812us", "12.3ms", "1.24s";
// "∞ (failed)" for +inf, "-" for NaN.
std::string FormatUs(double us);

// Axis and table labels in human units; never scientific notation.
// Compact count: "950", "1.2k", "20M", "3.4G" (3 significant digits at
// most, trailing zeros dropped; negative values keep their sign).
std::string FormatCompact(double v);
// Bytes in binary units: "512B", "12KiB", "1.5MiB", "2.25GiB".
std::string FormatBytes(double bytes);
// Seconds for time axes: "0s", "750ms", "12s", "2.5m", "1.2h".
std::string FormatSeconds(double s);
// Tokens per second: "850 tok/s", "1.2k tok/s".
std::string FormatTokensPerSecond(double tps);
// A fraction as a percentage: 0.253 -> "25.3%", 0.0123 -> "1.23%".
std::string FormatPercent(double fraction);

// Trims ASCII whitespace.
std::string_view Trim(std::string_view s);

// Parses a finite floating point number (whole string).
Result<double> ParseNumber(std::string_view text);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_UNITS_H_

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

// Trims ASCII whitespace.
std::string_view Trim(std::string_view s);

// Parses a finite floating point number (whole string).
Result<double> ParseNumber(std::string_view text);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_UNITS_H_

#include "bench/units.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace redline::bench {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' ||
                        s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' ||
                        s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

Result<double> ParseNumber(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return Status::InvalidArgument("empty number");
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(v)) {
    return Status::InvalidArgument("not a number: '" + std::string(text) + "'");
  }
  return v;
}

namespace {

// Splits "12.5ms" into 12.5 and "ms".
bool SplitNumber(std::string_view text, double* value, std::string_view* unit) {
  text = Trim(text);
  size_t i = 0;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
          text[i] == '-' || text[i] == '+' || text[i] == 'e' ||
          text[i] == 'E')) {
    // An 'e' directly followed by a letter is not an exponent.
    if ((text[i] == 'e' || text[i] == 'E') &&
        (i + 1 >= text.size() ||
         !std::isdigit(static_cast<unsigned char>(text[i + 1]))))
      break;
    ++i;
  }
  if (i == 0) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, *value);
  if (ec != std::errc() || ptr != text.data() + i) return false;
  *unit = Trim(text.substr(i));
  return true;
}

}  // namespace

Result<int64_t> ParseDurationNs(std::string_view text,
                                int64_t default_unit_ns) {
  double v = 0;
  std::string_view unit;
  if (!SplitNumber(text, &v, &unit) || v < 0) {
    return Status::InvalidArgument("bad duration '" + std::string(text) +
                                   "' (e.g. 500ms, 2s, 1m)");
  }
  double scale = 0;
  if (unit == "ns") {
    scale = 1;
  } else if (unit == "us" || unit == "µs") {
    scale = 1e3;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "s") {
    scale = 1e9;
  } else if (unit == "m" || unit == "min") {
    scale = 60e9;
  } else if (unit == "h") {
    scale = 3600e9;
  } else if (unit.empty() && default_unit_ns > 0) {
    scale = static_cast<double>(default_unit_ns);
  } else {
    return Status::InvalidArgument("duration '" + std::string(text) +
                                   "' needs a unit: us, ms, s, m or h");
  }
  return static_cast<int64_t>(std::llround(v * scale));
}

Result<double> ParseRate(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!SplitNumber(text, &v, &unit) || v < 0)
    return Status::InvalidArgument("bad rate '" + std::string(text) + "'");
  if (unit.empty() || unit == "rps" || unit == "/s" || unit == "qps") return v;
  if (unit == "/m" || unit == "rpm") return v / 60.0;
  return Status::InvalidArgument("bad rate unit in '" + std::string(text) +
                                 "' (use rps, /s or /m)");
}

Result<double> ParsePercentOrFraction(std::string_view text) {
  text = Trim(text);
  if (!text.empty() && text.back() == '%') {
    auto v = ParseNumber(text.substr(0, text.size() - 1));
    if (!v.ok()) return v.status();
    return *v / 100.0;
  }
  return ParseNumber(text);
}

std::string FormatUs(double us) {
  if (std::isnan(us)) return "-";
  if (std::isinf(us)) return "∞ (failed)";
  if (us < 1000) return fmt::format("{:.0f}us", us);
  if (us < 10'000) return fmt::format("{:.2f}ms", us / 1e3);
  if (us < 1'000'000) return fmt::format("{:.1f}ms", us / 1e3);
  if (us < 60'000'000) return fmt::format("{:.3f}s", us / 1e6);
  return fmt::format("{:.1f}s", us / 1e6);
}

namespace {

// Up to 3 significant digits without an exponent, trailing zeros dropped.
std::string Sig3(double v) {
  const double a = std::fabs(v);
  std::string s = a >= 100  ? fmt::format("{:.0f}", v)
                  : a >= 10 ? fmt::format("{:.1f}", v)
                  : a >= 1  ? fmt::format("{:.2f}", v)
                            : fmt::format("{:.3f}", v);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

}  // namespace

std::string FormatCompact(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
  const double a = std::fabs(v);
  // Rounding can carry into the next unit (999.6 -> "1000"): pick the unit
  // from the rounded value.
  if (a < 999.5) return Sig3(v);
  if (a < 999.5e3) return Sig3(v / 1e3) + "k";
  if (a < 999.5e6) return Sig3(v / 1e6) + "M";
  if (a < 999.5e9) return Sig3(v / 1e9) + "G";
  return Sig3(v / 1e12) + "T";
}

std::string FormatBytes(double bytes) {
  if (!std::isfinite(bytes)) return FormatCompact(bytes);
  const double a = std::fabs(bytes);
  if (a < 1023.5) return Sig3(bytes) + "B";
  if (a < 1023.5 * 1024) return Sig3(bytes / 1024) + "KiB";
  if (a < 1023.5 * 1024 * 1024) return Sig3(bytes / (1024.0 * 1024)) + "MiB";
  return Sig3(bytes / (1024.0 * 1024 * 1024)) + "GiB";
}

std::string FormatSeconds(double s) {
  if (!std::isfinite(s)) return FormatCompact(s);
  const double a = std::fabs(s);
  if (a == 0) return "0s";
  if (a < 0.9995) return Sig3(s * 1e3) + "ms";
  if (a < 120) return Sig3(s) + "s";
  if (a < 7200) return Sig3(s / 60) + "m";
  return Sig3(s / 3600) + "h";
}

std::string FormatTokensPerSecond(double tps) {
  return FormatCompact(tps) + " tok/s";
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return FormatCompact(fraction);
  return Sig3(fraction * 100) + "%";
}

}  // namespace redline::bench

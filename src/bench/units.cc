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

}  // namespace redline::bench

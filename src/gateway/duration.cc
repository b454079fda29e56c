#include "gateway/duration.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace redline::gateway {

Result<int64_t> ParseDurationMs(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("bad duration '{}': {} (write e.g. 250ms, 2s, 1m)",
                    text.substr(0, 64), why));
  };
  if (text == "0") return int64_t{0};
  size_t unit_at = 0;
  while (
      unit_at < text.size() &&
      ((text[unit_at] >= '0' && text[unit_at] <= '9') || text[unit_at] == '.'))
    ++unit_at;
  if (unit_at == 0) return bad("no number");
  double value = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + unit_at, value);
  if (ec != std::errc() || end != text.data() + unit_at)
    return bad("not a number");
  const std::string_view unit = text.substr(unit_at);
  double ms_per_unit = 0;
  if (unit == "us") {
    ms_per_unit = 1e-3;
  } else if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "s") {
    ms_per_unit = 1e3;
  } else if (unit == "m") {
    ms_per_unit = 60e3;
  } else if (unit == "h") {
    ms_per_unit = 3600e3;
  } else if (unit.empty()) {
    return bad("a unit is required (us, ms, s, m, h)");
  } else {
    return bad("unknown unit (us, ms, s, m, h)");
  }
  const double ms = std::ceil(value * ms_per_unit);
  // A week bounds every timeout the gateway has; beyond it is a typo.
  if (!std::isfinite(ms) || ms > 7.0 * 24 * 3600e3) return bad("too large");
  return static_cast<int64_t>(ms);
}

std::string FormatDurationMs(int64_t ms) {
  if (ms == 0) return "0";
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  if (ms > 1000 && ms % 100 == 0) return fmt::format("{:.1f}s", ms / 1e3);
  return fmt::format("{}ms", ms);
}

}  // namespace redline::gateway

#include "gateway/fault_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "gateway/duration.h"

namespace redline::gateway {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

Result<int64_t> ParseBytes(std::string_view text) {
  int64_t mult = 1;
  if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) {
    mult = 1024;
    text.remove_suffix(1);
  } else if (!text.empty() && (text.back() == 'm' || text.back() == 'M')) {
    mult = 1024 * 1024;
    text.remove_suffix(1);
  }
  int64_t v = 0;
  const auto [p, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0)
    return Status::InvalidArgument(
        fmt::format("'{}' is not a byte count (e.g. 4096, 64k, 1m)", text));
  return v * mult;
}

}  // namespace

Result<Faults> ParseFaults(std::string_view text) {
  Faults f;
  for (std::string_view rest = Trim(text); !rest.empty();) {
    const size_t end = rest.find(';');
    const std::string_view item = Trim(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view()
                                         : rest.substr(end + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    auto duration = [&](int64_t* out) -> Status {
      auto ms = ParseDurationMs(value);
      if (!ms.ok())
        return Status::InvalidArgument(std::string(key) + ": " +
                                       ms.status().message());
      *out = *ms;
      return Status::Ok();
    };
    if (key == "latency") {
      RL_RETURN_IF_ERROR(duration(&f.latency_down_ms));
    } else if (key == "latency-up") {
      RL_RETURN_IF_ERROR(duration(&f.latency_up_ms));
    } else if (key == "jitter") {
      RL_RETURN_IF_ERROR(duration(&f.jitter_ms));
    } else if (key == "bandwidth") {
      RL_ASSIGN_OR_RETURN(f.bandwidth_bytes_per_s, ParseBytes(value));
      if (f.bandwidth_bytes_per_s == 0)
        return Status::InvalidArgument("bandwidth: must be above 0");
    } else if (key == "drop-after") {
      RL_ASSIGN_OR_RETURN(f.drop_after_bytes, ParseBytes(value));
    } else if (key == "reset" && value.empty()) {
      f.reset = true;
    } else if (key == "blackhole" && value.empty()) {
      f.blackhole = true;
    } else if (key == "refuse" && value.empty()) {
      f.refuse = true;
    } else if (key == "clear" && value.empty()) {
      f = Faults();
    } else {
      return Status::InvalidArgument(fmt::format(
          "unknown fault '{}' (latency=, latency-up=, jitter=, bandwidth=, "
          "drop-after=, reset, blackhole, refuse, clear)",
          item.substr(0, 64)));
    }
  }
  return f;
}

Result<std::vector<FaultStep>> ParseFaultSchedule(std::string_view text) {
  std::vector<FaultStep> steps;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view step = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (step.empty()) continue;
    FaultStep s;
    std::string_view faults = step;
    const size_t colon = step.find(':');
    if (colon != std::string_view::npos) {
      auto at = ParseDurationMs(step.substr(0, colon));
      if (!at.ok())
        return Status::InvalidArgument(fmt::format(
            "--fault '{}': {}", step.substr(0, 64), at.status().message()));
      s.at_ms = *at;
      faults = step.substr(colon + 1);
    }
    auto f = ParseFaults(faults);
    if (!f.ok())
      return Status::InvalidArgument(fmt::format(
          "--fault '{}': {}", step.substr(0, 64), f.status().message()));
    s.faults = *f;
    steps.push_back(s);
  }
  std::stable_sort(
      steps.begin(), steps.end(),
      [](const FaultStep& a, const FaultStep& b) { return a.at_ms < b.at_ms; });
  return steps;
}

std::string DescribeFaults(const Faults& f) {
  std::vector<std::string> parts;
  if (f.latency_down_ms > 0)
    parts.push_back("latency=" + FormatDurationMs(f.latency_down_ms));
  if (f.latency_up_ms > 0)
    parts.push_back("latency-up=" + FormatDurationMs(f.latency_up_ms));
  if (f.jitter_ms > 0)
    parts.push_back("jitter=" + FormatDurationMs(f.jitter_ms));
  if (f.bandwidth_bytes_per_s > 0)
    parts.push_back(fmt::format("bandwidth={}", f.bandwidth_bytes_per_s));
  if (f.drop_after_bytes >= 0)
    parts.push_back(fmt::format("drop-after={}", f.drop_after_bytes));
  if (f.reset) parts.push_back("reset");
  if (f.blackhole) parts.push_back("blackhole");
  if (f.refuse) parts.push_back("refuse");
  if (parts.empty()) return "clear";
  return fmt::format("{}", fmt::join(parts, ";"));
}

}  // namespace redline::gateway

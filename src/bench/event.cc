#include "bench/event.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>

#include "bench/units.h"

namespace redline::bench {

Result<EventSpec> ParseEventSpec(std::string_view text) {
  const std::string quoted = "--event '" + std::string(text) + "': ";
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    return Status::InvalidArgument(
        quoted + "expected OFFSET:COMMAND, e.g. 20s:'kill $(cat pid)'");
  const std::string_view offset = Trim(text.substr(0, colon));
  if (offset.empty())
    return Status::InvalidArgument(quoted +
                                   "the offset before ':' is missing (e.g. "
                                   "20s:COMMAND)");
  auto ns = ParseDurationNs(offset);
  if (!ns.ok())
    return Status::InvalidArgument(
        quoted + "bad offset: " + std::string(ns.status().message()));
  const std::string_view command = Trim(text.substr(colon + 1));
  if (command.empty())
    return Status::InvalidArgument(quoted + "the command after ':' is empty");
  if (command.find('\0') != std::string_view::npos)
    return Status::InvalidArgument(quoted + "the command contains a NUL byte");
  EventSpec spec;
  spec.offset_ns = *ns;
  spec.command = std::string(command);
  spec.source = std::string(text);
  return spec;
}

Result<std::vector<EventSpec>> ParseEventSpecs(
    const std::vector<std::string>& values) {
  if (values.size() > kMaxEvents)
    return Status::InvalidArgument(
        fmt::format("--event: at most {} events per run ({} given)", kMaxEvents,
                    values.size()));
  std::vector<EventSpec> specs;
  specs.reserve(values.size());
  for (const std::string& v : values) {
    RL_ASSIGN_OR_RETURN(EventSpec spec, ParseEventSpec(v));
    specs.push_back(std::move(spec));
  }
  std::stable_sort(specs.begin(), specs.end(),
                   [](const EventSpec& a, const EventSpec& b) {
                     return a.offset_ns < b.offset_ns;
                   });
  return specs;
}

std::string SignalName(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal)) {
    return std::string("SIG") + abbrev;
  }
  return fmt::format("signal {}", signal);
}

std::string EventRecord::Outcome() const {
  if (!started) {
    return error.empty() ? "not started (the run ended first)"
                         : "not started: " + error;
  }
  if (!finished) return "still running: " + error;
  std::string out = signal != 0 ? "killed by " + SignalName(signal)
                                : fmt::format("exit {}", exit_code);
  if (timed_out) {
    out += fmt::format(" after the {} timeout", FormatSeconds(timeout_s));
  } else if (killed_at_end) {
    out += " at the end of the run";
  }
  return out;
}

}  // namespace redline::bench

#include "api/server_timing.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace redline::api {
namespace {

constexpr size_t kMaxEntries = 64;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

void Append(std::string* out, std::string_view name, double ms) {
  if (!out->empty()) *out += ", ";
  if (!std::isfinite(ms) || ms < 0) ms = 0;
  fmt::format_to(std::back_inserter(*out), "{};dur={:.3f}", name, ms);
}

}  // namespace

std::string FormatServerTiming(const ServerTimings& t) {
  std::string out;
  Append(&out, "queue", t.queue_ms);
  Append(&out, "prefill", t.prefill_ms);
  Append(&out, "decode", t.decode_ms);
  Append(&out, "ttft", t.ttft_ms);
  Append(&out, "e2e", t.e2e_ms);
  return out;
}

std::string AppendServerTiming(std::string_view existing, std::string_view name,
                               double dur_ms) {
  std::string out(Trim(existing));
  Append(&out, name, dur_ms);
  return out;
}

std::vector<TimingEntry> ParseServerTiming(std::string_view value) {
  std::vector<TimingEntry> out;
  while (!value.empty() && out.size() < kMaxEntries) {
    const size_t comma = value.find(',');
    std::string_view item = Trim(value.substr(0, comma));
    value = comma == std::string_view::npos ? std::string_view()
                                            : value.substr(comma + 1);
    const size_t semi = item.find(';');
    std::string_view name = Trim(item.substr(0, semi));
    if (name.empty()) continue;
    TimingEntry e;
    e.name = std::string(name);
    std::string_view params =
        semi == std::string_view::npos ? std::string_view() : item.substr(semi);
    while (!params.empty()) {
      params.remove_prefix(1);  // ';'
      const size_t next = params.find(';');
      std::string_view p = Trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view()
                                              : params.substr(next);
      if (p.size() > 4 && p.substr(0, 4) == "dur=") {
        std::string_view num = p.substr(4);
        double v = 0;
        auto [ptr, ec] =
            std::from_chars(num.data(), num.data() + num.size(), v);
        if (ec == std::errc() && ptr == num.data() + num.size() &&
            std::isfinite(v) && v >= 0 && e.dur_ms < 0)
          e.dur_ms = v;
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

double TimingOf(const std::vector<TimingEntry>& entries,
                std::string_view name) {
  for (const TimingEntry& e : entries)
    if (e.name == name) return e.dur_ms;
  return -1;
}

}  // namespace redline::api

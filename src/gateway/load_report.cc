#include "gateway/load_report.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "telemetry/prometheus_text.h"

namespace redline::gateway {
namespace {

enum class Signal { kNone, kRunning, kWaiting, kKv };

Signal Classify(std::string_view name) {
  if (name == "llamacpp:requests_processing") return Signal::kRunning;
  if (name == "llamacpp:requests_deferred") return Signal::kWaiting;
  if (name == "llamacpp:kv_cache_usage_ratio") return Signal::kKv;
  std::string_view rest;
  for (std::string_view prefix : {"redline_", "redline:", "vllm:"}) {
    if (name.starts_with(prefix)) {
      rest = name.substr(prefix.size());
      break;
    }
  }
  if (rest.empty()) return Signal::kNone;
  if (rest == "num_requests_running") return Signal::kRunning;
  if (rest == "num_requests_waiting") return Signal::kWaiting;
  if (rest == "kv_cache_usage_perc") return Signal::kKv;
  if (rest == "gpu_cache_usage_perc" && name.starts_with("vllm:"))
    return Signal::kKv;
  return Signal::kNone;
}

}  // namespace

Result<LoadReport> ParseLoadReport(std::string_view text) {
  LoadReport r;
  bool requests = false;
  for (const telemetry::PromSample& s : telemetry::ParsePrometheusText(text)) {
    const Signal what = Classify(s.name);
    if (what == Signal::kNone || !std::isfinite(s.value) || s.value < 0)
      continue;
    switch (what) {
      case Signal::kRunning:
        r.running += s.value;
        requests = true;
        break;
      case Signal::kWaiting:
        r.waiting += s.value;
        requests = true;
        break;
      case Signal::kKv: {
        double kv = s.value;
        if (kv > 1 && kv <= 100) kv /= 100;
        r.kv_usage = std::max(r.kv_usage, std::min(kv, 1.0));
        break;
      }
      case Signal::kNone:
        break;
    }
  }
  if (!requests)
    return Status::InvalidArgument(
        "no load series (redline_num_requests_running/_waiting, "
        "vllm:num_requests_running/_waiting, "
        "llamacpp:requests_processing/_deferred)");
  return r;
}

}  // namespace redline::gateway

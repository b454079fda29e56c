// Fuzzes the headers a server or client reads from the network for tracing
// and timing: `traceparent`/`tracestate` (telemetry/trace_context.h) and
// `Server-Timing` (api/server_timing.h). Checks: no crash; a parsed
// traceparent prints back to a header that parses to the same ids; a
// Server-Timing value yields at most 64 entries with durations >= 0 or -1.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/server_timing.h"
#include "telemetry/trace_context.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // First half as traceparent, the rest as tracestate.
  const std::string_view tp = in.substr(0, in.size() / 2);
  const std::string_view ts = in.substr(in.size() / 2);
  if (auto ctx = redline::telemetry::ParseTraceparent(tp, ts)) {
    if (!ctx->trace_id.valid() || !ctx->parent_span_id.valid()) std::abort();
    if (ctx->tracestate.size() > redline::telemetry::kMaxTracestateBytes)
      std::abort();
    const std::string back = redline::telemetry::FormatTraceparent(
        ctx->trace_id, ctx->parent_span_id, ctx->sampled);
    auto again = redline::telemetry::ParseTraceparent(back);
    if (!again || !(again->trace_id == ctx->trace_id) ||
        !(again->parent_span_id == ctx->parent_span_id) ||
        again->sampled != ctx->sampled)
      std::abort();
  }
  auto entries = redline::api::ParseServerTiming(in);
  if (entries.size() > 64) std::abort();
  for (const auto& e : entries) {
    if (e.name.empty()) std::abort();
    if (e.dur_ms != -1 && !(e.dur_ms >= 0)) std::abort();
  }
  return 0;
}

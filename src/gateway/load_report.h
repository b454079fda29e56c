// LoadReport: what an upstream says about its own load in its Prometheus
// /metrics, read by the metrics scraper (metrics_scraper.h) and fed to the
// routing policies (policy.h, UpstreamLoad::scraped_*).
//
// Recognised series — running, waiting, KV usage 0..1 — with any labels;
// several series of one name (one per model, say) are summed, and KV usage
// takes the fullest:
//
//   redline    redline_num_requests_running, redline_num_requests_waiting,
//              redline_kv_cache_usage_perc
//   vLLM       vllm:num_requests_running, vllm:num_requests_waiting,
//              vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc
//   llama.cpp  llamacpp:requests_processing (running),
//              llamacpp:requests_deferred (waiting),
//              llamacpp:kv_cache_usage_ratio
//
// (`redline:` works as `redline_`.) A KV value above 1 (and at most 100)
// is read as a percentage. NaN, infinite and negative values are ignored.
//
// Thread-safety: pure functions.
#ifndef REDLINE_GATEWAY_LOAD_REPORT_H_
#define REDLINE_GATEWAY_LOAD_REPORT_H_

#include <string_view>

#include "base/result.h"

namespace redline::gateway {

struct LoadReport {
  double running = 0;
  double waiting = 0;
  // Fraction of the KV cache in use, 0..1; -1 when the server exports none.
  double kv_usage = -1;
};

// InvalidArgument when the text has no running or waiting series of a
// known server (the message lists the names looked for).
Result<LoadReport> ParseLoadReport(std::string_view prometheus_text);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_LOAD_REPORT_H_

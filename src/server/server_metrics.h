// ServerMetrics: every metric `redline serve` exports, registered once with
// the children the hot path needs looked up in advance, one set per served
// model. docs/METRICS.md documents each name; docs/SERVING.md (metrics) is
// the convention (vLLM's names under the "redline:" prefix, a model_name
// label, a bucket at every SLO line).
//
// Ownership: the families live in the Registry passed to the constructor,
// which must outlive this object. Thread-safety: all members are
// thread-safe metric objects (see telemetry/metrics.h).
#ifndef REDLINE_SERVER_SERVER_METRICS_H_
#define REDLINE_SERVER_SERVER_METRICS_H_

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/sampling/stop_matcher.h"
#include "server/error_class.h"
#include "server/startup.h"
#include "telemetry/metrics.h"

namespace redline::server {

// Bucket bounds in seconds. Each list has a bound at every SLO line the
// product talks about (0.1, 1, 2, 3 s) so `histogram_quantile` checks
// against them are exact, and is at least as fine as vLLM's and
// OpenTelemetry's lists (docs/SERVING.md, metrics).
// TTFT: vLLM's list plus 0.15-0.4, 1.5, 2, 3, 4, 15, 30, 60.
std::vector<double> TtftBucketsSeconds();
// ITL and TPOT: 1 ms steps below 10 ms for CPU decode, then vLLM's list.
std::vector<double> ItlBucketsSeconds();
// E2E, queue, prefill, decode, inference: 1 ms to ~2 h.
std::vector<double> RequestBucketsSeconds();
// Prompt and generation length per request, in tokens (1-2-5 series).
std::vector<double> TokenCountBuckets();

// Which request the sample belongs to: the first inference request after
// start-up ("cold") or any later one ("warm").
enum class StartKind { kCold, kWarm };

// Label values of http_requests_total{endpoint}.
enum class Endpoint {
  kChatCompletions,
  kCompletions,
  kModels,
  kTokenize,
  kDetokenize,
  kHealth,
  kLivez,
  kReadyz,
  kStartupz,
  kMetrics,
  kIndex,  // GET /: the list of endpoints
  kOther,
};
inline constexpr int kNumEndpoints = 12;
std::string_view EndpointName(Endpoint e);

class MetricFamilies;

// The metrics of one served model: every child carries its model_name.
class ModelMetrics {
 public:
  // `prefix` is "redline:" or "redline_".
  ModelMetrics(MetricFamilies& families, std::string_view prefix,
               const std::string& model_name);
  ModelMetrics(const ModelMetrics&) = delete;
  ModelMetrics& operator=(const ModelMetrics&) = delete;

  // Counts a finished HTTP exchange (any route), by status code.
  void CountHttp(Endpoint endpoint, int status);
  telemetry::Counter& RequestSuccess(model::FinishReason reason);
  telemetry::Counter& RequestError(ErrorClass c) {
    return *errors_[static_cast<int>(c)];
  }
  telemetry::Histogram& Ttft(StartKind k) {
    return k == StartKind::kCold ? *ttft_cold_ : *ttft_warm_;
  }
  telemetry::Histogram& E2e(StartKind k) {
    return k == StartKind::kCold ? *e2e_cold_ : *e2e_warm_;
  }
  void SetPhase(Phase phase);

  // Counters.
  telemetry::Counter* prompt_tokens;
  telemetry::Counter* generation_tokens;
  telemetry::Counter* prefix_cache_queries;  // mirrored from the engine
  telemetry::Counter* prefix_cache_hits;     // mirrored from the engine
  telemetry::Counter* spec_draft_tokens;     // mirrored from the engine
  telemetry::Counter* spec_accepted_tokens;  // mirrored from the engine
  telemetry::Counter* engine_busy_seconds;   // mirrored from the engine
  telemetry::Counter* pool_busy_seconds;     // the model's thread pool
  telemetry::Gauge* pool_threads;
  // [kNumForwardStages], mirrored from the engine's stage timers.
  std::vector<telemetry::Counter*> engine_stage_seconds;
  telemetry::Counter* spec_drafts;  // mirrored from the engine
  // Histograms.
  telemetry::Histogram* itl;
  telemetry::Histogram* tpot;
  telemetry::Histogram* queue_time;
  telemetry::Histogram* prefill_time;
  telemetry::Histogram* decode_time;
  telemetry::Histogram* inference_time;
  telemetry::Histogram* prompt_tokens_per_request;
  telemetry::Histogram* generation_tokens_per_request;
  // Gauges.
  telemetry::Gauge* running;
  telemetry::Gauge* waiting;
  telemetry::Gauge* waiting_prompt_tokens;
  telemetry::Gauge* kv_cache_usage;
  // Speculative decoding since start: accepted / draft tokens, and tokens
  // per target pass of drafting sequences (1 + accepted / drafts).
  telemetry::Gauge* spec_acceptance_rate;
  telemetry::Gauge* spec_tokens_per_pass;
  telemetry::Gauge* load_progress;
  telemetry::Gauge* load_time;
  telemetry::Gauge* warmup_time;
  telemetry::Gauge* startup_time;
  telemetry::Gauge* streams_open;
  telemetry::GaugeFamily* cache_config_info;

 private:
  const std::string model_name_;
  telemetry::CounterFamily* http_requests_;
  telemetry::CounterFamily* success_;
  std::array<telemetry::Counter*, kNumErrorClasses> errors_;
  telemetry::Histogram* ttft_cold_;
  telemetry::Histogram* ttft_warm_;
  telemetry::Histogram* e2e_cold_;
  telemetry::Histogram* e2e_warm_;
  std::array<telemetry::Gauge*, std::size(kAllPhases)> phase_;
};

// Every metric of the server: the families, registered once, and one
// ModelMetrics per served model (in configuration order).
class ServerMetrics {
 public:
  ServerMetrics(telemetry::Registry& registry, std::string_view prefix,
                const std::vector<std::string>& model_names);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  ModelMetrics& model(size_t index) { return *models_[index]; }

  // Connection budgets of the HTTP listener (mirrored from its stats).
  telemetry::Gauge* connections_open;
  telemetry::Counter* connections_rejected;
  telemetry::Counter* connection_timeouts;
  telemetry::Counter* write_overflows;
  // Routes that are not about one model (probes, /metrics, unknown routes,
  // HTTP parse errors) are counted under the first model.
  ModelMetrics& server() { return *models_[0]; }

 private:
  std::unique_ptr<MetricFamilies> families_;
  std::vector<std::unique_ptr<ModelMetrics>> models_;
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVER_METRICS_H_

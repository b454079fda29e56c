#include "server/server_metrics.h"

#include <map>
#include <string>

#include "model/arch/forward_profile.h"

namespace redline::server {

std::vector<double> TtftBucketsSeconds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.25,
          0.3,   0.4,   0.5,  0.75, 1,    1.5,  2,    2.5, 3,    4,   5,
          7.5,   10,    15,   20,   30,   40,   60,   80,  160,  640, 2560};
}

std::vector<double> ItlBucketsSeconds() {
  return {0.001, 0.002,  0.003, 0.004,  0.005, 0.006, 0.007, 0.008, 0.009,
          0.01,  0.0125, 0.015, 0.0175, 0.02,  0.025, 0.03,  0.04,  0.05,
          0.075, 0.1,    0.15,  0.2,    0.3,   0.4,   0.5,   0.75,  1,
          2,     2.5,    3,     5,      7.5,   10,    20,    40,    80};
}

std::vector<double> RequestBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15,
          0.2,   0.25,   0.3,   0.4,  0.5,  0.75, 1,    1.5,  2,   2.5,
          3,     4,      5,     7.5,  10,   15,   20,   30,   40,  50,
          60,    120,    240,   480,  960,  1920, 7680};
}

std::vector<double> TokenCountBuckets() {
  return {1,    2,    5,    10,    20,    50,    100,    200,   500,
          1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};
}

std::string_view EndpointName(Endpoint e) {
  switch (e) {
    case Endpoint::kChatCompletions:
      return "chat_completions";
    case Endpoint::kCompletions:
      return "completions";
    case Endpoint::kModels:
      return "models";
    case Endpoint::kTokenize:
      return "tokenize";
    case Endpoint::kDetokenize:
      return "detokenize";
    case Endpoint::kHealth:
      return "health";
    case Endpoint::kLivez:
      return "livez";
    case Endpoint::kReadyz:
      return "readyz";
    case Endpoint::kStartupz:
      return "startupz";
    case Endpoint::kMetrics:
      return "metrics";
    case Endpoint::kIndex:
      return "index";
    case Endpoint::kOther:
      return "other";
  }
  return "other";
}

// Registers each family once and hands the same family to every model that
// asks for it by name.
class MetricFamilies {
 public:
  explicit MetricFamilies(telemetry::Registry& r) : r_(r) {}

  telemetry::CounterFamily& AddCounter(const std::string& name,
                                       const std::string& help,
                                       std::vector<std::string> labels) {
    auto& f = counters_[name];
    if (f == nullptr) f = &r_.AddCounter(name, help, std::move(labels));
    return *f;
  }
  telemetry::GaugeFamily& AddGauge(const std::string& name,
                                   const std::string& help,
                                   std::vector<std::string> labels) {
    auto& f = gauges_[name];
    if (f == nullptr) f = &r_.AddGauge(name, help, std::move(labels));
    return *f;
  }
  telemetry::HistogramFamily& AddHistogram(const std::string& name,
                                           const std::string& help,
                                           std::vector<std::string> labels,
                                           std::vector<double> bounds) {
    auto& f = histograms_[name];
    if (f == nullptr)
      f = &r_.AddHistogram(name, help, std::move(labels), std::move(bounds));
    return *f;
  }

 private:
  telemetry::Registry& r_;
  std::map<std::string, telemetry::CounterFamily*> counters_;
  std::map<std::string, telemetry::GaugeFamily*> gauges_;
  std::map<std::string, telemetry::HistogramFamily*> histograms_;
};

ServerMetrics::ServerMetrics(telemetry::Registry& registry,
                             std::string_view prefix,
                             const std::vector<std::string>& model_names)
    : families_(std::make_unique<MetricFamilies>(registry)) {
  for (const std::string& name : model_names)
    models_.push_back(std::make_unique<ModelMetrics>(*families_, prefix, name));
  const std::string p(prefix);
  connections_open =
      &registry
           .AddGauge(p + "http_connections_open", "Open HTTP connections.", {})
           .Labels(std::vector<std::string>{});
  connections_rejected =
      &registry
           .AddCounter(p + "http_connections_rejected_total",
                       "Connections refused with 503: over --max-connections "
                       "or at the descriptor limit.",
                       {})
           .Labels(std::vector<std::string>{});
  connection_timeouts =
      &registry
           .AddCounter(p + "http_connection_timeouts_total",
                       "Connections closed by the header, body or write "
                       "timeout.",
                       {})
           .Labels(std::vector<std::string>{});
  write_overflows =
      &registry
           .AddCounter(p + "http_write_overflows_total",
                       "Connections closed because the client did not read a "
                       "response fast enough (pending bytes over the bound).",
                       {})
           .Labels(std::vector<std::string>{});
}

ServerMetrics::~ServerMetrics() = default;

ModelMetrics::ModelMetrics(MetricFamilies& r, std::string_view prefix,
                           const std::string& model_name)
    : model_name_(model_name) {
  const std::string p(prefix);
  const std::string& m = model_name;
  using Labels = std::vector<std::string>;
  const Labels model_only{"model_name"};

  // Engine state (refreshed at scrape time by the server's collector).
  running =
      &r.AddGauge(p + "num_requests_running",
                  "Requests in a slot (prefilling or decoding).", model_only)
           .Labels({m});
  waiting = &r.AddGauge(p + "num_requests_waiting",
                        "Requests waiting for a slot.", model_only)
                 .Labels({m});
  waiting_prompt_tokens =
      &r.AddGauge(p + "num_waiting_prompt_tokens",
                  "Prompt tokens of the requests waiting for a slot.",
                  model_only)
           .Labels({m});
  kv_cache_usage = &r.AddGauge(p + "kv_cache_usage_perc",
                               "KV-cache usage: positions held by running "
                               "requests / capacity (0-1).",
                               model_only)
                        .Labels({m});
  spec_acceptance_rate =
      &r.AddGauge(p + "spec_decode_acceptance_rate",
                  "Speculative draft tokens accepted / verified since start "
                  "(0 until a draft was verified).",
                  model_only)
           .Labels({m});
  spec_tokens_per_pass =
      &r.AddGauge(p + "spec_decode_tokens_per_pass",
                  "Tokens a drafting sequence gets per target forward pass "
                  "since start: 1 + accepted / drafts (0 until a draft).",
                  model_only)
           .Labels({m});
  cache_config_info = &r.AddGauge(
      p + "cache_config_info",
      "KV-cache configuration (value 1): block_size (tokens per block; 1), "
      "num_blocks "
      "(capacity in blocks), num_slots, n_ctx (tokens per slot).",
      {"model_name", "block_size", "num_blocks", "num_slots", "n_ctx"});
  streams_open =
      &r.AddGauge(p + "num_streams_open",
                  "Inference requests being answered now (SSE or not).",
                  model_only)
           .Labels({m});

  // Start-up.
  load_progress =
      &r.AddGauge(
            p + "load_progress",
            "Start-up progress, 0-1 (loading, then warm-up; 1 when ready).",
            model_only)
           .Labels({m});
  auto& phase =
      r.AddGauge(p + "startup_phase",
                 "1 for the current lifecycle phase, 0 for the others.",
                 {"model_name", "phase"});
  for (Phase ph : kAllPhases)
    phase_[static_cast<int>(ph)] =
        &phase.Labels({m, std::string(PhaseName(ph))});
  load_time =
      &r.AddGauge(p + "engine_load_weights_time_seconds",
                  "Time to load (map and page in) the weights.", model_only)
           .Labels({m});
  warmup_time =
      &r.AddGauge(p + "engine_warmup_time_seconds",
                  "Time of the warm-up generation before ready.", model_only)
           .Labels({m});
  startup_time = &r.AddGauge(p + "engine_startup_time_seconds",
                             "Time from process start to ready.", model_only)
                      .Labels({m});

  // Counters.
  prompt_tokens =
      &r.AddCounter(p + "prompt_tokens_total",
                    "Prompt tokens of finished requests.", model_only)
           .Labels({m});
  generation_tokens =
      &r.AddCounter(p + "generation_tokens_total",
                    "Generated tokens (every request, finished or not).",
                    model_only)
           .Labels({m});
  success_ =
      &r.AddCounter(p + "request_success_total",
                    "Requests that finished successfully, by finish reason.",
                    {"model_name", "finished_reason"});
  success_->Labels({m, "stop"});
  success_->Labels({m, "length"});
  auto& errors = r.AddCounter(p + "request_errors_total",
                              "Inference requests that failed or were refused, "
                              "by class: bad_request, unauthorized, "
                              "not_found, too_large, overloaded (429), "
                              "unavailable (503), timeout, cancelled (client "
                              "gone), internal.",
                              {"model_name", "class"});
  for (int i = 0; i < kNumErrorClasses; ++i) {
    errors_[i] = &errors.Labels(
        {m, std::string(ErrorClassName(static_cast<ErrorClass>(i)))});
  }
  http_requests_ =
      &r.AddCounter(p + "http_requests_total",
                    "HTTP requests answered, by endpoint and status code.",
                    {"model_name", "endpoint", "code"});
  prefix_cache_queries =
      &r.AddCounter(p + "prefix_cache_queries_total",
                    "Prompt tokens looked up in the prefix cache.", model_only)
           .Labels({m});
  prefix_cache_hits =
      &r.AddCounter(p + "prefix_cache_hits_total",
                    "Prompt tokens served from the prefix cache.", model_only)
           .Labels({m});
  spec_draft_tokens =
      &r.AddCounter(p + "spec_decode_draft_tokens_total",
                    "Speculative draft tokens verified.", model_only)
           .Labels({m});
  spec_accepted_tokens =
      &r.AddCounter(p + "spec_decode_accepted_tokens_total",
                    "Speculative draft tokens that matched and were kept.",
                    model_only)
           .Labels({m});
  engine_busy_seconds =
      &r.AddCounter(p + "engine_busy_seconds_total",
                    "Wall time of the engine's forward passes; its rate is "
                    "the fraction of time the model is busy.",
                    model_only)
           .Labels({m});
  pool_busy_seconds =
      &r.AddCounter(p + "thread_pool_busy_seconds_total",
                    "Time the model's thread pool threads spent running "
                    "kernels, summed over threads; rate / threads is the "
                    "pool's busy ratio.",
                    model_only)
           .Labels({m});
  pool_threads = &r.AddGauge(p + "thread_pool_threads",
                             "Threads in the model's thread pool (the engine's "
                             "owner thread included).",
                             model_only)
                      .Labels({m});
  auto& stages = r.AddCounter(
      p + "engine_stage_seconds_total",
      "Forward-pass time by stage (matrix products by kind, attention, "
      "norms, ...), from the engine's stage timers.",
      {"model_name", "stage"});
  for (int i = 0; i < model::kNumForwardStages; ++i) {
    engine_stage_seconds.push_back(
        &stages.Labels({m, std::string(model::ForwardStageKey(
                               static_cast<model::ForwardStage>(i)))}));
  }
  spec_drafts =
      &r.AddCounter(p + "spec_decode_drafts_total",
                    "Speculative drafts verified (one per sequence per step "
                    "that had a draft).",
                    model_only)
           .Labels({m});

  // Latency histograms.
  auto& ttft = r.AddHistogram(p + "time_to_first_token_seconds",
                              "Arrival (request parsed) to first content token "
                              "written; start=cold for the first "
                              "request after start-up.",
                              {"model_name", "start"}, TtftBucketsSeconds());
  ttft_cold_ = &ttft.Labels({m, "cold"});
  ttft_warm_ = &ttft.Labels({m, "warm"});
  auto& e2e = r.AddHistogram(p + "e2e_request_latency_seconds",
                             "Arrival to the last byte of the response; "
                             "start=cold for the first request.",
                             {"model_name", "start"}, RequestBucketsSeconds());
  e2e_cold_ = &e2e.Labels({m, "cold"});
  e2e_warm_ = &e2e.Labels({m, "warm"});
  itl = &r.AddHistogram(p + "inter_token_latency_seconds",
                        "Gap between consecutive content chunks of a request.",
                        model_only, ItlBucketsSeconds())
             .Labels({m});
  tpot = &r.AddHistogram(p + "request_time_per_output_token_seconds",
                         "(E2E - TTFT) / (generated tokens - 1), per request "
                         "with >= 2 tokens.",
                         model_only, ItlBucketsSeconds())
              .Labels({m});
  queue_time = &r.AddHistogram(p + "request_queue_time_seconds",
                               "Arrival to admission into a slot.", model_only,
                               RequestBucketsSeconds())
                    .Labels({m});
  prefill_time =
      &r.AddHistogram(
            p + "request_prefill_time_seconds",
            "Admission to the whole prompt processed (cached prefix skipped).",
            model_only, RequestBucketsSeconds())
           .Labels({m});
  decode_time = &r.AddHistogram(p + "request_decode_time_seconds",
                                "First to last generated token.", model_only,
                                RequestBucketsSeconds())
                     .Labels({m});
  inference_time = &r.AddHistogram(p + "request_inference_time_seconds",
                                   "Admission to finish (prefill + decode).",
                                   model_only, RequestBucketsSeconds())
                        .Labels({m});
  prompt_tokens_per_request =
      &r.AddHistogram(p + "request_prompt_tokens",
                      "Prompt length per finished request.", model_only,
                      TokenCountBuckets())
           .Labels({m});
  generation_tokens_per_request =
      &r.AddHistogram(p + "request_generation_tokens",
                      "Generated tokens per finished request.", model_only,
                      TokenCountBuckets())
           .Labels({m});
}

void ModelMetrics::CountHttp(Endpoint endpoint, int status) {
  http_requests_
      ->Labels({model_name_, EndpointName(endpoint), std::to_string(status)})
      .Increment();
}

telemetry::Counter& ModelMetrics::RequestSuccess(model::FinishReason reason) {
  return success_->Labels({model_name_, reason == model::FinishReason::kLength
                                            ? "length"
                                            : "stop"});
}

void ModelMetrics::SetPhase(Phase phase) {
  for (Phase ph : kAllPhases)
    phase_[static_cast<int>(ph)]->Set(ph == phase ? 1 : 0);
}

}  // namespace redline::server

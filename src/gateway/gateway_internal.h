// Gateway::Impl, shared by gateway.cc (lifecycle) and gateway_routes.cc
// (routes). Not part of the library's interface.
//
// Threading: every member is touched on the loop thread only, except the
// exit state (exit_mu) and port (set before the loop starts).
#ifndef REDLINE_GATEWAY_GATEWAY_INTERNAL_H_
#define REDLINE_GATEWAY_GATEWAY_INTERNAL_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/error.h"
#include "api/models.h"
#include "api/request.h"
#include "api/types.h"
#include "gateway/cache_layer.h"
#include "gateway/gateway.h"
#include "gateway/gateway_metrics.h"
#include "gateway/gateway_trace.h"
#include "gateway/metrics_scraper.h"
#include "gateway/pool.h"
#include "gateway/prober.h"
#include "gateway/proxy_request.h"
#include "gateway/router.h"
#include "http/event_loop.h"
#include "http/server.h"
#include "telemetry/tracer.h"

namespace redline::gateway {

struct Gateway::Impl {
  explicit Impl(GatewayConfig c);

  enum class Endpoint {
    kChat,
    kCompletions,
    kModels,
    kHealth,
    kLivez,
    kReadyz,
    kMetrics,
    kAdminPurge,
    kOther
  };
  struct RouteInfo {
    Endpoint endpoint;
    bool is_post;
    bool needs_key;
  };
  // Where a model name goes.
  struct ModelTarget {
    Pool* pool = nullptr;
    const ModelRoute* route = nullptr;  // null: discovered or wildcard
  };

  // --- routes (gateway_routes.cc) ---
  static RouteInfo Classify(std::string_view path);
  std::optional<api::ApiError> Refusal(const http::ServerRequest& head,
                                       const RouteInfo& info) const;
  std::optional<http::EarlyResponse> EarlyAnswer(
      const http::ServerRequest& head);
  void Handle(http::ServerRequest&& request,
              std::shared_ptr<http::ResponseWriter> writer);
  void Route(http::ServerRequest& request,
             const std::shared_ptr<http::ResponseWriter>& writer);
  void HandleInference(api::ApiKind kind, http::ServerRequest& request,
                       const std::shared_ptr<http::ResponseWriter>& writer);
  void HandleModels(const http::ServerRequest& request,
                    http::ResponseWriter& writer, std::string_view id);
  void HandleReadyz(const http::ServerRequest& request,
                    http::ResponseWriter& writer, bool llama_cpp_shape);
  bool Authorized(const http::ServerRequest& request) const;
  std::optional<ModelTarget> FindModel(std::string_view name,
                                       api::ApiError* error);
  std::vector<api::ModelCard> ModelCards() const;
  std::vector<http::Header> ForwardHeaders(
      const http::ServerRequest& request) const;
  void Reply(const http::ServerRequest& request, http::ResponseWriter& writer,
             int status, std::string body, std::vector<http::Header> extra = {},
             std::string_view content_type = "application/json");
  void ReplyError(const http::ServerRequest& request,
                  http::ResponseWriter& writer, const api::ApiError& error);

  // --- cache and routing (gateway_cache_routes.cc) ---
  // One request between its parse and its ProxyRequest (a cache lookup,
  // a single-flight wait or an escalation may come in between).
  struct Job {
    api::ApiKind kind = api::ApiKind::kChat;
    api::CompletionRequest parsed;
    ModelTarget target;
    ForwardPlan plan;
    std::shared_ptr<http::ResponseWriter> client;
    bool cache_on = false;
    CacheDecision cache;
    int route_index = -1;  // >= 0: routed
    bool route_forced = false;
    std::string route_name;
    // The parsed body as forwarded (the `cache` member removed, the routed
    // model set), before an upstream-model rewrite.
    boost::json::object body;
    std::vector<http::Header> forward_headers;
    std::shared_ptr<GatewayTrace> trace;  // null when tracing is off
    int64_t t_lookup_ns = 0;              // the cache lookup's start
    bool stream_escalated = false;  // the held light stream was handed over
  };
  // `body` is the parsed request body (from the same parse as `parsed`).
  void Dispatch(api::ApiKind kind, http::ServerRequest& request,
                const std::shared_ptr<http::ResponseWriter>& writer,
                api::CompletionRequest parsed, boost::json::object body);
  void AfterLookup(const std::shared_ptr<Job>& job,
                   std::shared_ptr<const CacheEntry> entry,
                   const std::string& tier, const std::string& verdict);
  void ServeHit(const std::shared_ptr<Job>& job,
                std::shared_ptr<const CacheEntry> entry,
                const std::string& tier);
  void Forward(const std::shared_ptr<Job>& job, const std::string& verdict,
               bool leader);
  void FinishEscalation(const std::shared_ptr<Job>& job,
                        const std::string& verdict, bool leader,
                        bool added_logprobs, int status,
                        std::vector<http::Header> headers, std::string body);
  // Counts an escalation and sends the request to `full` (the escalation
  // class's model).
  void Escalate(const std::shared_ptr<Job>& job, const std::string& verdict,
                bool leader, const std::string& reason,
                const ModelTarget& full);
  // A streamed light request with its first tokens held and judged.
  void ForwardHeldStream(const std::shared_ptr<Job>& job,
                         const std::string& verdict, bool leader,
                         const ModelTarget& full);
  std::shared_ptr<http::ResponseWriter> OutWriter(
      const std::shared_ptr<Job>& job, const std::string& verdict, bool leader,
      const std::string& route, const std::string& escalated);
  ForwardPlan MakePlan(const Job& job, const ModelTarget& target,
                       std::string body) const;
  void StartProxy(Pool& pool, ForwardPlan plan,
                  std::shared_ptr<http::ResponseWriter> out,
                  const std::shared_ptr<http::ResponseWriter>& client);
  void HandlePurge(const http::ServerRequest& request,
                   const std::shared_ptr<http::ResponseWriter>& writer);
  Status InitCacheAndRouting();
  void StartWarm();
  void WarmNext();

  // --- lifecycle (gateway.cc) ---
  void Tick();
  void BeginDrain();
  void CheckDrain();
  void FinalStop();
  void RequestDone(uint64_t id);

  GatewayConfig config;
  // Declared before everything that may hold a GatewayTrace, so it is
  // destroyed after them; null when tracing is off.
  std::unique_ptr<telemetry::Tracer> tracer;
  http::EventLoop loop;
  GatewayMetrics metrics;
  std::vector<std::unique_ptr<Pool>> pools;
  std::unordered_map<std::string, ModelTarget> model_routes;
  Pool* wildcard_pool = nullptr;
  Pool* default_pool = nullptr;
  std::unique_ptr<Prober> prober;
  std::unique_ptr<MetricsScraper> scraper;
  std::unique_ptr<http::Server> http;
  std::unordered_map<uint64_t, std::unique_ptr<ProxyRequest>> active;
  uint64_t next_id = 1;
  int64_t started_unix_s = 0;
  bool draining = false;
  bool stopped = false;
  std::unique_ptr<http::Timer> tick_timer;
  std::unique_ptr<http::Timer> grace_timer;
  uint16_t port = 0;

  // Cache and routing; null / disabled when not configured.
  std::shared_ptr<CacheLayer> cache;
  std::optional<Router> router;
  telemetry::CounterFamily* route_requests = nullptr;
  telemetry::CounterFamily* route_escalations = nullptr;
  telemetry::HistogramFamily* route_e2e = nullptr;
  telemetry::Histogram* route_decision = nullptr;
  // Warm start (loop thread): lines left, in flight, done; /readyz is 503
  // while warming.
  bool warming = false;
  bool warm_started = false;
  int64_t warm_since_ns = 0;
  std::vector<std::string> warm_lines;
  size_t warm_next = 0;
  size_t warm_done = 0;
  size_t warm_stored = 0;
  int warm_in_flight = 0;

  std::thread loop_thread;
  std::mutex exit_mu;
  std::condition_variable exit_cv;
  bool loop_exited = false;  // guarded by exit_mu
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_GATEWAY_INTERNAL_H_

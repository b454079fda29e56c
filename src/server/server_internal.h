// Internal to src/server: the state behind InferenceServer, shared by
// server.cc (lifecycle, probes, small routes), model_loader.cc (loading and
// warming every model) and inference_routes.cc (completion requests through
// an InferenceSession). Not a public header.
//
// Threading rule: members marked "loop" are touched only on the event-loop
// thread; ServedModel's loader members are written by the loader thread
// before it posts OnModelLoaded to the loop; atomics are shared.
#ifndef REDLINE_SERVER_SERVER_INTERNAL_H_
#define REDLINE_SERVER_SERVER_INTERNAL_H_

#include <atomic>
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
#include "http/event_loop.h"
#include "http/server.h"
#include "server/prep_workers.h"
#include "server/served_model.h"
#include "server/server.h"
#include "server/server_metrics.h"
#include "server/session.h"
#include "server/startup.h"
#include "telemetry/metrics.h"
#include "telemetry/tracer.h"

namespace redline::server {

// The context a model is served with: --ctx, else min(trained, 4096).
int64_t ContextTokens(const ModelSpec& spec, int64_t train_ctx);

// Opens every model file's header and checks that its KV cache fits in
// memory, so a bad configuration fails before the port is bound.
Status CheckModelFiles(const ServerConfig& config);

struct InferenceServer::Impl {
  explicit Impl(ServerConfig c);

  // ---- lifecycle (server.cc, model_loader.cc) ----
  void LoaderMain();
  bool LoadModel(ServedModel& m, size_t index);  // loader thread
  bool WarmUp(ServedModel& m, std::string* error);
  void OnModelLoaded(size_t index);    // loop
  void OnLoadFailed(std::string why);  // loop
  void BeginDrain();                   // loop
  void CheckDrain();                   // loop
  void FinalStop(int exit_code);       // loop
  void Tick();                         // loop
  void RefreshMetrics();               // loop (collector)

  // ---- routing (server.cc) ----
  void Handle(http::ServerRequest&& request,
              std::shared_ptr<http::ResponseWriter> writer);
  void Route(http::ServerRequest& request,
             const std::shared_ptr<http::ResponseWriter>& writer);
  struct RouteInfo {
    Endpoint endpoint;
    bool is_post;
    bool needs_key;
  };
  static RouteInfo Classify(std::string_view path);
  static std::string IndexBody();
  // 404 (no route), 405 (wrong method) or 401 (API key), else nullopt.
  std::optional<api::ApiError> Refusal(const http::ServerRequest& head,
                                       const RouteInfo& info) const;
  // http's on_headers hook: the same refusals, answered before the body.
  std::optional<http::EarlyResponse> EarlyAnswer(
      const http::ServerRequest& head);
  bool Authorized(const http::ServerRequest& request) const;
  void Reply(Endpoint endpoint, const http::ServerRequest& request,
             http::ResponseWriter& writer, int status, std::string body,
             std::vector<http::Header> extra = {},
             std::string_view content_type = "application/json",
             ModelMetrics* metrics = nullptr);
  void ReplyError(Endpoint endpoint, const http::ServerRequest& request,
                  http::ResponseWriter& writer, const api::ApiError& error,
                  ModelMetrics* metrics = nullptr);
  // 503 while not serving inference (loading, warming, draining, failed).
  api::ApiError NotServingError() const;
  // The model a request names ("" or absent: the first one); nullptr when
  // unknown (*error is the 404). Any thread: `models` never changes after
  // construction.
  ServedModel* FindModel(std::string_view name, api::ApiError* error);

  void HandleHealth(const http::ServerRequest& request,
                    http::ResponseWriter& writer);
  void HandleStartupz(const http::ServerRequest& request,
                      http::ResponseWriter& writer);
  void HandleModels(const http::ServerRequest& request,
                    http::ResponseWriter& writer, std::string_view id);
  // A body or an error, built by a prep worker.
  struct Answer {
    std::string body;
    std::optional<api::ApiError> error;
    static Answer Ok(std::string b) { return {std::move(b), std::nullopt}; }
    static Answer Error(api::ApiError e) { return {{}, std::move(e)}; }
  };
  // /tokenize and /detokenize: any thread (they grow with the input).
  Answer Tokenize(const std::string& request_body);
  Answer Detokenize(const std::string& request_body);
  // Runs Tokenize/Detokenize on a prep worker and replies on the loop.
  void OffLoop(Endpoint endpoint, http::ServerRequest& request,
               const std::shared_ptr<http::ResponseWriter>& writer);
  void HandleMetrics(const http::ServerRequest& request,
                     http::ResponseWriter& writer);

  // ---- inference (inference_routes.cc) ----
  void HandleInference(api::ApiKind kind, http::ServerRequest& request,
                       const std::shared_ptr<http::ResponseWriter>& writer);
  // Starts a session for a request prepared by a worker (loop).
  void StartSession(api::ApiKind kind, const http::ServerRequest& request,
                    const std::shared_ptr<http::ResponseWriter>& writer,
                    ServedModel& m, PreparedRequest prepared, bool stream,
                    bool include_usage, bool continuous_usage, bool logprobs,
                    std::shared_ptr<telemetry::RequestTrace> trace);
  // Drains session `id` (loop) and forgets it once it is done.
  void DrainSession(uint64_t id);

  // ---- configuration, shared state ----
  ServerConfig config;
  // Aggregate over the models: ready when every model is ready.
  StartupTracker startup;
  telemetry::Registry registry;
  ServerMetrics metrics;
  std::vector<std::unique_ptr<ServedModel>> models;
  const SessionOptions session_options;
  // Parsing, rendering and tokenizing off the loop (prep_workers.h).
  std::unique_ptr<PrepWorkers> prep;
  // Set when tracing exports anywhere (--otlp-endpoint, --trace-file or the
  // OTEL_* variables); created in Start.
  std::unique_ptr<telemetry::Tracer> tracer;
  const int64_t tick_interval_ns;
  const int64_t ping_interval_ns;

  // ---- loop ----
  http::EventLoop loop;
  std::unique_ptr<http::Server> http;
  std::unique_ptr<http::Timer> tick_timer;
  bool serving = false;  // every engine ready and admitting
  bool loader_done = false;
  bool draining = false;
  bool engines_stopped = false;
  bool stopping = false;
  int64_t drain_deadline_ns = 0;
  uint64_t next_session_id = 1;
  // Requests handed to a prep worker whose answer has not come back yet;
  // shutdown waits for them as for active sessions.
  int preparing = 0;
  std::unordered_map<uint64_t, std::unique_ptr<InferenceSession>> active;
  std::unique_ptr<http::Timer> final_timer;

  // ---- threads and exit ----
  uint16_t port = 0;
  std::thread loop_thread;
  std::thread loader_thread;
  std::atomic<bool> shutdown_requested{false};
  std::mutex exit_mu;
  std::condition_variable exit_cv;
  bool loop_exited = false;  // guarded by exit_mu
  int exit_code = 0;         // written on the loop before it exits
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVER_INTERNAL_H_

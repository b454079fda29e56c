// InferenceServer lifecycle (start, drain, stop), routing, probes,
// /v1/models, /tokenize, /detokenize and /metrics. Loading is in
// model_loader.cc, completion requests in inference_routes.cc.
#include "server/server.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "api/access.h"
#include "api/models.h"
#include "api/tokenize.h"
#include "base/json_escape.h"
#include "base/logging.h"
#include "model/tokenizer/tokenizer.h"
#include "server/http_encoders.h"
#include "server/server_internal.h"
#include "telemetry/process_metrics.h"
#include "telemetry/system_metrics.h"
#include "telemetry/tracer_metrics.h"

namespace redline::server {
namespace json = boost::json;
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
// Requests waiting for a prep worker (parse, render, tokenize) before new
// ones get 503: at ~1 ms each this is well under a second of backlog.
constexpr size_t kMaxQueuedPreparations = 256;
// After the last in-flight response is queued, the listener stays open this
// long so its final bytes reach the socket before connections are closed.
constexpr int64_t kFlushBeforeCloseNs = 100'000'000;
// If cancelled requests have not ended this long after the grace period, the
// server stops anyway (a stuck engine step must not block shutdown forever).
constexpr int64_t kHardStopAfterGraceNs = 5 * kNsPerSecond;

Status WritePortFile(const std::string& path, uint16_t port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return Status::IoError("cannot write " + tmp);
    out << port << "\n";
    if (!out) return Status::IoError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::IoError("cannot rename " + tmp + " to " + path);
  return Status::Ok();
}

std::vector<std::string> ModelNames(const ServerConfig& c) {
  std::vector<std::string> names;
  for (const ModelSpec& m : c.models) names.push_back(m.name);
  return names;
}

}  // namespace

InferenceServer::Impl::Impl(ServerConfig c)
    : config(std::move(c)),
      metrics(registry, config.metrics_prefix, ModelNames(config)),
      session_options{config.max_n, config.sampling, config.request_timeout_s},
      // Two workers keep one large request from delaying every other; more
      // would compete with the engines for the cores.
      prep(std::make_unique<PrepWorkers>(2, kMaxQueuedPreparations)),
      tick_interval_ns(std::clamp<int64_t>(
          static_cast<int64_t>(config.sse_ping_interval_s * kNsPerSecond / 4),
          20'000'000, 500'000'000)),
      ping_interval_ns(
          static_cast<int64_t>(config.sse_ping_interval_s * kNsPerSecond)) {
  telemetry::RegisterProcessMetrics(registry);
  telemetry::RegisterSystemMetrics(registry, config.metrics_prefix);
  registry.AddCollector([this] { RefreshMetrics(); });
  for (size_t i = 0; i < config.models.size(); ++i) {
    models.push_back(
        std::make_unique<ServedModel>(config.models[i], metrics.model(i)));
    models.back()->metrics.SetPhase(Phase::kStarting);
  }
}

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

InferenceServer::InferenceServer(ServerConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}

InferenceServer::~InferenceServer() {
  Impl& s = *impl_;
  if (s.loop_thread.joinable()) {
    s.loop.Post([&s] { s.FinalStop(s.exit_code); });
    s.loop_thread.join();
  }
  // Workers may still post to the (stopped) loop; join them first.
  s.prep.reset();
  if (s.loader_thread.joinable()) s.loader_thread.join();
  for (auto& m : s.models) {
    if (m->engine) m->engine->Stop();
  }
  // Sessions hold streams and writers; drop them while the engines, loop
  // and listener still exist.
  s.active.clear();
  s.tick_timer.reset();
  s.final_timer.reset();
}

Result<uint16_t> InferenceServer::Start() {
  Impl& s = *impl_;
  RL_RETURN_IF_ERROR(CheckModelFiles(s.config));
  {
    telemetry::TracerOptions t;
    t.resource.service_name = "redline-serve";
    for (const std::string& w : telemetry::ApplyOtelEnvironment(&t))
      RL_LOG(kWarning, "serve: {}", w);
    if (!s.config.otlp_endpoint.empty())
      t.otlp_endpoint = s.config.otlp_endpoint;
    t.trace_file = s.config.trace_file;
    if (s.config.trace_sample >= 0) t.sample_ratio = s.config.trace_sample;
    t.keep_slower_than_ms = s.config.trace_slow_ms;
    if (telemetry::TracingEnabled(t)) {
      auto tracer = telemetry::Tracer::Create(std::move(t));
      if (!tracer.ok()) return tracer.status();
      s.tracer = std::move(tracer).value();
      telemetry::AddTracerMetrics(s.registry, s.config.metrics_prefix,
                                  s.tracer.get());
    }
  }
  http::ServerOptions opts;
  // "localhost" as people type it; the listener takes addresses.
  opts.host = s.config.host == "localhost" ? "127.0.0.1" : s.config.host;
  opts.port = static_cast<uint16_t>(s.config.port);
  opts.max_request_bytes = static_cast<size_t>(s.config.max_body_bytes);
  opts.max_connections = static_cast<size_t>(s.config.max_connections);
  auto ms = [](double seconds) { return static_cast<int64_t>(seconds * 1e3); };
  opts.header_timeout_ms = ms(s.config.header_timeout_s);
  opts.body_timeout_ms = ms(s.config.body_timeout_s);
  opts.idle_timeout_ms = ms(s.config.idle_timeout_s);
  opts.write_timeout_ms = ms(s.config.write_timeout_s);
  opts.on_headers = [&s](const http::ServerRequest& head) {
    return s.EarlyAnswer(head);
  };
  opts.on_connection_rejected = [](std::vector<http::Header>* headers,
                                   std::string* body) {
    *body = api::BuildErrorBody(api::ApiError::Unavailable(
        "too many open connections; retry later", 1));
    headers->push_back({"Content-Type", "application/json"});
  };
  opts.on_parse_error = [&s](bool too_large, std::string_view detail,
                             int* status, std::vector<http::Header>* headers,
                             std::string* body) {
    // The http layer chose the status (400, 408, 413, 431, 501); the body
    // is the same OpenAI error object every other answer carries.
    api::ApiError e;
    if (too_large) {
      e = api::ApiError::TooLarge(
          fmt::format("the request is larger than the limit of {} bytes",
                      s.config.max_body_bytes));
    } else {
      e = api::ApiError::BadRequest(
          "malformed HTTP request: " + std::string(detail), "",
          "bad_http_request");
      e.http_status = *status;
      if (*status == 408) e.code = "request_timeout";
      if (*status == 431) e.code = "request_header_fields_too_large";
      if (*status == 501) e.code = "unsupported_transfer_encoding";
    }
    *status = e.http_status;
    *body = api::BuildErrorBody(e);
    headers->push_back({"Content-Type", "application/json"});
    s.metrics.server().RequestError(ErrorClassOf(e)).Increment();
    s.metrics.server().CountHttp(Endpoint::kOther, e.http_status);
  };
  s.http = std::make_unique<http::Server>(
      s.loop, opts,
      [&s](http::ServerRequest&& r, std::shared_ptr<http::ResponseWriter> w) {
        s.Handle(std::move(r), std::move(w));
      });
  RL_ASSIGN_OR_RETURN(s.port, s.http->Start());
  if (!s.config.port_file.empty())
    RL_RETURN_IF_ERROR(WritePortFile(s.config.port_file, s.port));
  std::vector<std::string> names;
  for (const auto& m : s.models) names.push_back("'" + m->spec.name + "'");
  RL_LOG(kInfo,
         "serve: listening on http://{}:{} (model {} load{} in the background)",
         s.config.host, s.port, fmt::join(names, ", "),
         names.size() == 1 ? "s" : "");
  s.loop.Post([&s] {
    s.tick_timer = std::make_unique<http::Timer>(s.loop);
    s.Tick();
  });
  s.loop_thread = std::thread([&s] {
    s.loop.Run();
    {
      std::lock_guard<std::mutex> lock(s.exit_mu);
      s.loop_exited = true;
    }
    s.exit_cv.notify_all();
  });
  s.loader_thread = std::thread([&s] { s.LoaderMain(); });
  return s.port;
}

void InferenceServer::Shutdown() {
  Impl& s = *impl_;
  if (s.shutdown_requested.exchange(true)) return;
  s.loop.Post([&s] { s.BeginDrain(); });
}

int InferenceServer::Wait() {
  Impl& s = *impl_;
  {
    std::unique_lock<std::mutex> lock(s.exit_mu);
    s.exit_cv.wait(lock, [&] { return s.loop_exited; });
  }
  if (s.loop_thread.joinable()) s.loop_thread.join();
  if (s.loader_thread.joinable()) s.loader_thread.join();
  for (auto& m : s.models) {
    if (m->engine) m->engine->Stop();
  }
  return s.exit_code;
}

uint16_t InferenceServer::port() const { return impl_->port; }
StartupSnapshot InferenceServer::startup() const {
  return impl_->startup.Snapshot();
}

engine::EngineStats InferenceServer::engine_stats(size_t model) const {
  if (model >= impl_->models.size()) return {};
  engine::Engine* e = impl_->models[model]->engine_for_stats.load();
  return e != nullptr ? e->Stats() : engine::EngineStats{};
}

void InferenceServer::Impl::BeginDrain() {
  if (draining || stopping) return;
  draining = true;
  serving = false;
  if (startup.phase() != Phase::kFailed) {
    startup.SetPhase(Phase::kDraining);
    for (auto& m : models) {
      if (m->startup.phase() != Phase::kFailed) {
        m->startup.SetPhase(Phase::kDraining);
        m->metrics.SetPhase(Phase::kDraining);
      }
    }
  }
  drain_deadline_ns =
      http::NowNs() +
      static_cast<int64_t>(config.shutdown_grace_s * kNsPerSecond);
  RL_LOG(kInfo, "serve: shutting down: {} request(s) in flight, grace {:.0f} s",
         active.size(), config.shutdown_grace_s);
  CheckDrain();
}

void InferenceServer::Impl::CheckDrain() {
  if (!draining || stopping) return;
  if (!loader_done) return;  // the loader cannot be interrupted; Tick retries
  const int64_t now = http::NowNs();
  if (active.empty() && preparing == 0) {
    FinalStop(exit_code);
    return;
  }
  if (now >= drain_deadline_ns && !engines_stopped) {
    RL_LOG(kWarning, "serve: grace period over; cancelling {} request(s)",
           active.size());
    engines_stopped = true;
    // Every in-flight request ends with kCancelled "server shutting down".
    for (auto& m : models) {
      if (m->engine) m->engine->Stop();
    }
  }
  if (now >= drain_deadline_ns + kHardStopAfterGraceNs) FinalStop(exit_code);
}

void InferenceServer::Impl::FinalStop(int code) {
  if (stopping) return;
  stopping = true;
  serving = false;
  exit_code = code;
  final_timer = std::make_unique<http::Timer>(loop);
  final_timer->ExpireAfter(active.empty() ? kFlushBeforeCloseNs : 0, [this] {
    if (tick_timer) tick_timer->Cancel();
    if (http) http->Stop();
    loop.Stop();
  });
}

void InferenceServer::Impl::Tick() {
  if (stopping) return;
  const int64_t now = http::NowNs();
  for (auto& [id, session] : active) session->sink().OnTick(now);
  if (draining) CheckDrain();
  if (!stopping) tick_timer->ExpireAfter(tick_interval_ns, [this] { Tick(); });
}

void InferenceServer::Impl::RefreshMetrics() {
  if (http) {
    const http::ServerStats hs = http->stats();
    metrics.connections_open->Set(static_cast<double>(hs.connections_open));
    metrics.connections_rejected->SetTotal(
        static_cast<double>(hs.connections_rejected));
    metrics.connection_timeouts->SetTotal(static_cast<double>(hs.timeouts));
    metrics.write_overflows->SetTotal(static_cast<double>(hs.write_overflows));
  }
  for (auto& mp : models) {
    ServedModel& sm = *mp;
    ModelMetrics& mm = sm.metrics;
    const StartupSnapshot s = sm.startup.Snapshot();
    mm.SetPhase(s.phase);
    mm.load_progress->Set(s.progress);
    if (s.load_s >= 0) mm.load_time->Set(s.load_s);
    if (s.warmup_s >= 0) mm.warmup_time->Set(s.warmup_s);
    if (s.startup_s >= 0) mm.startup_time->Set(s.startup_s);
    int open = 0;
    for (const auto& [id, session] : active) open += &session->model() == &sm;
    mm.streams_open->Set(open);
    engine::Engine* e = sm.engine_for_stats.load();
    if (e == nullptr) continue;
    const engine::EngineStats st = e->Stats();
    mm.running->Set(st.running);
    mm.waiting->Set(st.waiting);
    mm.waiting_prompt_tokens->Set(
        static_cast<double>(st.waiting_prompt_tokens));
    mm.kv_cache_usage->Set(st.kv_usage());
    mm.prefix_cache_queries->SetTotal(
        static_cast<double>(st.prefix_cache_queries_tokens));
    mm.prefix_cache_hits->SetTotal(
        static_cast<double>(st.prefix_cache_hits_tokens));
    mm.spec_draft_tokens->SetTotal(static_cast<double>(st.spec_draft_tokens));
    mm.spec_accepted_tokens->SetTotal(
        static_cast<double>(st.spec_accepted_tokens));
    mm.engine_busy_seconds->SetTotal(st.busy_seconds);
    if (sm.pool) {
      mm.pool_busy_seconds->SetTotal(static_cast<double>(sm.pool->busy_ns()) /
                                     1e9);
      mm.pool_threads->Set(sm.pool->num_threads());
    }
    for (size_t i = 0; i < mm.engine_stage_seconds.size(); ++i)
      mm.engine_stage_seconds[i]->SetTotal(st.stage_seconds[i]);
    mm.spec_drafts->SetTotal(static_cast<double>(st.spec_drafts));
    mm.spec_acceptance_rate->Set(
        st.spec_draft_tokens > 0
            ? static_cast<double>(st.spec_accepted_tokens) /
                  static_cast<double>(st.spec_draft_tokens)
            : 0.0);
    mm.spec_tokens_per_pass->Set(
        st.spec_drafts > 0
            ? 1.0 + static_cast<double>(st.spec_accepted_tokens) /
                        static_cast<double>(st.spec_drafts)
            : 0.0);
    const engine::EngineOptions& o = e->options();
    mm.cache_config_info
        ->Labels({sm.spec.name, "1", std::to_string(st.kv_capacity_tokens),
                  std::to_string(o.parallel), std::to_string(o.n_ctx)})
        .Set(1);
  }
}

// ---------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------

void InferenceServer::Impl::Handle(
    http::ServerRequest&& request,
    std::shared_ptr<http::ResponseWriter> writer) {
  // Handlers never throw; this is the boundary where a stray exception
  // (bad_alloc, a library bug) becomes a 500 instead of a dead server.
  try {
    Route(request, writer);
  } catch (const std::exception& e) {
    RL_LOG(kError, "serve: {} {}: internal error: {}", request.method,
           request.target, e.what());
    ReplyError(Endpoint::kOther, request, *writer,
               api::ApiError::Internal("internal error"));
  } catch (...) {
    RL_LOG(kError, "serve: {} {}: internal error", request.method,
           request.target);
    ReplyError(Endpoint::kOther, request, *writer,
               api::ApiError::Internal("internal error"));
  }
}

// GET /: what a person (or a probe) finds at the root, instead of a 404
// that would count as a request error.
std::string InferenceServer::Impl::IndexBody() {
  json::object o;
  o["service"] = "redline";
  o["api"] = "OpenAI-compatible";
  json::array endpoints;
  const std::pair<const char*, const char*> kEndpoints[] = {
      {"POST /v1/chat/completions", "chat completions (stream or not)"},
      {"POST /v1/completions", "text completions"},
      {"GET /v1/models", "served models"},
      {"POST /tokenize", "text to token ids"},
      {"POST /detokenize", "token ids to text"},
      {"GET /health", "liveness and readiness, llama.cpp style"},
      {"GET /livez", "process alive"},
      {"GET /readyz", "ready to serve (200) or not (503)"},
      {"GET /startupz", "start-up phases and timings"},
      {"GET /metrics", "Prometheus metrics"},
  };
  for (const auto& [route, what] : kEndpoints)
    endpoints.push_back(json::object{{"route", route}, {"description", what}});
  o["endpoints"] = std::move(endpoints);
  return json::serialize(o);
}

InferenceServer::Impl::RouteInfo InferenceServer::Impl::Classify(
    std::string_view path) {
  if (path == "/v1/chat/completions" || path == "/chat/completions")
    return {Endpoint::kChatCompletions, true, true};
  if (path == "/v1/completions" || path == "/completions")
    return {Endpoint::kCompletions, true, true};
  if (path == "/v1/models" || path == "/models" ||
      path.starts_with("/v1/models/") || path.starts_with("/models/"))
    return {Endpoint::kModels, false, true};
  if (path == "/tokenize") return {Endpoint::kTokenize, true, true};
  if (path == "/detokenize") return {Endpoint::kDetokenize, true, true};
  if (path == "/health" || path == "/v1/health")
    return {Endpoint::kHealth, false, false};
  if (path == "/livez") return {Endpoint::kLivez, false, false};
  if (path == "/readyz") return {Endpoint::kReadyz, false, false};
  if (path == "/startupz") return {Endpoint::kStartupz, false, false};
  if (path == "/metrics") return {Endpoint::kMetrics, false, false};
  if (path == "/") return {Endpoint::kIndex, false, false};
  return {Endpoint::kOther, false, false};
}

std::optional<api::ApiError> InferenceServer::Impl::Refusal(
    const http::ServerRequest& head, const RouteInfo& info) const {
  return api::RouteRefusal(
      head.method, head.Path(),
      {info.endpoint != Endpoint::kOther, info.is_post, info.needs_key},
      !info.needs_key || Authorized(head));
}

std::optional<http::EarlyResponse> InferenceServer::Impl::EarlyAnswer(
    const http::ServerRequest& head) {
  const RouteInfo info = Classify(head.Path());
  std::optional<api::ApiError> e = Refusal(head, info);
  if (!e) return std::nullopt;
  // Refused before the body is read: an unauthenticated client cannot make
  // the server hold its body.
  metrics.server().RequestError(ErrorClassOf(*e)).Increment();
  metrics.server().CountHttp(info.endpoint, e->http_status);
  http::EarlyResponse r;
  r.status = e->http_status;
  r.headers = ErrorHeaders(*e, {});
  r.body = api::BuildErrorBody(*e);
  return r;
}

void InferenceServer::Impl::Route(
    http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& w) {
  const std::string_view path = request.Path();
  const RouteInfo info = Classify(path);
  if (std::optional<api::ApiError> e = Refusal(request, info)) {
    ReplyError(info.endpoint, request, *w, *e);
    return;
  }
  switch (info.endpoint) {
    case Endpoint::kChatCompletions:
      HandleInference(api::ApiKind::kChat, request, w);
      return;
    case Endpoint::kCompletions:
      HandleInference(api::ApiKind::kCompletions, request, w);
      return;
    case Endpoint::kModels: {
      std::string_view id = path.substr(path.starts_with("/v1/") ? 3 : 0);
      id = id.size() > 8 ? id.substr(8) : std::string_view();  // "/models/"
      HandleModels(request, *w, id);
      return;
    }
    case Endpoint::kTokenize:
    case Endpoint::kDetokenize:
      OffLoop(info.endpoint, request, w);
      return;
    case Endpoint::kHealth:
      HandleHealth(request, *w);
      return;
    case Endpoint::kLivez: {
      json::object o;
      o["status"] = "alive";
      o["phase"] = PhaseName(startup.phase());
      Reply(Endpoint::kLivez, request, *w, 200, json::serialize(o));
      return;
    }
    case Endpoint::kReadyz: {
      json::object o;
      const Phase ph = startup.phase();
      const bool ready = serving && ph == Phase::kReady;
      o["status"] = ready ? "ready" : "not ready";
      o["phase"] = PhaseName(ph);
      Reply(Endpoint::kReadyz, request, *w, ready ? 200 : 503,
            json::serialize(o));
      return;
    }
    case Endpoint::kStartupz:
      HandleStartupz(request, *w);
      return;
    case Endpoint::kMetrics:
      HandleMetrics(request, *w);
      return;
    case Endpoint::kIndex:
      Reply(Endpoint::kIndex, request, *w, 200, IndexBody());
      return;
    case Endpoint::kOther:
      return;
  }
}

bool InferenceServer::Impl::Authorized(
    const http::ServerRequest& request) const {
  return api::ApiKeyAccepted(request.HeaderValue("X-Api-Key"),
                             request.HeaderValue("Authorization"),
                             config.api_keys);
}

void InferenceServer::Impl::Reply(Endpoint endpoint,
                                  const http::ServerRequest& request,
                                  http::ResponseWriter& writer, int status,
                                  std::string body,
                                  std::vector<http::Header> extra,
                                  std::string_view content_type,
                                  ModelMetrics* mm) {
  extra.push_back({"Content-Type", std::string(content_type)});
  if (std::string_view rid = request.HeaderValue("X-Request-Id");
      !rid.empty() && rid.size() <= 256) {
    extra.push_back({"X-Request-Id", std::string(rid)});
  }
  (mm != nullptr ? *mm : metrics.server()).CountHttp(endpoint, status);
  writer.Respond(status, std::move(extra), std::move(body));
}

void InferenceServer::Impl::ReplyError(Endpoint endpoint,
                                       const http::ServerRequest& request,
                                       http::ResponseWriter& writer,
                                       const api::ApiError& error,
                                       ModelMetrics* mm) {
  std::vector<http::Header> extra;
  if (error.retry_after_s > 0)
    extra.push_back({"Retry-After", std::to_string(error.retry_after_s)});
  if (error.http_status == 401) extra.push_back({"WWW-Authenticate", "Bearer"});
  (mm != nullptr ? *mm : metrics.server())
      .RequestError(ErrorClassOf(error))
      .Increment();
  if (error.http_status >= 500 && error.http_status != 503) {
    RL_LOG(kError, "serve: {} {} -> {}: {}", request.method, request.Path(),
           error.http_status, error.message);
  }
  Reply(endpoint, request, writer, error.http_status,
        api::BuildErrorBody(error), std::move(extra), "application/json", mm);
}

api::ApiError InferenceServer::Impl::NotServingError() const {
  switch (startup.phase()) {
    case Phase::kStarting:
    case Phase::kLoading:
      return api::ApiError::Unavailable("Loading model",
                                        startup.EstimatedSecondsToReady());
    case Phase::kWarming:
      return api::ApiError::Unavailable("Warming up", 1);
    case Phase::kDraining:
      return api::ApiError::Unavailable("Server is shutting down");
    case Phase::kFailed:
      return api::ApiError::Unavailable("Model failed to load: " +
                                        startup.Snapshot().error);
    case Phase::kReady:
      break;
  }
  return api::ApiError::Unavailable("Server is shutting down");
}

ServedModel* InferenceServer::Impl::FindModel(std::string_view name,
                                              api::ApiError* error) {
  if (name.empty()) return models.front().get();
  for (auto& m : models) {
    if (m->Answers(name)) return m.get();
  }
  std::vector<std::string> served;
  for (const auto& m : models) served.push_back("'" + m->spec.name + "'");
  *error = api::ApiError::NotFound(
      fmt::format("The model '{}' does not exist; this server serves {}",
                  name.substr(0, 256), fmt::join(served, ", ")),
      "model", "model_not_found");
  return nullptr;
}

// ---------------------------------------------------------------------------
// Probes and small routes
// ---------------------------------------------------------------------------

void InferenceServer::Impl::HandleHealth(const http::ServerRequest& request,
                                         http::ResponseWriter& writer) {
  if (serving) {
    Reply(Endpoint::kHealth, request, writer, 200, R"({"status":"ok"})");
    return;
  }
  // llama.cpp's exact shape (numeric code), which existing probes parse.
  const api::ApiError e = NotServingError();
  std::vector<http::Header> extra;
  if (e.retry_after_s > 0)
    extra.push_back({"Retry-After", std::to_string(e.retry_after_s)});
  Reply(Endpoint::kHealth, request, writer, 503,
        api::BuildNumericCodeErrorBody(e), std::move(extra));
}

namespace {

// The members of one start-up snapshot, written by hand so that numbers
// print as plain decimals ("progress":0.5), not as Boost.JSON writes
// doubles (5E-1), which people read in curl and scripts parse with grep.
std::string StartupMembers(const StartupSnapshot& s) {
  auto secs = [](double v) { return fmt::format("{:.3f}", v < 0 ? 0.0 : v); };
  std::string out = fmt::format(
      "\"phase\":{},\"progress\":{:.4f},\"load_progress\":{:.4f},"
      "\"elapsed_s\":{}",
      JsonQuote(PhaseName(s.phase)), s.progress, s.load_progress,
      secs(s.elapsed_s));
  if (s.load_s >= 0) out += ",\"load_s\":" + secs(s.load_s);
  if (s.warmup_s >= 0) out += ",\"warmup_s\":" + secs(s.warmup_s);
  if (s.startup_s >= 0) out += ",\"startup_s\":" + secs(s.startup_s);
  if (!s.error.empty()) out += ",\"error\":" + JsonQuote(s.error);
  return out;
}

}  // namespace

void InferenceServer::Impl::HandleStartupz(const http::ServerRequest& request,
                                           http::ResponseWriter& writer) {
  const StartupSnapshot s = startup.Snapshot();
  std::string body = "{" + StartupMembers(s) +
                     ",\"model\":" + JsonQuote(models.front()->spec.name) +
                     ",\"models\":[";
  for (size_t i = 0; i < models.size(); ++i) {
    if (i > 0) body += ",";
    body += "{\"name\":" + JsonQuote(models[i]->spec.name) + "," +
            StartupMembers(models[i]->startup.Snapshot()) + "}";
  }
  body += "]}";
  const bool started = s.phase == Phase::kReady || s.phase == Phase::kDraining;
  Reply(Endpoint::kStartupz, request, writer, started ? 200 : 503,
        std::move(body));
}

void InferenceServer::Impl::HandleModels(const http::ServerRequest& request,
                                         http::ResponseWriter& writer,
                                         std::string_view id) {
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  std::vector<api::ModelCard> cards;
  for (const auto& m : models) {
    api::ModelCard card;
    card.id = m->spec.name;
    card.created = now_s;
    card.aliases = m->spec.aliases;
    if (m->loaded && m->model) {
      // Like llama.cpp: details once loaded, null before.
      const model::ModelConfig& c = m->model->config();
      card.meta = api::ModelMeta{c.vocab_size,
                                 c.context_length_train,
                                 m->n_ctx,
                                 c.embedding_length,
                                 c.block_count,
                                 c.arch_name,
                                 m->model->WeightTypeSummary()};
    }
    if (id.empty() || m->Answers(id)) cards.push_back(std::move(card));
  }
  if (id.empty()) {
    Reply(Endpoint::kModels, request, writer, 200, api::BuildModelList(cards));
    return;
  }
  if (cards.empty()) {
    api::ApiError e;
    FindModel(id, &e);
    ReplyError(Endpoint::kModels, request, writer, e);
    return;
  }
  Reply(Endpoint::kModels, request, writer, 200, api::BuildModel(cards[0]));
}

InferenceServer::Impl::Answer InferenceServer::Impl::Tokenize(
    const std::string& request_body) {
  std::string param;
  auto parsed = api::ParseTokenizeRequest(request_body, &param);
  if (!parsed.ok()) {
    return Answer::Error(
        api::ApiError::BadRequest(parsed.status().message(), param));
  }
  // llama.cpp's shape names no model: then the first one.
  api::ApiError not_found;
  ServedModel* m = FindModel(parsed->model, &not_found);
  if (m == nullptr) {
    return Answer::Error(not_found);
  }
  if (!m->Ready()) {
    return Answer::Error(NotServingError());
  }
  const model::Tokenizer& tok = *m->model->tokenizer();
  std::vector<int32_t> ids;
  if (!parsed->messages.empty()) {
    auto t = m->chat->ChatTokens(api::MessagesToJson(parsed->messages), {});
    if (!t.ok()) {
      return Answer::Error(
          api::ApiError::BadRequest(t.status().message(), "messages"));
    }
    ids = std::move(t).value();
  } else {
    ids = tok.Encode(parsed->text, parsed->add_special,
                     /*parse_special=*/true);
  }
  std::vector<std::string> pieces;
  if (parsed->with_pieces) {
    pieces.reserve(ids.size());
    for (int32_t id : ids) pieces.push_back(tok.TokenToPiece(id));
  }
  auto body = api::BuildTokenizeResponse(
      ids, parsed->with_pieces ? &pieces : nullptr, m->n_ctx,
      static_cast<size_t>(config.max_body_bytes) * 2);
  if (!body.ok()) {
    return Answer::Error(api::ApiError::TooLarge(body.status().message()));
  }
  return Answer::Ok(std::move(body).value());
}

InferenceServer::Impl::Answer InferenceServer::Impl::Detokenize(
    const std::string& request_body) {
  api::ApiError not_found;
  ServedModel* m = FindModel("", &not_found);
  if (!m->Ready()) {
    return Answer::Error(NotServingError());
  }
  const model::Tokenizer& tok = *m->model->tokenizer();
  auto parsed = api::ParseDetokenizeRequest(request_body);
  if (!parsed.ok()) {
    return Answer::Error(
        api::ApiError::BadRequest(parsed.status().message(), "tokens"));
  }
  std::vector<int32_t> ids;
  ids.reserve(parsed->size());
  for (int64_t id : *parsed) {
    if (id >= tok.vocab_size()) {
      return Answer::Error(api::ApiError::BadRequest(
          fmt::format("'tokens' must hold token ids in [0, {})",
                      tok.vocab_size()),
          "tokens"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  auto body = api::BuildDetokenizeResponse(
      tok.Decode(ids, /*skip_special=*/false),
      static_cast<size_t>(config.max_body_bytes) * 2);
  if (!body.ok()) {
    return Answer::Error(api::ApiError::TooLarge(body.status().message()));
  }
  return Answer::Ok(std::move(body).value());
}

void InferenceServer::Impl::OffLoop(
    Endpoint endpoint, http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& writer) {
  auto req = std::make_shared<http::ServerRequest>(std::move(request));
  ++preparing;
  const bool queued = prep->TrySubmit([this, endpoint, req, writer] {
    auto answer = std::make_shared<Answer>(endpoint == Endpoint::kTokenize
                                               ? Tokenize(req->body)
                                               : Detokenize(req->body));
    loop.Post([this, endpoint, req, writer, answer] {
      --preparing;
      if (answer->error) {
        ReplyError(endpoint, *req, *writer, *answer->error);
      } else {
        Reply(endpoint, *req, *writer, 200, std::move(answer->body));
      }
      if (draining) CheckDrain();
    });
  });
  if (!queued) {
    --preparing;
    ReplyError(
        endpoint, *req, *writer,
        api::ApiError::Unavailable(
            "the server is busy preparing other requests; retry later", 1));
  }
}

void InferenceServer::Impl::HandleMetrics(const http::ServerRequest& request,
                                          http::ResponseWriter& writer) {
  // Counted before rendering, so the scrape sees itself.
  metrics.server().CountHttp(Endpoint::kMetrics, 200);
  std::vector<http::Header> h{
      {"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}};
  writer.Respond(200, std::move(h), registry.RenderText());
}

}  // namespace redline::server

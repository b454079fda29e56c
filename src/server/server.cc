// InferenceServer lifecycle (load, warm-up, drain, stop), routing, probes,
// /v1/models, /tokenize, /detokenize and /metrics. Inference requests are in
// exchange.cc.
#include "server/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "base/logging.h"
#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "server/server_internal.h"
#include "telemetry/process_metrics.h"

namespace redline::server {
namespace json = boost::json;
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
// After the last in-flight response is queued, the listener stays open this
// long so its final bytes reach the socket before connections are closed.
constexpr int64_t kFlushBeforeCloseNs = 100'000'000;
// If cancelled requests have not ended this long after the grace period, the
// server stops anyway (a stuck engine step must not block shutdown forever).
constexpr int64_t kHardStopAfterGraceNs = 5 * kNsPerSecond;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

std::string ProgressBar(double p) {
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(p * kWidth + 0.5);
  return std::string(filled, '#') + std::string(kWidth - filled, '.');
}

// Constant-time string comparison (API keys).
bool SecretEquals(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

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

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

}  // namespace

InferenceServer::Impl::Impl(ServerConfig c)
    : config(std::move(c)),
      model_name(ServedModelName(config)),
      metrics(registry, config.metrics_prefix, model_name),
      tick_interval_ns(std::clamp<int64_t>(
          static_cast<int64_t>(config.sse_ping_interval_s * kNsPerSecond / 4),
          20'000'000, 500'000'000)),
      ping_interval_ns(
          static_cast<int64_t>(config.sse_ping_interval_s * kNsPerSecond)) {
  telemetry::RegisterProcessMetrics(registry);
  registry.AddCollector([this] { RefreshMetrics(); });
  metrics.SetPhase(Phase::kStarting);
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
  if (s.loader_thread.joinable()) s.loader_thread.join();
  if (s.engine) s.engine->Stop();
  // Exchanges hold streams and writers; drop them while the engine, loop
  // and listener still exist.
  s.active.clear();
  s.tick_timer.reset();
  s.final_timer.reset();
}

Result<uint16_t> InferenceServer::Start() {
  Impl& s = *impl_;
  http::ServerOptions opts;
  opts.host = s.config.host;
  opts.port = static_cast<uint16_t>(s.config.port);
  opts.max_request_bytes = static_cast<size_t>(s.config.max_body_bytes);
  opts.on_parse_error = [&s](bool too_large, std::string_view detail,
                             int* status, std::vector<http::Header>* headers,
                             std::string* body) {
    const ApiError e =
        too_large ? ApiError::TooLarge(fmt::format(
                        "the request is larger than the limit of {} bytes",
                        s.config.max_body_bytes))
                  : ApiError::BadRequest(
                        "malformed HTTP request: " + std::string(detail), "",
                        "bad_http_request");
    *status = e.http_status;
    *body = ApiErrorJson(e);
    headers->push_back({"Content-Type", "application/json"});
    s.metrics.RequestError(e.error_class).Increment();
    s.metrics.CountHttp(Endpoint::kOther, e.http_status);
  };
  s.http = std::make_unique<http::Server>(
      s.loop, opts,
      [&s](http::ServerRequest&& r, std::shared_ptr<http::ResponseWriter> w) {
        s.Handle(std::move(r), std::move(w));
      });
  RL_ASSIGN_OR_RETURN(s.port, s.http->Start());
  if (!s.config.port_file.empty())
    RL_RETURN_IF_ERROR(WritePortFile(s.config.port_file, s.port));
  RL_LOG(
      kInfo,
      "serve: listening on http://{}:{} (model '{}' loads in the background)",
      s.config.host, s.port, s.model_name);
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
  if (s.engine) s.engine->Stop();
  return s.exit_code;
}

uint16_t InferenceServer::port() const { return impl_->port; }
StartupSnapshot InferenceServer::startup() const {
  return impl_->startup.Snapshot();
}

engine::EngineStats InferenceServer::engine_stats() const {
  engine::Engine* e = impl_->engine_for_stats.load();
  return e != nullptr ? e->Stats() : engine::EngineStats{};
}

void InferenceServer::Impl::LoaderMain() {
  const auto t_start = std::chrono::steady_clock::now();
  startup.SetPhase(Phase::kLoading);
  model::LoadOptions lo;
  lo.mlock = config.mlock;
  lo.prefetch = true;
  lo.repack = !config.no_repack;
  lo.threads = config.threads;
  int last_decile = -1;
  lo.progress = [&](double p) {
    startup.SetLoadProgress(p);
    const int decile = static_cast<int>(p * 10);
    if (decile != last_decile) {
      last_decile = decile;
      RL_LOG(kInfo, "serve: loading [{}] {:3.0f}% {:.1f} s", ProgressBar(p),
             p * 100, SecondsSince(t_start));
    }
    if (config.load_step_delay_ms_for_test > 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(config.load_step_delay_ms_for_test));
    }
  };
  auto fail = [this](std::string why) {
    RL_LOG(kError, "serve: {}", why);
    startup.Fail(why);
    loop.Post([this, why] { OnLoadFailed(why); });
  };
  auto loaded = model::Model::Load(config.model_path, lo);
  if (!loaded.ok())
    return fail("loading the model failed: " + loaded.status().ToString());
  model = std::move(loaded).value();
  const double load_s = SecondsSince(t_start);
  startup.SetLoadSeconds(load_s);

  // Chat template: --chat-template-file, --chat-template NAME, else the
  // model's.
  std::string source, origin;
  if (!config.chat_template_file.empty()) {
    auto text = ReadWholeFile(config.chat_template_file);
    if (!text.ok())
      return fail("--chat-template-file: " + text.status().message());
    source = std::move(text).value();
    origin = "file " + config.chat_template_file;
  } else if (!config.chat_template_name.empty()) {
    auto text = model::chat::BuiltinChatTemplate(config.chat_template_name);
    if (!text.ok()) return fail("--chat-template: " + text.status().message());
    source = std::move(text).value();
    origin = "builtin:" + config.chat_template_name;
  }
  auto chat_prompt = ChatPrompt::Create(*model, source, origin);
  if (!chat_prompt.ok()) return fail(chat_prompt.status().ToString());
  chat = std::move(chat_prompt).value();

  const int64_t train_ctx = model->config().context_length_train;
  n_ctx = config.ctx_tokens > 0
              ? config.ctx_tokens
              : (train_ctx > 0 ? std::min<int64_t>(train_ctx, 4096) : 4096);
  pool = std::make_unique<ThreadPool>(config.threads);
  engine::EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.parallel = config.parallel;
  eo.max_batch_tokens = config.batch_tokens;
  eo.max_waiting_requests = config.max_queued_requests;
  eo.max_waiting_prompt_tokens = config.max_queued_tokens;
  eo.prefix_cache = !config.no_prefix_cache;
  eo.kv_type =
      config.kv_type == "f32" ? model::KvType::kF32 : model::KvType::kF16;
  engine = std::make_unique<engine::Engine>(*model, *pool, eo);
  engine_for_stats.store(engine.get());
  RL_LOG(
      kInfo,
      "serve: loaded {} ({}, {} layers, vocab {}) in {:.2f} s; {} threads, {} "
      "slots x {} tokens, chat "
      "template: {}",
      model->config().name.empty() ? config.model_path : model->config().name,
      model->WeightTypeSummary(), model->config().block_count,
      model->config().vocab_size, load_s, pool->num_threads(), eo.parallel,
      n_ctx, chat->origin());

  startup.SetPhase(Phase::kWarming);
  if (!config.no_warmup && !shutdown_requested.load()) {
    const auto t_warm = std::chrono::steady_clock::now();
    std::string error;
    if (!WarmUp(&error)) return fail("warm-up failed: " + error);
    startup.SetWarmupSeconds(SecondsSince(t_warm));
    RL_LOG(kInfo, "serve: warm-up done in {:.2f} s", SecondsSince(t_warm));
  } else {
    startup.SetWarmupSeconds(0);
  }
  loop.Post([this] { OnLoaded(); });
}

// Runs a short generation on min(2, slots) sequences at once, so the first
// user request finds the weights paged in, the kernels' scratch allocated and
// the batched decode path exercised.
bool InferenceServer::Impl::WarmUp(std::string* error) {
  std::vector<int32_t> prompt;
  if (const model::Tokenizer* tok = model->tokenizer()) {
    prompt =
        tok->Encode("Warm-up: the quick brown fox jumps over the lazy dog.",
                    /*add_special=*/true,
                    /*parse_special=*/false);
  }
  if (prompt.empty()) {
    for (int32_t i = 0; i < 8 && i < model->config().vocab_size; ++i)
      prompt.push_back(i);
  }
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (int i = 0; i < std::min(2, config.parallel); ++i) {
    engine::EngineRequest r;
    r.prompt = prompt;
    if (static_cast<int64_t>(r.prompt.size()) + 8 >= n_ctx)
      r.prompt.resize(std::max<int64_t>(1, n_ctx / 2));
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 4;
    r.sampling.ignore_eos = true;
    auto s = engine->Submit(std::move(r));
    if (!s.ok()) {
      *error = s.status().ToString();
      return false;
    }
    streams.push_back(*s);
  }
  for (auto& s : streams) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::minutes(5);
    for (;;) {
      engine::RequestEvent e;
      if (!s->Pop(&e, std::chrono::milliseconds(200))) {
        if (std::chrono::steady_clock::now() > deadline) {
          *error = "no answer within 5 minutes";
          return false;
        }
        continue;
      }
      if (e.type == engine::RequestEvent::Type::kDone) break;
      if (e.type == engine::RequestEvent::Type::kError) {
        *error = e.status.ToString();
        return false;
      }
    }
  }
  return true;
}

void InferenceServer::Impl::OnLoaded() {
  loader_done = true;
  if (draining) {
    CheckDrain();
    return;
  }
  serving = true;
  startup.SetPhase(Phase::kReady);
  metrics.SetPhase(Phase::kReady);
  const StartupSnapshot s = startup.Snapshot();
  RL_LOG(kInfo,
         "serve: ready at http://{}:{} — model '{}' (load {:.2f} s, warm-up "
         "{:.2f} s, start-up {:.2f} s)",
         config.host, port, model_name, s.load_s, s.warmup_s, s.startup_s);
}

void InferenceServer::Impl::OnLoadFailed(std::string why) {
  loader_done = true;
  metrics.SetPhase(Phase::kFailed);
  if (config.exit_on_load_failure) {
    FinalStop(1);
  } else if (draining) {
    CheckDrain();
  }
}

void InferenceServer::Impl::BeginDrain() {
  if (draining || stopping) return;
  draining = true;
  serving = false;
  if (startup.phase() != Phase::kFailed) {
    startup.SetPhase(Phase::kDraining);
    metrics.SetPhase(Phase::kDraining);
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
  if (active.empty()) {
    FinalStop(exit_code);
    return;
  }
  if (now >= drain_deadline_ns && !engine_stopped && engine) {
    RL_LOG(kWarning, "serve: grace period over; cancelling {} request(s)",
           active.size());
    engine_stopped = true;
    engine->Stop();  // every in-flight request ends with kCancelled "server
                     // shutting down"
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
  for (auto& [id, ex] : active) ex->MaybePing(now, ping_interval_ns);
  if (draining) CheckDrain();
  if (!stopping) tick_timer->ExpireAfter(tick_interval_ns, [this] { Tick(); });
}

void InferenceServer::Impl::RefreshMetrics() {
  const StartupSnapshot s = startup.Snapshot();
  metrics.SetPhase(s.phase);
  metrics.load_progress->Set(s.progress);
  if (s.load_s >= 0) metrics.load_time->Set(s.load_s);
  if (s.warmup_s >= 0) metrics.warmup_time->Set(s.warmup_s);
  if (s.startup_s >= 0) metrics.startup_time->Set(s.startup_s);
  metrics.streams_open->Set(static_cast<double>(active.size()));
  engine::Engine* e = engine_for_stats.load();
  if (e == nullptr) return;
  const engine::EngineStats st = e->Stats();
  metrics.running->Set(st.running);
  metrics.waiting->Set(st.waiting);
  metrics.waiting_prompt_tokens->Set(
      static_cast<double>(st.waiting_prompt_tokens));
  metrics.kv_cache_usage->Set(st.kv_usage());
  metrics.prefix_cache_queries->SetTotal(
      static_cast<double>(st.prefix_cache_queries_tokens));
  metrics.prefix_cache_hits->SetTotal(
      static_cast<double>(st.prefix_cache_hits_tokens));
  const engine::EngineOptions& o = e->options();
  metrics.cache_config_info
      ->Labels({model_name, "1", std::to_string(st.kv_capacity_tokens),
                std::to_string(o.parallel), std::to_string(o.n_ctx)})
      .Set(1);
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
               ApiError::Internal("internal error"));
  } catch (...) {
    RL_LOG(kError, "serve: {} {}: internal error", request.method,
           request.target);
    ReplyError(Endpoint::kOther, request, *writer,
               ApiError::Internal("internal error"));
  }
}

void InferenceServer::Impl::Route(
    http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& w) {
  const std::string_view path = request.Path();
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  struct RouteInfo {
    Endpoint endpoint;
    bool is_post;
    bool needs_key;
  };
  RouteInfo info{Endpoint::kOther, false, false};
  if (path == "/v1/chat/completions" || path == "/chat/completions") {
    info = {Endpoint::kChatCompletions, true, true};
  } else if (path == "/v1/completions" || path == "/completions") {
    info = {Endpoint::kCompletions, true, true};
  } else if (path == "/v1/models" || path == "/models") {
    info = {Endpoint::kModels, false, true};
  } else if (path == "/tokenize") {
    info = {Endpoint::kTokenize, true, true};
  } else if (path == "/detokenize") {
    info = {Endpoint::kDetokenize, true, true};
  } else if (path == "/health" || path == "/v1/health") {
    info = {Endpoint::kHealth, false, false};
  } else if (path == "/livez") {
    info = {Endpoint::kLivez, false, false};
  } else if (path == "/readyz") {
    info = {Endpoint::kReadyz, false, false};
  } else if (path == "/startupz") {
    info = {Endpoint::kStartupz, false, false};
  } else if (path == "/metrics") {
    info = {Endpoint::kMetrics, false, false};
  } else {
    ReplyError(Endpoint::kOther, request, *w,
               ApiError::NotFound(
                   fmt::format("no route for {} {}", request.method, path), "",
                   "not_found"));
    return;
  }
  if (info.is_post ? !post : !get) {
    ReplyError(info.endpoint, request, *w,
               ApiError::MethodNotAllowed(
                   fmt::format("{} does not accept {}", path, request.method)));
    return;
  }
  if (info.needs_key && !Authorized(request)) {
    ReplyError(
        info.endpoint, request, *w,
        ApiError::Unauthorized(
            "missing or invalid API key (send Authorization: Bearer KEY)"));
    return;
  }
  switch (info.endpoint) {
    case Endpoint::kChatCompletions:
      HandleInference(api::ApiKind::kChat, request, w);
      return;
    case Endpoint::kCompletions:
      HandleInference(api::ApiKind::kCompletions, request, w);
      return;
    case Endpoint::kModels:
      HandleModels(request, *w);
      return;
    case Endpoint::kTokenize:
      HandleTokenize(request, *w);
      return;
    case Endpoint::kDetokenize:
      HandleDetokenize(request, *w);
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
    case Endpoint::kOther:
      return;
  }
}

bool InferenceServer::Impl::Authorized(
    const http::ServerRequest& request) const {
  if (config.api_keys.empty()) return true;
  std::string_view key = request.HeaderValue("X-Api-Key");
  if (key.empty()) {
    std::string_view auth = request.HeaderValue("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.size() > kBearer.size() &&
        (auth.starts_with(kBearer) || auth.starts_with("bearer "))) {
      key = auth.substr(kBearer.size());
    }
  }
  if (key.empty()) return false;
  bool ok = false;
  for (const std::string& k : config.api_keys)
    ok |= SecretEquals(key, k);  // no early exit: constant time
  return ok;
}

void InferenceServer::Impl::Reply(Endpoint endpoint,
                                  const http::ServerRequest& request,
                                  http::ResponseWriter& writer, int status,
                                  std::string body,
                                  std::vector<http::Header> extra,
                                  std::string_view content_type) {
  extra.push_back({"Content-Type", std::string(content_type)});
  if (std::string_view rid = request.HeaderValue("X-Request-Id");
      !rid.empty() && rid.size() <= 256) {
    extra.push_back({"X-Request-Id", std::string(rid)});
  }
  metrics.CountHttp(endpoint, status);
  writer.Respond(status, std::move(extra), std::move(body));
}

void InferenceServer::Impl::ReplyError(Endpoint endpoint,
                                       const http::ServerRequest& request,
                                       http::ResponseWriter& writer,
                                       const ApiError& error) {
  std::vector<http::Header> extra;
  if (error.retry_after_s > 0)
    extra.push_back({"Retry-After", std::to_string(error.retry_after_s)});
  if (error.http_status == 401) extra.push_back({"WWW-Authenticate", "Bearer"});
  metrics.RequestError(error.error_class).Increment();
  if (error.http_status >= 500 && error.http_status != 503) {
    RL_LOG(kError, "serve: {} {} -> {}: {}", request.method, request.Path(),
           error.http_status, error.message);
  }
  Reply(endpoint, request, writer, error.http_status, ApiErrorJson(error),
        std::move(extra));
}

ApiError InferenceServer::Impl::NotServingError() const {
  switch (startup.phase()) {
    case Phase::kStarting:
    case Phase::kLoading:
      return ApiError::Unavailable("Loading model",
                                   startup.EstimatedSecondsToReady());
    case Phase::kWarming:
      return ApiError::Unavailable("Warming up", 1);
    case Phase::kDraining:
      return ApiError::Unavailable("Server is shutting down");
    case Phase::kFailed:
      return ApiError::Unavailable("Model failed to load: " +
                                   startup.Snapshot().error);
    case Phase::kReady:
      break;
  }
  return ApiError::Unavailable("Server is shutting down");
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
  const ApiError e = NotServingError();
  json::object inner;
  inner["code"] = 503;
  inner["message"] = e.message;
  inner["type"] = "unavailable_error";
  json::object o;
  o["error"] = std::move(inner);
  std::vector<http::Header> extra;
  if (e.retry_after_s > 0)
    extra.push_back({"Retry-After", std::to_string(e.retry_after_s)});
  Reply(Endpoint::kHealth, request, writer, 503, json::serialize(o),
        std::move(extra));
}

void InferenceServer::Impl::HandleStartupz(const http::ServerRequest& request,
                                           http::ResponseWriter& writer) {
  const StartupSnapshot s = startup.Snapshot();
  json::object o;
  o["phase"] = PhaseName(s.phase);
  o["progress"] = s.progress;
  o["load_progress"] = s.load_progress;
  o["elapsed_s"] = s.elapsed_s;
  if (s.load_s >= 0) o["load_s"] = s.load_s;
  if (s.warmup_s >= 0) o["warmup_s"] = s.warmup_s;
  if (s.startup_s >= 0) o["startup_s"] = s.startup_s;
  if (!s.error.empty()) o["error"] = s.error;
  o["model"] = model_name;
  const bool started = s.phase == Phase::kReady || s.phase == Phase::kDraining;
  Reply(Endpoint::kStartupz, request, writer, started ? 200 : 503,
        json::serialize(o));
}

void InferenceServer::Impl::HandleModels(const http::ServerRequest& request,
                                         http::ResponseWriter& writer) {
  json::object m;
  m["id"] = model_name;
  m["object"] = "model";
  m["created"] = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  m["owned_by"] = "redline";
  if (loader_done && model) {
    // Like llama.cpp: details once loaded, null before.
    const model::ModelConfig& c = model->config();
    json::object meta;
    meta["n_vocab"] = c.vocab_size;
    meta["n_ctx_train"] = c.context_length_train;
    meta["n_ctx"] = n_ctx;
    meta["n_embd"] = c.embedding_length;
    meta["n_layer"] = c.block_count;
    meta["architecture"] = c.arch_name;
    meta["weight_types"] = model->WeightTypeSummary();
    m["meta"] = std::move(meta);
    m["max_model_len"] = n_ctx;
  } else {
    m["meta"] = nullptr;
  }
  json::array data;
  data.push_back(std::move(m));
  json::object o;
  o["object"] = "list";
  o["data"] = std::move(data);
  Reply(Endpoint::kModels, request, writer, 200, json::serialize(o));
}

void InferenceServer::Impl::HandleTokenize(const http::ServerRequest& request,
                                           http::ResponseWriter& writer) {
  if (!loader_done || !model || !chat) {
    ReplyError(Endpoint::kTokenize, request, writer, NotServingError());
    return;
  }
  boost::system::error_code ec;
  json::value root = json::parse(request.body, ec);
  if (ec || !root.is_object()) {
    ReplyError(Endpoint::kTokenize, request, writer,
               ApiError::BadRequest("the body must be a JSON object"));
    return;
  }
  const json::object& o = root.get_object();
  auto bad = [&](std::string msg, std::string param) {
    ReplyError(Endpoint::kTokenize, request, writer,
               ApiError::BadRequest(std::move(msg), std::move(param)));
  };
  // llama.cpp: {content, add_special=false, with_pieces}; vLLM: {prompt,
  // add_special_tokens=true} or {messages}.
  bool add_special = false, with_pieces = false;
  const json::value* content = o.if_contains("content");
  if (content == nullptr || content->is_null()) {
    content = o.if_contains("prompt");
    add_special = true;
  }
  for (const char* key : {"add_special", "add_special_tokens"}) {
    if (const json::value* v = o.if_contains(key);
        v != nullptr && !v->is_null()) {
      if (!v->is_bool())
        return bad(fmt::format("'{}' must be a boolean", key), key);
      add_special = v->get_bool();
    }
  }
  if (const json::value* v = o.if_contains("with_pieces");
      v != nullptr && !v->is_null()) {
    if (!v->is_bool())
      return bad("'with_pieces' must be a boolean", "with_pieces");
    with_pieces = v->get_bool();
  }
  const model::Tokenizer& tok = *model->tokenizer();
  std::vector<int32_t> ids;
  if (const json::value* msgs = o.if_contains("messages");
      msgs != nullptr && !msgs->is_null()) {
    json::object chat_body;
    chat_body["messages"] = *msgs;
    InferenceRequest ir;
    std::string param;
    Status s = ParseInferenceRequest(json::serialize(chat_body),
                                     api::ApiKind::kChat, &ir, &param);
    if (!s.ok()) return bad(s.message(), param);
    auto t = chat->ChatTokens(ir.messages, ir.tools);
    if (!t.ok()) return bad(t.status().message(), "messages");
    ids = std::move(t).value();
  } else if (content != nullptr && content->is_string()) {
    ids = tok.Encode(std::string_view(content->get_string()), add_special,
                     /*parse_special=*/true);
  } else {
    return bad("give 'content' (or 'prompt') as a string, or 'messages'",
               "content");
  }
  json::array tokens;
  for (int32_t id : ids) {
    if (with_pieces) {
      json::object t;
      t["id"] = id;
      t["piece"] = ValidUtf8(tok.TokenToPiece(id));
      tokens.push_back(std::move(t));
    } else {
      tokens.push_back(id);
    }
  }
  json::object out;
  out["tokens"] = std::move(tokens);
  out["count"] = static_cast<int64_t>(ids.size());
  out["max_model_len"] = n_ctx;
  Reply(Endpoint::kTokenize, request, writer, 200, json::serialize(out));
}

void InferenceServer::Impl::HandleDetokenize(const http::ServerRequest& request,
                                             http::ResponseWriter& writer) {
  if (!loader_done || !model || !chat) {
    ReplyError(Endpoint::kDetokenize, request, writer, NotServingError());
    return;
  }
  boost::system::error_code ec;
  json::value root = json::parse(request.body, ec);
  const json::value* tokens = nullptr;
  if (!ec && root.is_object()) tokens = root.get_object().if_contains("tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    ReplyError(Endpoint::kDetokenize, request, writer,
               ApiError::BadRequest("the body must be {\"tokens\": [ids...]}",
                                    "tokens"));
    return;
  }
  const model::Tokenizer& tok = *model->tokenizer();
  std::vector<int32_t> ids;
  for (const json::value& v : tokens->get_array()) {
    if (!v.is_int64() || v.get_int64() < 0 ||
        v.get_int64() >= tok.vocab_size()) {
      ReplyError(Endpoint::kDetokenize, request, writer,
                 ApiError::BadRequest(
                     fmt::format("'tokens' must hold token ids in [0, {})",
                                 tok.vocab_size()),
                     "tokens"));
      return;
    }
    ids.push_back(static_cast<int32_t>(v.get_int64()));
  }
  const std::string text = ValidUtf8(tok.Decode(ids, /*skip_special=*/false));
  json::object out;
  out["content"] = text;  // llama.cpp
  out["prompt"] = text;   // vLLM
  Reply(Endpoint::kDetokenize, request, writer, 200, json::serialize(out));
}

void InferenceServer::Impl::HandleMetrics(const http::ServerRequest& request,
                                          http::ResponseWriter& writer) {
  metrics.CountHttp(
      Endpoint::kMetrics,
      200);  // counted before rendering, so the scrape sees itself
  std::vector<http::Header> h{
      {"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}};
  writer.Respond(200, std::move(h), registry.RenderText());
}

}  // namespace redline::server

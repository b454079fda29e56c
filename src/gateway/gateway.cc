#include "gateway/gateway.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "api/error.h"
#include "base/logging.h"
#include "gateway/gateway_internal.h"
#include "telemetry/tracer_metrics.h"

namespace redline::gateway {
namespace {

constexpr int64_t kTickNs = 250'000'000;

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

}  // namespace

Gateway::Impl::Impl(GatewayConfig c)
    : config(std::move(c)), metrics(config.metrics_prefix) {
  uint64_t seed = config.seed;
  for (const PoolSpec& spec : config.pools) {
    pools.push_back(std::make_unique<Pool>(spec, loop, metrics, seed++));
    Pool* p = pools.back().get();
    for (const ModelRoute& m : p->spec().models) {
      std::vector<std::string> names = m.aliases;
      names.push_back(m.name);
      for (const std::string& n : names) {
        if (n == "*") {
          wildcard_pool = p;
        } else {
          model_routes[n] = ModelTarget{p, &m};
        }
      }
    }
    if (config.default_pool == spec.name) default_pool = p;
  }
  if (default_pool == nullptr && !pools.empty()) default_pool = pools[0].get();
  started_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
}

Gateway::Gateway(GatewayConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}

Gateway::~Gateway() {
  Impl& g = *impl_;
  if (g.loop_thread.joinable()) {
    g.loop.Post([&g] { g.FinalStop(); });
    g.loop_thread.join();
  }
  // The loop has stopped: tear down in dependency order on this thread.
  // The cache first, so writers destroyed below call back into nothing.
  if (g.cache) g.cache->Stop();
  g.active.clear();
  g.prober.reset();
  g.scraper.reset();
  g.tick_timer.reset();
  g.grace_timer.reset();
  g.http.reset();
  g.pools.clear();
}

Result<uint16_t> Gateway::Start() {
  Impl& g = *impl_;
  RL_RETURN_IF_ERROR(g.InitCacheAndRouting());
  {
    telemetry::TracerOptions t;
    t.resource.service_name = "redline-gateway";
    for (const std::string& w : telemetry::ApplyOtelEnvironment(&t))
      RL_LOG(kWarning, "gateway: {}", w);
    if (!g.config.otlp_endpoint.empty())
      t.otlp_endpoint = g.config.otlp_endpoint;
    if (!g.config.trace_file.empty()) t.trace_file = g.config.trace_file;
    if (g.config.trace_sample >= 0) t.sample_ratio = g.config.trace_sample;
    t.keep_slower_than_ms = g.config.trace_slow_ms;
    if (telemetry::TracingEnabled(t)) {
      RL_ASSIGN_OR_RETURN(g.tracer, telemetry::Tracer::Create(std::move(t)));
      telemetry::AddTracerMetrics(g.metrics.registry(), g.config.metrics_prefix,
                                  g.tracer.get());
    }
  }
  if (g.cache && !g.config.cache.warm_file.empty()) {
    g.warming = true;
    g.warm_since_ns = http::NowNs();
  }
  http::ServerOptions opts;
  opts.host = g.config.host == "localhost" ? "127.0.0.1" : g.config.host;
  opts.port = static_cast<uint16_t>(g.config.port);
  opts.max_request_bytes = static_cast<size_t>(g.config.max_body_bytes);
  // Streams through the gateway last as long as generations do.
  opts.write_timeout_ms = 60'000;
  opts.on_headers = [&g](const http::ServerRequest& head) {
    return g.EarlyAnswer(head);
  };
  opts.on_connection_rejected = [](std::vector<http::Header>* headers,
                                   std::string* body) {
    *body = api::BuildErrorBody(api::ApiError::Unavailable(
        "too many open connections; retry later", 1));
    headers->push_back({"Content-Type", "application/json"});
  };
  opts.on_parse_error = [&g](bool too_large, std::string_view detail,
                             int* status, std::vector<http::Header>* headers,
                             std::string* body) {
    // Same bodies as redline serve: the OpenAI error object.
    api::ApiError e;
    if (too_large) {
      e = api::ApiError::TooLarge(
          fmt::format("the request is larger than the limit of {} bytes",
                      g.config.max_body_bytes));
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
    g.metrics.CountResponse("", e.http_status);
  };
  g.http = std::make_unique<http::Server>(
      g.loop, opts,
      [&g](http::ServerRequest&& r, std::shared_ptr<http::ResponseWriter> w) {
        g.Handle(std::move(r), std::move(w));
      });
  RL_ASSIGN_OR_RETURN(g.port, g.http->Start());
  if (!g.config.port_file.empty())
    RL_RETURN_IF_ERROR(WritePortFile(g.config.port_file, g.port));
  std::vector<std::string> pools;
  std::vector<Pool*> raw;
  for (auto& p : g.pools) {
    pools.push_back(fmt::format(
        "{} ({} upstream{}, {})", p->name(), p->upstreams().size(),
        p->upstreams().size() == 1 ? "" : "s", PolicyName(p->spec().policy)));
    raw.push_back(p.get());
  }
  RL_LOG(kInfo, "gateway: listening on http://{}:{}; pools: {}", g.config.host,
         g.port, fmt::join(pools, ", "));
  g.prober = std::make_unique<Prober>(g.loop, raw);
  g.scraper = std::make_unique<MetricsScraper>(g.loop, raw);
  g.loop.Post([&g] {
    g.tick_timer = std::make_unique<http::Timer>(g.loop);
    g.prober->Start();
    if (g.scraper) g.scraper->Start();
    if (g.cache) g.cache->Start();
    g.Tick();
  });
  g.loop_thread = std::thread([&g] {
    g.loop.Run();
    {
      std::lock_guard<std::mutex> lock(g.exit_mu);
      g.loop_exited = true;
    }
    g.exit_cv.notify_all();
  });
  return g.port;
}

void Gateway::Shutdown() {
  Impl& g = *impl_;
  g.loop.Post([&g] { g.BeginDrain(); });
}

int Gateway::Wait() {
  Impl& g = *impl_;
  std::unique_lock<std::mutex> lock(g.exit_mu);
  g.exit_cv.wait(lock, [&g] { return g.loop_exited; });
  return 0;
}

uint16_t Gateway::port() const { return impl_->port; }

void Gateway::Impl::Tick() {
  if (stopped) return;
  const int64_t now = http::NowNs();
  for (auto& p : pools) p->UpdateGauges(now);
  // Warm requests need routable upstreams: start when every pool has one,
  // or after 30 s whatever the probes say.
  if (warming && !warm_started) {
    bool routable = true;
    for (auto& p : pools) routable &= p->RoutableCount(now) > 0;
    if (routable || now - warm_since_ns > 30'000'000'000) {
      warm_started = true;
      StartWarm();
    }
  }
  tick_timer->ExpireAfter(kTickNs, [this] { Tick(); });
}

void Gateway::Impl::BeginDrain() {
  if (draining || stopped) return;
  draining = true;
  RL_LOG(kInfo, "gateway: draining {} request{} (grace {} s)", active.size(),
         active.size() == 1 ? "" : "s", config.shutdown_grace_s);
  grace_timer = std::make_unique<http::Timer>(loop);
  grace_timer->ExpireAfter(static_cast<int64_t>(config.shutdown_grace_s * 1e9),
                           [this] {
                             std::vector<ProxyRequest*> left;
                             for (auto& [id, r] : active)
                               left.push_back(r.get());
                             for (ProxyRequest* r : left)
                               r->Abort("the gateway is shutting down");
                             CheckDrain();
                           });
  CheckDrain();
}

void Gateway::Impl::CheckDrain() {
  if (!draining || stopped) return;
  for (auto& [id, r] : active)
    if (!r->done()) return;
  // Finished requests are erased from posted tasks; stop after them.
  loop.Post([this] { FinalStop(); });
}

void Gateway::Impl::FinalStop() {
  if (stopped) return;
  stopped = true;
  if (http) http->Stop();
  if (tick_timer) tick_timer->Cancel();
  if (grace_timer) grace_timer->Cancel();
  for (auto& [id, r] : active) r->Abort("the gateway stopped");
  if (cache) cache->Stop();
  prober.reset();
  scraper.reset();
  loop.Stop();
}

void Gateway::Impl::RequestDone(uint64_t id) {
  loop.Post([this, id] {
    active.erase(id);
    if (draining) CheckDrain();
  });
}

}  // namespace redline::gateway

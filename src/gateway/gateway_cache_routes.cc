// The gateway's inference path with the response cache and light/full
// routing (docs/GATEWAY.md): parse → route class (model "auto") → model
// and pool → cache decision → lookup (local, Redis) → hit replayed, or a
// single-flight wait, or the upstream through a tee that stores a
// successful answer; a first-class (light) answer that looks unreliable is
// asked again of the escalation class (a non-streamed answer whole, a
// stream by its held first tokens).
#include <fmt/format.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>

#include "api/access.h"
#include "api/finite_json.h"
#include "api/response.h"
#include "api/server_timing.h"
#include "base/logging.h"
#include "gateway/gateway_internal.h"
#include "gateway/routing_key.h"

namespace redline::gateway {
namespace {

namespace json = boost::json;

// Buckets from 100 us (cache hits) to minutes (generations).
std::vector<double> RouteBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

std::string SetModel(const json::object& body, const std::string& model) {
  json::object o = body;
  o["model"] = model;
  return json::serialize(o);
}

// Captures a non-streamed answer of the light class so the gateway can
// decide to escalate before anything reaches the client.
class CaptureWriter final : public http::ResponseWriter {
 public:
  using Fn = std::function<void(int, std::vector<http::Header>, std::string)>;
  // `on_drop` runs when the writer is destroyed without an answer (the
  // client left, the gateway stopped).
  CaptureWriter(std::shared_ptr<http::ResponseWriter> client, Fn fn,
                std::function<void()> on_drop)
      : client_(std::move(client)),
        fn_(std::move(fn)),
        on_drop_(std::move(on_drop)) {}
  ~CaptureWriter() override {
    if (!delivered_ && on_drop_) on_drop_();
  }
  void Respond(int status, std::vector<http::Header> headers,
               std::string body) override {
    Deliver(status, std::move(headers), std::move(body));
  }
  void BeginStream(int status, std::vector<http::Header> headers) override {
    status_ = status;
    headers_ = std::move(headers);
  }
  void Write(std::string data) override {
    if (body_.size() < (64u << 20)) body_ += data;
  }
  void End() override {
    Deliver(status_, std::move(headers_), std::move(body_));
  }
  void Abort() override { client_->Abort(); }
  bool peer_closed() const override { return client_->peer_closed(); }
  void SetOnPeerClosed(std::function<void()>) override {}

 private:
  void Deliver(int status, std::vector<http::Header> headers,
               std::string body) {
    if (delivered_) return;
    delivered_ = true;
    fn_(status, std::move(headers), std::move(body));
  }
  std::shared_ptr<http::ResponseWriter> client_;
  Fn fn_;
  std::function<void()> on_drop_;
  bool delivered_ = false;
  int status_ = 0;
  std::vector<http::Header> headers_;
  std::string body_;
};

// The writer of a held light stream: the route's real writer (a cache tee,
// headers) is made only when the held events are released, so a stream
// handed over to the escalation class leaves no trace in the cache or in
// the light route's metrics. `on_drop` runs when the writer is destroyed
// without an answer started.
class LazyWriter final : public http::ResponseWriter {
 public:
  using MakeFn = std::function<std::shared_ptr<http::ResponseWriter>()>;
  LazyWriter(std::shared_ptr<http::ResponseWriter> client, MakeFn make,
             std::function<void()> on_drop)
      : client_(std::move(client)),
        make_(std::move(make)),
        on_drop_(std::move(on_drop)) {}
  ~LazyWriter() override {
    if (inner_ == nullptr && on_drop_) on_drop_();
  }
  void Respond(int status, std::vector<http::Header> headers,
               std::string body) override {
    Inner().Respond(status, std::move(headers), std::move(body));
  }
  void BeginStream(int status, std::vector<http::Header> headers) override {
    Inner().BeginStream(status, std::move(headers));
  }
  void Write(std::string data) override { Inner().Write(std::move(data)); }
  void End() override { Inner().End(); }
  void Abort() override {
    if (inner_ != nullptr) {
      inner_->Abort();
    } else {
      client_->Abort();
    }
  }
  bool peer_closed() const override { return client_->peer_closed(); }
  void SetOnPeerClosed(std::function<void()> fn) override {
    client_->SetOnPeerClosed(std::move(fn));
  }
  size_t pending_bytes() const override { return client_->pending_bytes(); }
  void SetOnWritable(std::function<void()> fn) override {
    client_->SetOnWritable(std::move(fn));
  }

 private:
  http::ResponseWriter& Inner() {
    if (inner_ == nullptr) inner_ = make_();
    return *inner_;
  }
  std::shared_ptr<http::ResponseWriter> client_;
  MakeFn make_;
  std::function<void()> on_drop_;
  std::shared_ptr<http::ResponseWriter> inner_;
};

// Discards a warm request's answer (the tee stored it); `done` runs once.
class WarmWriter final : public http::ResponseWriter {
 public:
  explicit WarmWriter(std::function<void()> done) : done_(std::move(done)) {}
  ~WarmWriter() override { Done(); }
  void Respond(int, std::vector<http::Header>, std::string) override { Done(); }
  void BeginStream(int, std::vector<http::Header>) override {}
  void Write(std::string) override {}
  void End() override { Done(); }
  void Abort() override { Done(); }
  bool peer_closed() const override { return false; }
  void SetOnPeerClosed(std::function<void()>) override {}

 private:
  void Done() {
    if (done_) {
      auto fn = std::move(done_);
      done_ = nullptr;
      fn();
    }
  }
  std::function<void()> done_;
};

// Drops choices[].logprobs the gateway asked for and the client did not.
std::string StripLogprobs(const std::string& body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  // A number past a double's range would come back out as "Infinity": such
  // a body is relayed as the upstream sent it.
  if (ec || !v.is_object() || api::FindNonFiniteNumber(v)) return body;
  json::value* choices = v.as_object().if_contains("choices");
  if (choices == nullptr || !choices->is_array()) return body;
  for (json::value& c : choices->as_array())
    if (c.is_object() && c.as_object().contains("logprobs"))
      c.as_object()["logprobs"] = nullptr;
  return json::serialize(v);
}

}  // namespace

Status Gateway::Impl::InitCacheAndRouting() {
  auto& r = metrics.registry();
  const std::string p = config.metrics_prefix + "gateway_route_";
  if (!config.routing.models.empty()) {
    RL_ASSIGN_OR_RETURN(Router rt, Router::Create(config.routing));
    router = std::move(rt);
    route_requests = &r.AddCounter(p + "requests_total",
                                   "Routed requests by route class", {"class"});
    route_escalations = &r.AddCounter(
        p + "escalations_total",
        "Light answers asked again of the escalation class, by reason "
        "(length, logprob, refusal, error)",
        {"reason"});
    route_e2e = &r.AddHistogram(
        p + "e2e_seconds",
        "Arrival to last byte of routed answers, by the route that answered "
        "(cache hits included)",
        {"route"}, RouteBuckets());
    route_decision =
        &r.AddHistogram(p + "decision_seconds",
                        "Time to score a request and pick its route", {},
                        {0.000001, 0.0000025, 0.000005, 0.00001, 0.000025,
                         0.00005, 0.0001, 0.00025, 0.001})
             .Labels(std::vector<std::string>{});
  }
  if (config.cache.enabled) {
    cache = std::make_shared<CacheLayer>(config.cache, loop, metrics);
    RL_RETURN_IF_ERROR(cache->Init());
  }
  return Status::Ok();
}

void Gateway::Impl::Dispatch(api::ApiKind kind, http::ServerRequest& request,
                             const std::shared_ptr<http::ResponseWriter>& w,
                             api::CompletionRequest parsed, json::object body) {
  auto job = std::make_shared<Job>();
  job->kind = kind;
  job->client = w;
  if (tracer)
    job->trace = std::make_shared<GatewayTrace>(*tracer, request, kind);
  // Refusals below end the trace with the error the client got.
  auto refuse = [&](const api::ApiError& e) {
    if (job->trace)
      job->trace->MarkEnd(http::NowNs(), e.http_status,
                          e.http_status >= 500 ? e.message : "");
    ReplyError(request, *w, e);
  };
  const bool routing = router && router->Routes(parsed.model);
  bool body_changed = false;
  // The codec's parse, not a second one: the key, the overrides and every
  // rewrite read this object.
  job->body = std::move(body);
  std::string model = parsed.model;
  if (routing) {
    const int64_t t0 = http::NowNs();
    const std::string_view forced = request.HeaderValue("x-redline-route");
    int idx = 0;
    if (!forced.empty()) {
      idx = router->ClassIndex(forced);
      if (idx < 0) {
        std::vector<std::string> names;
        for (const auto& c : router->config().classes) names.push_back(c.name);
        refuse(api::ApiError::BadRequest(
            fmt::format("x-redline-route: '{}' is not a route "
                        "class ({})",
                        forced.substr(0, 64), fmt::join(names, ", ")),
            "", "invalid_route"));
        return;
      }
      job->route_forced = true;
    } else {
      idx = router->Decide(parsed).class_index;
    }
    const int64_t t1 = http::NowNs();
    route_decision->Observe(static_cast<double>(t1 - t0) / 1e9);
    job->route_index = idx;
    job->route_name = router->config().classes[idx].name;
    if (job->trace) {
      job->trace->AddSpan(
          "route", t0, t1,
          {{"redline.route.class", job->route_name},
           {"redline.route.forced", job->route_forced},
           {"redline.route.model", router->config().classes[idx].model}});
    }
    route_requests->Labels({job->route_name}).Increment();
    model = router->config().classes[idx].model;
    job->body["model"] = model;
    body_changed = true;
  }
  api::ApiError not_found;
  std::optional<ModelTarget> target = FindModel(model, &not_found);
  if (!target) {
    refuse(not_found);
    return;
  }
  job->target = *target;
  if (job->trace) {
    job->trace->SetRequest(parsed, model);
    job->trace->SetAttribute("redline.pool", target->pool->name());
  }
  if (cache != nullptr) {
    // The key names the model as the client meant it: an alias resolves to
    // its model; a routed name ("auto") stays, with the route class.
    const std::string key_model =
        routing ? parsed.model
                : (target->route != nullptr ? target->route->name : model);
    auto d =
        cache->Decide(parsed, key_model, job->route_name, job->body, &request);
    if (!d.ok()) {
      refuse(api::ApiError::BadRequest(d.status().message(), "cache"));
      return;
    }
    job->cache_on = true;
    job->cache = std::move(*d);
    // The gateway's own member never goes upstream.
    if (job->body.erase("cache") > 0) body_changed = true;
  }
  job->parsed = std::move(parsed);
  job->forward_headers = ForwardHeaders(request);
  if (std::string_view rid = request.HeaderValue("X-Request-Id");
      !rid.empty() && rid.size() <= 256)
    job->plan.request_id = std::string(rid);
  job->plan.t_received_ns = request.t_received_ns;
  std::string forwarded =
      body_changed ? json::serialize(job->body) : std::move(request.body);
  job->plan = MakePlan(*job, *target, std::move(forwarded));
  if (job->cache_on && job->cache.lookup) {
    job->t_lookup_ns = http::NowNs();
    cache->Lookup(job->cache,
                  [this, job](std::shared_ptr<const CacheEntry> e,
                              std::string tier, std::string verdict) {
                    AfterLookup(job, std::move(e), tier, verdict);
                  });
    return;
  }
  Forward(job, job->cache_on ? job->cache.verdict : std::string(), false);
}

ForwardPlan Gateway::Impl::MakePlan(const Job& job, const ModelTarget& target,
                                    std::string body) const {
  ForwardPlan plan;
  plan.kind = job.kind;
  plan.stream = job.parsed.stream;
  plan.route =
      MakeRouteRequest(job.parsed, target.pool->spec().affinity_prefix_bytes);
  plan.headers = job.forward_headers;
  plan.request_id = job.plan.request_id;
  plan.t_received_ns = job.plan.t_received_ns;
  plan.trace = job.trace;
  if (target.route != nullptr && !target.route->upstream_model.empty()) {
    // `body` is job.body serialized with some model name: a copy of the
    // parsed object with the upstream's name instead, no parse.
    json::object o = job.body;
    o["model"] = target.route->upstream_model;
    body = json::serialize(o);
  }
  plan.body = std::move(body);
  return plan;
}

void Gateway::Impl::AfterLookup(const std::shared_ptr<Job>& job,
                                std::shared_ptr<const CacheEntry> entry,
                                const std::string& tier,
                                const std::string& verdict) {
  if (stopped) return;
  if (job->trace) {
    job->trace->AddSpan("cache lookup", job->t_lookup_ns, http::NowNs(),
                        {{"redline.cache.outcome",
                          std::string(entry != nullptr ? "hit" : verdict)},
                         {"redline.cache.tier", tier},
                         {"redline.cache.class", job->cache.cls}});
  }
  if (entry != nullptr) {
    ServeHit(job, std::move(entry), tier);
    return;
  }
  if (job->client->peer_closed()) return;
  const CacheLayer::FlightRole role = cache->JoinOrLead(
      job->cache, [this, job, verdict](std::shared_ptr<const CacheEntry> e) {
        if (stopped) return;
        if (e != nullptr) {
          ServeHit(job, std::move(e), "single_flight");
        } else {
          Forward(job, verdict, false);
        }
      });
  if (role == CacheLayer::FlightRole::kWait) return;
  Forward(job, verdict, role == CacheLayer::FlightRole::kLead);
}

void Gateway::Impl::ServeHit(const std::shared_ptr<Job>& job,
                             std::shared_ptr<const CacheEntry> entry,
                             const std::string& tier) {
  std::vector<http::Header> h =
      CacheLayer::Headers("hit", entry->cls, entry.get(), tier, cache->NowMs());
  if (job->route_index >= 0) h.push_back({"x-redline-route", job->route_name});
  if (!job->plan.request_id.empty())
    h.push_back({"X-Request-Id", job->plan.request_id});
  const int64_t now = http::NowNs();
  h.push_back({"Server-Timing",
               api::AppendServerTiming(
                   "", "gateway",
                   static_cast<double>(now - job->plan.t_received_ns) / 1e6)});
  if (job->trace) {
    job->trace->SetAttribute("redline.cache.outcome", std::string("hit"));
    job->trace->MarkEnd(now, entry->status, "");
  }
  metrics.CountResponse(job->target.pool->name(), entry->status);
  if (job->route_index >= 0)
    route_e2e->Labels({job->route_name})
        .Observe(static_cast<double>(now - job->plan.t_received_ns) / 1e9);
  const bool paced = job->cache.pace_original && entry->stream;
  cache->Replay(std::move(entry), job->client, std::move(h),
                job->cache.pace_original);
  // A hit is all gateway: arrival to the answer handed to the socket (a
  // paced replay is left out: its length is the recording's pace).
  if (!paced) {
    cache->Overhead("hit", tier)
        ->Observe(static_cast<double>(http::NowNs() - job->plan.t_received_ns) /
                  1e9);
  }
}

std::shared_ptr<http::ResponseWriter> Gateway::Impl::OutWriter(
    const std::shared_ptr<Job>& job, const std::string& verdict, bool leader,
    const std::string& route, const std::string& escalated) {
  std::vector<http::Header> h;
  if (job->cache_on)
    h = CacheLayer::Headers(verdict, job->cache.cls, nullptr, "", 0);
  if (!route.empty()) h.push_back({"x-redline-route", route});
  if (!escalated.empty()) h.push_back({"x-redline-escalated", escalated});
  std::function<void()> on_finish;
  if (!route.empty()) {
    const int64_t t0 = job->plan.t_received_ns;
    telemetry::Histogram* hist = &route_e2e->Labels({route});
    on_finish = [hist, t0] {
      hist->Observe(static_cast<double>(http::NowNs() - t0) / 1e9);
    };
  }
  if (job->cache_on)
    return cache->Tee(job->cache, job->client, std::move(h), leader,
                      std::move(on_finish));
  return CacheLayer::HeaderTee(job->client, std::move(h), std::move(on_finish));
}

void Gateway::Impl::Forward(const std::shared_ptr<Job>& job,
                            const std::string& verdict, bool leader) {
  if (stopped) return;
  if (job->cache_on) job->plan.extra_overhead = cache->Overhead(verdict, "");
  Pool& pool = *job->target.pool;
  const RoutingConfig* rc = router ? &router->config() : nullptr;
  const int esc = rc != nullptr && !rc->escalate_to.empty()
                      ? router->ClassIndex(rc->escalate_to)
                      : -1;
  const bool escalate = job->route_index >= 0 && !job->route_forced &&
                        esc > job->route_index &&
                        (!job->parsed.stream || rc->escalate_stream_tokens > 0);
  if (escalate && job->parsed.stream) {
    api::ApiError ignored;
    std::optional<ModelTarget> full =
        FindModel(rc->classes[esc].model, &ignored);
    if (full) {
      ForwardHeldStream(job, verdict, leader, *full);
      return;
    }
  }
  if (!escalate || job->parsed.stream) {
    std::shared_ptr<http::ResponseWriter> out =
        job->cache_on || job->route_index >= 0
            ? OutWriter(job, verdict, leader, job->route_name, "")
            : job->client;
    StartProxy(pool, job->plan, std::move(out), job->client);
    return;
  }
  ForwardPlan light = job->plan;
  bool added = false;
  if (router->wants_logprobs() && !job->parsed.sampling.logprobs) {
    boost::system::error_code ec;
    json::value v = json::parse(light.body, ec);
    if (!ec && v.is_object()) {
      if (job->kind == api::ApiKind::kChat) {
        v.as_object()["logprobs"] = true;
      } else {
        v.as_object()["logprobs"] = 1;
      }
      light.body = json::serialize(v);
      added = true;
    }
  }
  auto capture = std::make_shared<CaptureWriter>(
      job->client,
      [this, job, verdict, leader, added](
          int status, std::vector<http::Header> headers, std::string body) {
        // Posted: the light ProxyRequest is inside its own Respond here.
        loop.Post([this, job, verdict, leader, added, status,
                   headers = std::move(headers),
                   body = std::move(body)]() mutable {
          FinishEscalation(job, verdict, leader, added, status,
                           std::move(headers), std::move(body));
        });
      },
      [weak = std::weak_ptr<CacheLayer>(cache), job, leader] {
        auto c = weak.lock();
        if (c && leader) c->AbandonFlight(job->cache);
      });
  StartProxy(pool, std::move(light), std::move(capture), job->client);
}

void Gateway::Impl::FinishEscalation(const std::shared_ptr<Job>& job,
                                     const std::string& verdict, bool leader,
                                     bool added_logprobs, int status,
                                     std::vector<http::Header> headers,
                                     std::string body) {
  if (stopped) return;
  if (job->client->peer_closed()) {
    if (leader && cache) cache->AbandonFlight(job->cache);
    return;
  }
  std::string reason;
  if (status < 200 || status >= 300) {
    reason = "error";
  } else {
    auto r = api::ParseResponse(body);
    reason = !r.ok() || r->error ? "error" : router->Unreliable(*r);
  }
  const RoutingConfig& rc = router->config();
  const int esc = router->ClassIndex(rc.escalate_to);
  std::optional<ModelTarget> full;
  if (!reason.empty()) {
    api::ApiError ignored;
    full = FindModel(rc.classes[esc].model, &ignored);
  }
  if (reason.empty() || !full) {
    if (added_logprobs) body = StripLogprobs(body);
    OutWriter(job, verdict, leader, job->route_name, "")
        ->Respond(status, std::move(headers), std::move(body));
    return;
  }
  Escalate(job, verdict, leader, reason, *full);
}

void Gateway::Impl::Escalate(const std::shared_ptr<Job>& job,
                             const std::string& verdict, bool leader,
                             const std::string& reason,
                             const ModelTarget& full) {
  const RoutingConfig& rc = router->config();
  const RouteClassSpec& to = rc.classes[router->ClassIndex(rc.escalate_to)];
  route_escalations->Labels({reason}).Increment();
  route_requests->Labels({to.name}).Increment();
  if (job->trace)
    job->trace->SetAttribute("redline.route.escalated", std::string(reason));
  ForwardPlan plan = MakePlan(*job, full, SetModel(job->body, to.model));
  StartProxy(*full.pool, std::move(plan),
             OutWriter(job, verdict, leader, to.name, reason), job->client);
}

void Gateway::Impl::ForwardHeldStream(const std::shared_ptr<Job>& job,
                                      const std::string& verdict, bool leader,
                                      const ModelTarget& full) {
  const RoutingConfig& rc = router->config();
  ForwardPlan light = job->plan;
  light.hold.tokens = static_cast<int>(rc.escalate_stream_tokens);
  light.hold.max_bytes = static_cast<size_t>(rc.escalate_stream_bytes);
  const Router* rt = &*router;
  light.hold.judge = [rt](const api::CompletionResponse& a) {
    return rt->Unreliable(a);
  };
  // Synchronous inside the light request: marks the hand-over (so the
  // light writer's drop does not end the single flight the full answer
  // now leads) and posts the full request.
  light.hold.on_escalate = [this, job, verdict, leader,
                            full](const std::string& reason) {
    job->stream_escalated = true;
    loop.Post([this, job, verdict, leader, full, reason] {
      if (stopped) return;
      if (job->client->peer_closed()) {
        if (leader && cache) cache->AbandonFlight(job->cache);
        return;
      }
      Escalate(job, verdict, leader, reason, full);
    });
  };
  auto out = std::make_shared<LazyWriter>(
      job->client,
      [this, job, verdict, leader] {
        return OutWriter(job, verdict, leader, job->route_name, "");
      },
      [weak = std::weak_ptr<CacheLayer>(cache), job, leader] {
        auto c = weak.lock();
        if (c && leader && !job->stream_escalated) c->AbandonFlight(job->cache);
      });
  StartProxy(*job->target.pool, std::move(light), std::move(out), job->client);
}

void Gateway::Impl::StartProxy(
    Pool& pool, ForwardPlan plan, std::shared_ptr<http::ResponseWriter> out,
    const std::shared_ptr<http::ResponseWriter>& client) {
  const uint64_t id = next_id++;
  auto proxy = std::make_unique<ProxyRequest>(
      id, pool, metrics, loop, std::move(plan), std::move(out),
      [this](uint64_t done_id) { RequestDone(done_id); });
  ProxyRequest* raw = proxy.get();
  active.emplace(id, std::move(proxy));
  client->SetOnPeerClosed([this, id] {
    auto it = active.find(id);
    if (it != active.end()) it->second->ClientGone();
  });
  raw->Start();
}

void Gateway::Impl::HandlePurge(
    const http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& w) {
  if (cache == nullptr) {
    ReplyError(
        request, *w,
        api::ApiError::NotFound("the response cache is off", "", "cache_off"));
    return;
  }
  std::vector<std::string> keys;
  if (!config.cache.admin_key.empty()) {
    keys.push_back(config.cache.admin_key);
  } else {
    keys = config.api_keys;
  }
  if (keys.empty()) {
    api::ApiError e = api::ApiError::BadRequest(
        "cache purge needs a key: set cache.admin-key or --api-key", "",
        "purge_disabled");
    e.http_status = 403;
    e.type = "permission_error";
    ReplyError(request, *w, e);
    return;
  }
  if (!api::ApiKeyAccepted(request.HeaderValue("X-Api-Key"),
                           request.HeaderValue("Authorization"), keys)) {
    api::ApiError e = api::ApiError::BadRequest("invalid or missing admin key",
                                                "", "invalid_api_key");
    e.http_status = 401;
    e.type = "authentication_error";
    ReplyError(request, *w, e);
    return;
  }
  std::string prefix;
  if (!request.body.empty()) {
    boost::system::error_code ec;
    json::value v = json::parse(request.body, ec);
    if (ec || !v.is_object()) {
      ReplyError(request, *w,
                 api::ApiError::BadRequest(
                     "body must be {\"class\": C, \"prefix\": P}"));
      return;
    }
    const json::object& o = v.as_object();
    const json::value* c = o.if_contains("class");
    const json::value* p = o.if_contains("prefix");
    if ((c && !c->is_string()) || (p && !p->is_string())) {
      ReplyError(request, *w,
                 api::ApiError::BadRequest("class and prefix are strings"));
      return;
    }
    if (c) prefix = std::string(c->get_string()) + ":";
    if (p) prefix += std::string(p->get_string());
  }
  std::weak_ptr<http::ResponseWriter> weak = w;
  const std::string rid(request.HeaderValue("X-Request-Id").substr(0, 256));
  cache->Purge(prefix, [this, weak, prefix, rid](int64_t local, int64_t redis) {
    auto w = weak.lock();
    if (!w) return;
    json::object o;
    o["prefix"] = config.cache.name_space + ":" + prefix;
    o["purged_local"] = local;
    if (redis >= 0) {
      o["purged_redis"] = redis;
    } else {
      o["purged_redis"] = nullptr;
    }
    RL_LOG(kInfo, "gateway: cache purge '{}': {} local, {} redis",
           config.cache.name_space + ":" + prefix, local, redis);
    std::vector<http::Header> h = {{"Content-Type", "application/json"}};
    if (!rid.empty()) h.push_back({"X-Request-Id", rid});
    metrics.CountResponse("", 200);
    w->Respond(200, std::move(h), json::serialize(o));
  });
}

void Gateway::Impl::StartWarm() {
  std::ifstream in(config.cache.warm_file);
  if (!in) {
    RL_LOG(kError, "gateway: --warm {}: cannot read; starting cold",
           config.cache.warm_file);
    warming = false;
    return;
  }
  std::string line;
  while (std::getline(in, line) && warm_lines.size() < 1'000'000)
    if (!line.empty() && line.find_first_not_of(" \t\r") != std::string::npos)
      warm_lines.push_back(std::move(line));
  RL_LOG(kInfo, "gateway: warm: {} entries from {}", warm_lines.size(),
         config.cache.warm_file);
  for (int i = 0; i < config.cache.warm_concurrency; ++i) WarmNext();
  if (warm_lines.empty()) warming = false;
}

void Gateway::Impl::WarmNext() {
  if (stopped) return;
  if (warm_next >= warm_lines.size()) {
    if (warm_in_flight == 0 && warming) {
      warming = false;
      RL_LOG(kInfo, "gateway: warm: done, {}/{} lines, {} stored directly",
             warm_done, warm_lines.size(), warm_stored);
      warm_lines.clear();
    }
    return;
  }
  const std::string& line = warm_lines[warm_next++];
  auto one_done = [this] {
    ++warm_done;
    const size_t total = warm_lines.size();
    if (total > 0 && (warm_done * 10 / total != (warm_done - 1) * 10 / total ||
                      warm_done == total))
      RL_LOG(kInfo, "gateway: warm: {}/{}", warm_done, total);
  };
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  const json::object* o = !ec && v.is_object() ? &v.as_object() : nullptr;
  const json::value* req = o ? o->if_contains("request") : nullptr;
  if (req == nullptr || !req->is_object()) {
    RL_LOG(kWarning, "gateway: warm: line {}: not {{\"request\": {{...}}}}",
           warm_next);
    one_done();
    loop.Post([this] { WarmNext(); });
    return;
  }
  api::ApiKind kind = api::ApiKind::kChat;
  if (const json::value* p = o->if_contains("path");
      p && p->is_string() && p->get_string().ends_with("/completions") &&
      !p->get_string().ends_with("chat/completions"))
    kind = api::ApiKind::kCompletions;
  if (!req->as_object().contains("messages")) kind = api::ApiKind::kCompletions;
  const std::string body = json::serialize(*req);
  const json::value* resp = o->if_contains("response");
  if (resp != nullptr && resp->is_object()) {
    // A stored pair: keyed exactly as the request would be at run time.
    auto parsed = api::ParseRequest(body, kind);
    api::ApiError ignored;
    std::optional<ModelTarget> target =
        parsed.ok() ? FindModel(parsed->model, &ignored) : std::nullopt;
    if (parsed.ok() && target) {
      const std::string key_model =
          target->route != nullptr ? target->route->name : parsed->model;
      auto d = cache->Decide(*parsed, key_model, "", req->as_object(), nullptr);
      if (d.ok() && d->store && d->ttl_ms > 0) {
        auto e = std::make_shared<CacheEntry>();
        e->canonical = d->key.canonical;
        e->cls = d->cls;
        e->stored_unix_ms = cache->NowMs();
        e->ttl_ms = d->ttl_ms;
        e->status = 200;
        e->content_type = "application/json";
        e->body = json::serialize(*resp);
        cache->Store(*d, std::move(e));
        ++warm_stored;
      }
    }
    one_done();
    loop.Post([this] { WarmNext(); });
    return;
  }
  // A request alone: sent through the gateway itself, so the tee stores
  // the upstream's answer.
  ++warm_in_flight;
  http::ServerRequest r;
  r.method = "POST";
  r.target =
      kind == api::ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions";
  r.headers.push_back({"Content-Type", "application/json"});
  r.body = body;
  r.t_received_ns = http::NowNs();
  r.remote_address = "warm";
  auto writer = std::make_shared<WarmWriter>([this, one_done] {
    --warm_in_flight;
    one_done();
    loop.Post([this] { WarmNext(); });
  });
  json::object parsed_body;
  auto parsed = api::ParseRequest(r.body, kind, nullptr, &parsed_body);
  if (!parsed.ok()) {
    writer.reset();
    return;
  }
  Dispatch(kind, r, writer, std::move(*parsed), std::move(parsed_body));
}

}  // namespace redline::gateway

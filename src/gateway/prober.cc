#include "gateway/prober.h"

#include <algorithm>

#include "api/models.h"
#include "base/logging.h"

namespace redline::gateway {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kModelsRefreshNs = 30'000 * kNsPerMs;
constexpr int64_t kDiscoveryOnlyIntervalMs = 5'000;
constexpr size_t kMaxProbeBodyBytes = 1 << 20;

}  // namespace

struct Prober::Call final : http::ResponseHandler {
  enum class Kind { kProbe, kModels };
  Call(Prober* p, Pool* pl, Upstream* u, Kind k)
      : prober(p), pool(pl), up(u), kind(k) {}
  void OnHeaders(const http::ResponseHead& head, int64_t) override {
    status = head.status;
  }
  void OnBody(std::string_view data, int64_t) override {
    if (body.size() + data.size() <= kMaxProbeBodyBytes)
      body.append(data.data(), data.size());
  }
  void OnComplete(const http::TransportResult& r, int64_t) override {
    const bool ok = r.error == http::TransportError::kNone;
    if (r.error != http::TransportError::kCancelled) {
      if (kind == Kind::kProbe) {
        prober->OnProbeDone(*pool, *up, ok ? status : 0, ok);
      } else {
        prober->OnModelsDone(*pool, *up, ok ? status : 0, body);
      }
    }
    // Last statement: destroys this handler, which the client no longer
    // touches after OnComplete.
    prober->Forget(this);
  }
  Prober* prober;
  Pool* pool;
  Upstream* up;
  Kind kind;
  int status = 0;
  std::string body;
};

Prober::Prober(http::EventLoop& loop, std::vector<Pool*> pools)
    : loop_(loop), pools_(std::move(pools)) {
  http::ClientOptions o;
  int64_t connect_ms = 1'000;
  for (Pool* p : pools_)
    connect_ms = std::max(connect_ms, p->spec().probe.timeout_ms);
  o.connect_timeout_ms = connect_ms;
  client_ = std::make_unique<http::Client>(loop_, o);
}

Prober::~Prober() {
  timers_.clear();
  // The client completes in-flight calls (as cancelled) while it closes;
  // they remove themselves from calls_.
  client_.reset();
  calls_.clear();
}

void Prober::Start() {
  for (size_t i = 0; i < pools_.size(); ++i) {
    timers_.push_back(std::make_unique<http::Timer>(loop_));
    Tick(i);
  }
}

void Prober::Tick(size_t index) {
  Pool& pool = *pools_[index];
  const ProbeSpec& spec = pool.spec().probe;
  const bool discover = pool.spec().models.empty();
  const int64_t now = http::NowNs();
  for (auto& u : pool.upstreams()) {
    if (spec.interval_ms > 0) {
      Probe(pool, *u);
    } else if (discover && (u->models.empty() ||
                            now - u->models_fetched_ns > kModelsRefreshNs)) {
      FetchModels(pool, *u);
    }
  }
  pool.UpdateGauges(now);
  const int64_t interval_ms = spec.interval_ms > 0
                                  ? spec.interval_ms
                                  : (discover ? kDiscoveryOnlyIntervalMs : 0);
  if (interval_ms > 0)
    timers_[index]->ExpireAfter(interval_ms * kNsPerMs,
                                [this, index] { Tick(index); });
}

void Prober::Probe(Pool& pool, Upstream& u) {
  if (u.probe_in_progress) return;
  u.probe_in_progress = true;
  http::ClientRequest r;
  r.method = "GET";
  r.target = u.root + u.probe_path;
  r.total_timeout_ms = pool.spec().probe.timeout_ms;
  if (!u.spec.api_key.empty())
    r.headers.push_back({"Authorization", "Bearer " + u.spec.api_key});
  auto call = std::make_unique<Call>(this, &pool, &u, Call::Kind::kProbe);
  Call* raw = call.get();
  calls_.emplace(raw, std::move(call));
  client_->Send(u.origin, std::move(r), raw);
}

void Prober::FetchModels(Pool& pool, Upstream& u) {
  if (u.models_in_progress) return;
  u.models_in_progress = true;
  http::ClientRequest r;
  r.method = "GET";
  r.target = u.root + "/v1/models";
  r.total_timeout_ms = std::max<int64_t>(pool.spec().probe.timeout_ms, 1'000);
  if (!u.spec.api_key.empty())
    r.headers.push_back({"Authorization", "Bearer " + u.spec.api_key});
  auto call = std::make_unique<Call>(this, &pool, &u, Call::Kind::kModels);
  Call* raw = call.get();
  calls_.emplace(raw, std::move(call));
  client_->Send(u.origin, std::move(r), raw);
}

void Prober::OnProbeDone(Pool& pool, Upstream& u, int status,
                         bool transport_ok) {
  u.probe_in_progress = false;
  if (transport_ok && status == 404 && u.probe_path != "/health") {
    RL_LOG(kInfo, "gateway: upstream {} has no {}; probing /health instead",
           u.spec.name, u.probe_path);
    u.probe_path = "/health";
    Probe(pool, u);
    return;
  }
  const bool ok = transport_ok && status == 200;
  const int64_t now = http::NowNs();
  if (u.health.RecordProbe(ok, now)) {
    const LogLevel level = ok ? LogLevel::kInfo : LogLevel::kWarning;
    if (level >= GetLogLevel())
      LogLine(level,
              fmt::format("gateway: pool {}: upstream {} is {} (probe {})",
                          pool.name(), u.spec.name, ok ? "up" : "down",
                          transport_ok ? std::to_string(status)
                                       : std::string("no answer")));
    pool.UpdateGauges(now);
  }
  if (ok && pool.spec().models.empty() &&
      (u.models.empty() || now - u.models_fetched_ns > kModelsRefreshNs))
    FetchModels(pool, u);
}

void Prober::OnModelsDone(Pool& pool, Upstream& u, int status,
                          const std::string& body) {
  u.models_in_progress = false;
  if (status != 200) return;
  auto ids = api::ParseModelIds(body);
  if (!ids.ok()) {
    RL_LOG(kWarning, "gateway: pool {}: upstream {}: bad /v1/models: {}",
           pool.name(), u.spec.name, ids.status().message());
    return;
  }
  u.models = std::move(ids).value();
  u.models_fetched_ns = http::NowNs();
}

void Prober::Forget(Call* call) { calls_.erase(call); }

}  // namespace redline::gateway

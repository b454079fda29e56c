#include "gateway/pool.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/logging.h"
#include "gateway/duration.h"

namespace redline::gateway {
namespace {

constexpr double kEwmaAlpha = 0.3;
constexpr int64_t kNsPerMs = 1'000'000;

// "http://h:8080/v1/" -> "" ; "http://h/base/v1" -> "/base"; "http://h/x"
// -> "/x".
std::string RootOf(std::string target) {
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  if (target.ends_with("/v1")) target.resize(target.size() - 3);
  if (target == "/") target.clear();
  return target;
}

}  // namespace

Pool::Pool(const PoolSpec& spec, http::EventLoop& loop, GatewayMetrics& metrics,
           uint64_t seed)
    : spec_(spec),
      budget_(spec.retry_budget),
      metrics_(metrics.ForPool(spec.name)) {
  std::vector<std::string> names;
  std::vector<double> weights;
  const bool probed = spec.probe.interval_ms > 0;
  for (const UpstreamSpec& us : spec.upstreams) {
    auto u = std::make_unique<Upstream>(us, spec.health, probed);
    auto url = http::ParseUrl(us.url);  // checked by FinalizeGatewayConfig
    if (url.ok()) {
      u->origin = url->origin;
      u->root = RootOf(url->target);
    }
    u->probe_path = spec.probe.path;
    u->transport = std::make_unique<UpstreamTransport>(
        loop, u->origin, us.connect_timeout_ms,
        static_cast<size_t>(std::max(us.max_in_flight, 1)));
    u->metrics = metrics.ForUpstream(spec.name, us.name);
    u->scrape_interval_ms = std::max<int64_t>(us.scrape_interval_ms, 0);
    if (u->scrape_interval_ms > 0)
      metrics.AddScrapeMetrics(spec.name, us.name, &u->metrics);
    if (spec.slow_start_ms > 0)
      metrics.AddSlowStartMetrics(spec.name, us.name, &u->metrics);
    names.push_back(us.name);
    weights.push_back(us.weight);
    upstreams_.push_back(std::move(u));
  }
  policy_ = MakePolicy(spec.policy, names, weights, spec.affinity, seed);
  loads_.resize(upstreams_.size());
  UpdateGauges(0);
}

Pool::Pick Pool::Choose(const RouteRequest& request,
                        const std::vector<const Upstream*>& tried,
                        int64_t now_ns) {
  bool any_routable_untried = false;
  for (size_t i = 0; i < upstreams_.size(); ++i) {
    const Upstream& u = *upstreams_[i];
    UpstreamLoad& l = loads_[i];
    l.name = u.spec.name;
    l.weight = EffectiveWeight(u, now_ns);
    l.routable = u.health.Routable(now_ns);
    const bool untried =
        std::find(tried.begin(), tried.end(), &u) == tried.end();
    any_routable_untried |= l.routable && untried;
    l.eligible = l.routable && untried && u.in_flight < u.spec.max_in_flight;
    l.in_flight = u.in_flight;
    l.tokens_in_flight = u.tokens_in_flight;
    l.ewma_ttft_ms = u.ewma_ttft_ms;
    l.ewma_sample_ns = u.ewma_sample_ns;
    l.scraped = u.scrape_interval_ms > 0;
    l.scrape_stale = l.scraped && ScrapeStale(u, now_ns);
    l.scraped_requests = u.scraped.running + u.scraped.waiting;
    l.kv_usage = u.scraped.kv_usage;
    l.max_in_flight = u.spec.max_in_flight;
  }
  Pick pick;
  if (auto i = policy_->Pick(loads_, request, now_ns)) {
    pick.upstream = upstreams_[*i].get();
    return pick;
  }
  // Why nothing was eligible. Busy (at max-in-flight, or backed off after
  // a 429/503 with Retry-After) is an overload: 429, retry when the first
  // back-off ends. Only when every untried upstream is down or ejected is it
  // an outage: 503.
  int64_t busy_until = 0;
  bool busy = any_routable_untried;
  for (const auto& u : upstreams_) {
    if (std::find(tried.begin(), tried.end(), u.get()) != tried.end()) continue;
    if (!u->health.probe_up() || u->health.ejected(now_ns)) continue;
    if (u->health.backed_off(now_ns)) {
      busy = true;
      const int64_t at = u->health.available_at_ns();
      if (busy_until == 0 || at < busy_until) busy_until = at;
    }
  }
  if (busy) {
    pick.refusal = Refusal::kSaturated;
    pick.retry_after_s =
        busy_until > now_ns
            ? std::max(1, static_cast<int>(std::ceil(
                              static_cast<double>(busy_until - now_ns) / 1e9)))
            : 1;
    return pick;
  }
  pick.refusal = Refusal::kUnavailable;
  // The soonest an ejected upstream returns; probes that failed give no
  // date, so one probe interval.
  int64_t soonest = 0;
  for (const auto& u : upstreams_) {
    if (!u->health.probe_up()) continue;
    const int64_t at = u->health.available_at_ns();
    if (at > now_ns && (soonest == 0 || at < soonest)) soonest = at;
  }
  const double wait_s =
      soonest > 0 ? static_cast<double>(soonest - now_ns) / 1e9
                  : static_cast<double>(spec_.probe.interval_ms) / 1e3;
  pick.retry_after_s = std::max(1, static_cast<int>(std::ceil(wait_s)));
  return pick;
}

void Pool::BeginAttempt(Upstream& u, int64_t tokens) {
  ++u.in_flight;
  u.tokens_in_flight += tokens;
  u.metrics.requests->Increment();
  u.metrics.in_flight->Set(static_cast<double>(u.in_flight));
}

void Pool::EndAttempt(Upstream& u, int64_t tokens) {
  --u.in_flight;
  u.tokens_in_flight -= tokens;
  u.metrics.in_flight->Set(static_cast<double>(u.in_flight));
}

void Pool::RecordSuccess(Upstream& u) { u.health.RecordSuccess(); }

void Pool::RecordFailure(Upstream& u, Failure f, int64_t now_ns) {
  u.metrics.errors[static_cast<int>(f)]->Increment();
  if (!CountsTowardEjection(f)) return;
  // Never eject the last routable upstream: a pool with one bad upstream
  // left still tries it rather than refusing everything.
  int others = 0;
  for (const auto& o : upstreams_)
    if (o.get() != &u && o->health.Routable(now_ns)) ++others;
  if (u.health.RecordFailure(now_ns, others > 0)) {
    u.metrics.ejections->Increment();
    UpdateGauges(now_ns);
  }
}

void Pool::RecordBackoff(Upstream& u, int64_t retry_after_ms, int64_t now_ns) {
  u.health.RecordBackoff(now_ns, retry_after_ms);
  u.metrics.backoffs->Increment();
  UpdateGauges(now_ns);
}

void Pool::RecordFirstByte(Upstream& u, double ms, int64_t now_ns) {
  u.ewma_ttft_ms = u.ewma_ttft_ms <= 0
                       ? ms
                       : kEwmaAlpha * ms + (1 - kEwmaAlpha) * u.ewma_ttft_ms;
  u.ewma_sample_ns = now_ns;
  ttft_window_.Add(ms);
}

bool Pool::Ready(int64_t now_ns) const { return RoutableCount(now_ns) > 0; }

int Pool::RoutableCount(int64_t now_ns) const {
  int n = 0;
  for (const auto& u : upstreams_) n += u->health.Routable(now_ns) ? 1 : 0;
  return n;
}

bool Pool::ScrapeStale(const Upstream& u, int64_t now_ns) const {
  if (u.scraped_ns <= 0) return true;
  const int64_t bound_ns = static_cast<int64_t>(spec_.scrape.stale_intervals) *
                           u.scrape_interval_ms * kNsPerMs;
  return now_ns - u.scraped_ns > bound_ns;
}

double Pool::EffectiveWeight(const Upstream& u, int64_t now_ns) const {
  return u.spec.weight * u.health.SlowStartFactor(now_ns, spec_.slow_start_ms);
}

void Pool::UpdateGauges(int64_t now_ns) {
  int n = 0;
  for (const auto& up : upstreams_) {
    Upstream& u = *up;
    const bool ok = u.health.Routable(now_ns);
    u.metrics.healthy->Set(ok ? 1 : 0);
    n += ok ? 1 : 0;
    if (u.metrics.scrape_age != nullptr)
      u.metrics.scrape_age->Set(u.scraped_ns > 0
                                    ? static_cast<double>(std::max<int64_t>(
                                          now_ns - u.scraped_ns, 0)) /
                                          1e9
                                    : -1);
    if (spec_.slow_start_ms <= 0 || now_ns <= 0) continue;
    const double factor =
        ok ? u.health.SlowStartFactor(now_ns, spec_.slow_start_ms) : 1;
    if (u.metrics.slow_start_weight != nullptr)
      u.metrics.slow_start_weight->Set(factor);
    const bool ramping = ok && factor < 1;
    if (ramping && !u.slow_start_active) {
      u.metrics.slow_starts->Increment();
      RL_LOG(kInfo,
             "gateway: pool {}: upstream {} is back; slow start: weight "
             "{:.0f}% rising to full over {}",
             name(), u.spec.name, factor * 100,
             FormatDurationMs(spec_.slow_start_ms));
    } else if (!ramping && u.slow_start_active && ok) {
      RL_LOG(kInfo, "gateway: pool {}: upstream {}: slow start done", name(),
             u.spec.name);
    }
    if (ok) u.slow_start_active = ramping;
  }
  metrics_.routable->Set(n);
}

std::vector<std::string> Pool::DiscoveredModels() const {
  std::set<std::string> all;
  for (const auto& u : upstreams_)
    all.insert(u->models.begin(), u->models.end());
  return {all.begin(), all.end()};
}

}  // namespace redline::gateway

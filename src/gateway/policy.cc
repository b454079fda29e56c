#include "gateway/policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gateway/affinity_policy.h"

namespace redline::gateway {
namespace {

constexpr double kLatencyHalfLifeNs = 10e9;

double Weight(const UpstreamLoad& u) { return u.weight > 0 ? u.weight : 1; }

// (requests + this one) x KV pressure / weight.
double RequestScore(const UpstreamLoad& u) {
  return (EffectiveRequests(u) + 1) * KvFactor(u) / Weight(u);
}

// nginx's smooth weighted round robin: each pick adds every eligible
// upstream's weight to its credit and takes the one with the most credit,
// which then pays the total. Weights 5,1,1 give a a b a c a a, not a a a a
// a b c.
class RoundRobin final : public RoutingPolicy {
 public:
  explicit RoundRobin(size_t n) : credit_(n, 0) {}
  std::optional<size_t> Pick(std::span<const UpstreamLoad> ups,
                             const RouteRequest&, int64_t) override {
    std::optional<size_t> best;
    double total = 0;
    for (size_t i = 0; i < ups.size(); ++i) {
      if (!ups[i].eligible) continue;
      credit_[i] += Weight(ups[i]);
      total += Weight(ups[i]);
      if (!best || credit_[i] > credit_[*best]) best = i;
    }
    if (best) credit_[*best] -= total;
    return best;
  }

 private:
  std::vector<double> credit_;
};

// Fewest of something per unit of weight; ties rotate so equal upstreams
// share the load instead of the first one taking every tie.
class LeastLoaded final : public RoutingPolicy {
  // Tokens in flight plus this request's; requests the upstream holds
  // beyond its own attempts (scraped) count at its own mean per attempt
  // (this request's estimate when it has none).
  static double TokenScore(const UpstreamLoad& u, const RouteRequest& r) {
    const double own = static_cast<double>(u.tokens_in_flight);
    const double per_request = u.in_flight > 0
                                   ? own / static_cast<double>(u.in_flight)
                                   : static_cast<double>(r.token_estimate);
    const double extra =
        std::max(0.0, EffectiveRequests(u) - static_cast<double>(u.in_flight));
    return (own + extra * per_request + static_cast<double>(r.token_estimate)) *
           KvFactor(u) / Weight(u);
  }

 public:
  explicit LeastLoaded(bool tokens) : tokens_(tokens) {}
  std::optional<size_t> Pick(std::span<const UpstreamLoad> ups,
                             const RouteRequest& request, int64_t) override {
    std::optional<size_t> best;
    double best_score = 0;
    const size_t n = ups.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (rotation_ + k) % n;
      if (!ups[i].eligible) continue;
      const double score =
          tokens_ ? TokenScore(ups[i], request) : RequestScore(ups[i]);
      if (!best || score < best_score) {
        best = i;
        best_score = score;
      }
    }
    ++rotation_;
    return best;
  }

 private:
  bool tokens_;
  size_t rotation_ = 0;
};

class LatencyP2C final : public RoutingPolicy {
 public:
  explicit LatencyP2C(uint64_t seed) : rng_(seed) {}
  std::optional<size_t> Pick(std::span<const UpstreamLoad> ups,
                             const RouteRequest&, int64_t now_ns) override {
    eligible_.clear();
    for (size_t i = 0; i < ups.size(); ++i)
      if (ups[i].eligible) eligible_.push_back(i);
    if (eligible_.empty()) return std::nullopt;
    if (eligible_.size() == 1) return eligible_[0];
    std::uniform_int_distribution<size_t> first(0, eligible_.size() - 1);
    std::uniform_int_distribution<size_t> second(0, eligible_.size() - 2);
    const size_t a = first(rng_);
    size_t b = second(rng_);
    if (b >= a) ++b;
    const size_t ia = eligible_[a], ib = eligible_[b];
    const double sa = Score(ups[ia], now_ns), sb = Score(ups[ib], now_ns);
    if (sa == sb) return (rng_() & 1) ? ia : ib;
    return sa < sb ? ia : ib;
  }

 private:
  static double Score(const UpstreamLoad& u, int64_t now_ns) {
    return DecayedTtftMs(u, now_ns) * RequestScore(u);
  }
  std::mt19937_64 rng_;
  std::vector<size_t> eligible_;  // scratch, reused
};

}  // namespace

Result<PolicyKind> ParsePolicyKind(std::string_view name) {
  if (name == "round_robin" || name == "round-robin")
    return PolicyKind::kRoundRobin;
  if (name == "least_outstanding" || name == "least-outstanding")
    return PolicyKind::kLeastOutstanding;
  if (name == "least_tokens" || name == "least-tokens")
    return PolicyKind::kLeastTokens;
  if (name == "latency") return PolicyKind::kLatency;
  if (name == "prefix_affinity" || name == "prefix-affinity")
    return PolicyKind::kPrefixAffinity;
  return Status::InvalidArgument(fmt::format(
      "unknown policy '{}' (round_robin, least_outstanding, least_tokens, "
      "latency, prefix_affinity)",
      name.substr(0, 64)));
}

std::string_view PolicyName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kRoundRobin:
      return "round_robin";
    case PolicyKind::kLeastOutstanding:
      return "least_outstanding";
    case PolicyKind::kLeastTokens:
      return "least_tokens";
    case PolicyKind::kLatency:
      return "latency";
    case PolicyKind::kPrefixAffinity:
      return "prefix_affinity";
  }
  return "unknown";
}

double EffectiveRequests(const UpstreamLoad& u) {
  const double own = static_cast<double>(u.in_flight);
  if (!u.scraped) return own;
  if (u.scrape_stale) return own + static_cast<double>(u.max_in_flight);
  return std::max(own, u.scraped_requests);
}

double KvFactor(const UpstreamLoad& u) {
  if (!u.scraped || u.scrape_stale || u.kv_usage <= 0.8) return 1;
  return 1 + 10 * (std::min(u.kv_usage, 1.0) - 0.8);
}

double DecayedTtftMs(const UpstreamLoad& u, int64_t now_ns) {
  if (u.ewma_ttft_ms <= 0) return 0;
  const double age_ns =
      static_cast<double>(std::max<int64_t>(now_ns - u.ewma_sample_ns, 0));
  return u.ewma_ttft_ms * std::exp2(-age_ns / kLatencyHalfLifeNs);
}

std::unique_ptr<RoutingPolicy> MakePolicy(PolicyKind kind,
                                          const std::vector<std::string>& names,
                                          const std::vector<double>& weights,
                                          const AffinityOptions& affinity,
                                          uint64_t seed) {
  switch (kind) {
    case PolicyKind::kRoundRobin:
      return std::make_unique<RoundRobin>(names.size());
    case PolicyKind::kLeastOutstanding:
      return std::make_unique<LeastLoaded>(false);
    case PolicyKind::kLeastTokens:
      return std::make_unique<LeastLoaded>(true);
    case PolicyKind::kLatency:
      return std::make_unique<LatencyP2C>(seed);
    case PolicyKind::kPrefixAffinity:
      return std::make_unique<PrefixAffinity>(names, weights, affinity);
  }
  return nullptr;
}

}  // namespace redline::gateway

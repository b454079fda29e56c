#include "gateway/affinity_policy.h"

#include <cmath>

namespace redline::gateway {

PrefixAffinity::PrefixAffinity(const std::vector<std::string>& names,
                               const std::vector<double>& weights,
                               const AffinityOptions& options)
    : options_(options) {
  std::vector<ConsistentHashRing::Node> nodes;
  for (size_t i = 0; i < names.size(); ++i)
    nodes.push_back({names[i], i < weights.size() ? weights[i] : 1.0});
  ring_.Build(nodes, std::max(options_.virtual_nodes, 1));
}

std::optional<size_t> PrefixAffinity::Pick(std::span<const UpstreamLoad> ups,
                                           const RouteRequest& request,
                                           int64_t now_ns) {
  // Without a key, or when the ring refuses everyone: fewest in flight per
  // weight, rotating ties.
  auto least = [&]() -> std::optional<size_t> {
    std::optional<size_t> best;
    double best_score = 0;
    for (size_t k = 0; k < ups.size(); ++k) {
      const size_t i = (rotation_ + k) % ups.size();
      if (!ups[i].eligible) continue;
      const double w = ups[i].weight > 0 ? ups[i].weight : 1;
      const double score =
          (EffectiveRequests(ups[i]) + 1) * KvFactor(ups[i]) / w;
      if (!best || score < best_score) {
        best = i;
        best_score = score;
      }
    }
    ++rotation_;
    return best;
  };
  if (!request.has_key) return least();

  if (auto it = table_.find(request.key); it != table_.end()) {
    const size_t known = it->second->second;
    if (known < ups.size() && ups[known].eligible) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return known;
    }
  }
  // A new session (or one whose upstream cannot take it now): the bound is
  // load_factor x the mean in flight over routable upstreams, counting this
  // request, in proportion to (slow-start scaled) weight. Requests are
  // EffectiveRequests, and an upstream's own count is scaled by KvFactor.
  double total_in_flight = 1;
  double total_weight = 0;
  for (const UpstreamLoad& u : ups) {
    if (!u.routable) continue;
    total_in_flight += EffectiveRequests(u);
    total_weight += u.weight > 0 ? u.weight : 1;
  }
  std::optional<size_t> chosen;
  if (total_weight > 0) {
    chosen = ring_.Walk(request.key, [&](size_t i) {
      if (i >= ups.size() || !ups[i].eligible) return false;
      const double w = ups[i].weight > 0 ? ups[i].weight : 1;
      const double bound =
          std::ceil(options_.load_factor * total_in_flight * w / total_weight);
      return (EffectiveRequests(ups[i]) + 1) * KvFactor(ups[i]) <= bound;
    });
  }
  if (!chosen) chosen = least();
  if (chosen) Remember(request.key, *chosen);
  (void)now_ns;
  return chosen;
}

void PrefixAffinity::Remember(uint64_t key, size_t upstream) {
  if (auto it = table_.find(key); it != table_.end()) {
    it->second->second = upstream;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  if (options_.max_sessions <= 0) return;
  if (static_cast<int64_t>(table_.size()) >= options_.max_sessions) {
    table_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, upstream);
  table_[key] = lru_.begin();
}

std::optional<size_t> PrefixAffinity::SessionOf(uint64_t key) const {
  auto it = table_.find(key);
  if (it == table_.end()) return std::nullopt;
  return it->second->second;
}

}  // namespace redline::gateway

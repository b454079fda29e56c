// PrefixAffinity: the prefix_affinity routing policy (policy.h describes
// the rule). Kept apart for its state: the hash ring and a bounded table of
// recent sessions.
//
// Thread-safety: thread-compatible (one loop thread). Memory: at most
// max_sessions table entries (~64 bytes each).
#ifndef REDLINE_GATEWAY_AFFINITY_POLICY_H_
#define REDLINE_GATEWAY_AFFINITY_POLICY_H_

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/hash_ring.h"
#include "gateway/policy.h"

namespace redline::gateway {

class PrefixAffinity final : public RoutingPolicy {
 public:
  PrefixAffinity(const std::vector<std::string>& names,
                 const std::vector<double>& weights,
                 const AffinityOptions& options);

  std::optional<size_t> Pick(std::span<const UpstreamLoad> upstreams,
                             const RouteRequest& request,
                             int64_t now_ns) override;

  // For tests: the upstream the session table holds for `key`.
  std::optional<size_t> SessionOf(uint64_t key) const;
  size_t sessions() const { return table_.size(); }

 private:
  void Remember(uint64_t key, size_t upstream);

  AffinityOptions options_;
  ConsistentHashRing ring_;
  // Most recent first; table_ points into it.
  std::list<std::pair<uint64_t, size_t>> lru_;
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, size_t>>::iterator>
      table_;
  size_t rotation_ = 0;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_AFFINITY_POLICY_H_

// Routing policies: which upstream of a pool gets the next request. Pure
// decisions over a snapshot of the pool (no sockets, no clock reads), so
// every policy is unit-tested by feeding it loads.
//
//   round_robin        smooth weighted round robin (nginx's): over any
//                      window each upstream gets its weight's share, evenly
//                      interleaved
//   least_outstanding  fewest requests in flight per unit of weight
//   least_tokens       fewest estimated tokens in flight (prompt bytes / 4
//                      + max_tokens) per unit of weight
//   latency            power of two choices: two distinct random eligible
//                      upstreams, the lower EWMA time-to-first-token x
//                      (in flight + 1) wins. An upstream's EWMA decays
//                      towards 0 (half-life 10 s) while it gets no
//                      samples, so one that was slow is tried again now and
//                      then instead of being starved forever
//   prefix_affinity    consistent-hash ring over the session key with
//                      bounded load (SGLang's router, Mirrokni et al.): a
//                      new session goes to the first upstream clockwise
//                      whose in-flight count stays within load_factor x the
//                      pool's mean (weighted); a known session (bounded LRU
//                      table) stays on its upstream while that one is
//                      eligible; requests without a key: least_outstanding
//
// Load: every policy but round_robin counts an upstream's requests as
// EffectiveRequests (its own in-flight attempts, or what its /metrics says
// it holds when that is more) and multiplies by KvFactor (busier as its KV
// cache fills). Slow start and configured weights reach every policy
// through UpstreamLoad::weight.
//
// Eligible: healthy, not ejected or backed off, below max_in_flight and not
// already tried by this request. Ties are broken by rotation or the seeded
// generator, never by position alone (that would pile ties on the first).
//
// Thread-safety: a policy has state (rotation, table, generator) and is
// used from the one loop thread of its pool.
#ifndef REDLINE_GATEWAY_POLICY_H_
#define REDLINE_GATEWAY_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gateway/routing_key.h"

namespace redline::gateway {

enum class PolicyKind {
  kRoundRobin,
  kLeastOutstanding,
  kLeastTokens,
  kLatency,
  kPrefixAffinity,
};

Result<PolicyKind> ParsePolicyKind(std::string_view name);
std::string_view PolicyName(PolicyKind kind);

// One upstream as a policy sees it.
struct UpstreamLoad {
  std::string_view name;
  // The configured weight x the slow-start factor (pool.h).
  double weight = 1;
  // May take this request now.
  bool eligible = false;
  // Healthy and not ejected or backed off (counts in the pool's mean load
  // even when saturated or already tried).
  bool routable = false;
  int64_t in_flight = 0;
  int64_t tokens_in_flight = 0;
  // Exponentially weighted TTFT; 0 until the first sample.
  double ewma_ttft_ms = 0;
  int64_t ewma_sample_ns = 0;
  // Its /metrics (scrape-metrics on): requests running + waiting, KV usage
  // (0..1, -1 unknown), and whether that is older than the staleness bound
  // (or missing). max_in_flight: the stale penalty.
  bool scraped = false;
  bool scrape_stale = false;
  double scraped_requests = 0;
  double kv_usage = -1;
  int64_t max_in_flight = 0;
};

// Requests the upstream holds as the policies count them: its own
// in-flight attempts; with scraping, the larger of that and the scraped
// running + waiting (other clients' requests, and queues the gateway did
// not fill, count too); with stale scraped data, its own in-flight plus
// max_in_flight (as if a full gateway's worth of requests queued behind
// them: avoided while fresher upstreams can take the request, still
// ordered by its own load when every upstream is stale).
double EffectiveRequests(const UpstreamLoad& u);
// 1 up to 80 % KV-cache usage, then rising linearly to 3 when full
// (1 + 10 x (usage - 0.8)): an upstream close to preempting or refusing
// counts as busier. 1 when unknown or stale.
double KvFactor(const UpstreamLoad& u);

struct AffinityOptions {
  double load_factor = 1.25;
  int virtual_nodes = 100;  // ring points per unit of weight
  int64_t max_sessions = 65536;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // An eligible upstream's index, or nullopt when none is eligible.
  // `upstreams` must keep the order (and size) the policy was built with.
  virtual std::optional<size_t> Pick(std::span<const UpstreamLoad> upstreams,
                                     const RouteRequest& request,
                                     int64_t now_ns) = 0;
};

// `names` and `weights`: the pool's upstreams in order (the ring places
// them by name). `seed` feeds the generator of the latency policy.
std::unique_ptr<RoutingPolicy> MakePolicy(PolicyKind kind,
                                          const std::vector<std::string>& names,
                                          const std::vector<double>& weights,
                                          const AffinityOptions& affinity,
                                          uint64_t seed);

// The EWMA TTFT the latency policy uses at `now_ns` (decayed by age).
double DecayedTtftMs(const UpstreamLoad& u, int64_t now_ns);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_POLICY_H_

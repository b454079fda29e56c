// CacheLayer: the gateway's response cache (docs/GATEWAY.md, "Response
// cache") — the per-request decision (class, TTL, whether to read and to
// store), the tiered lookup (in-process LRU, then Redis), single-flight for
// identical concurrent misses, the writer that tees a successful answer
// into the cache, and the replay of a hit (a body, or a stream's events
// with their original boundaries and optionally their recorded pace).
//
// What is never stored: error answers (non-2xx), streams that did not end
// with [DONE] or carried an error event, partial or cancelled answers, and
// finish_reason "length" unless cache.store-length.
//
// Purges reach every gateway sharing a Redis: a purge deletes the keys in
// Redis and this gateway's local tier, then appends itself to a purge log
// (the stream "<namespace>-purges", capped at ~1000 entries); every
// gateway reads the log every cache.redis.purge-poll and purges its own
// local tier likewise, so another gateway's local copies are gone within
// one poll interval (while Redis is unreachable, once it is back).
//
// Threading: loop thread only (Redis runs on the same loop, see
// redis_tier.h). Ownership: held by shared_ptr; tees hold a weak_ptr, so a
// writer that outlives the layer (the loop's task queue at shutdown)
// touches nothing. Stop() ends every callback into the gateway (waiters of
// single flights and paced replays are dropped).
#ifndef REDLINE_GATEWAY_CACHE_LAYER_H_
#define REDLINE_GATEWAY_CACHE_LAYER_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/request.h"
#include "base/result.h"
#include "gateway/cache_config.h"
#include "gateway/cache_key.h"
#include "gateway/gateway_metrics.h"
#include "gateway/redis_tier.h"
#include "gateway/response_cache.h"
#include "gateway/text_match.h"
#include "http/event_loop.h"
#include "http/server.h"

namespace redline::gateway {

// What the cache does with one request.
struct CacheDecision {
  bool lookup = false;  // may answer from the cache
  bool store = false;   // may store the answer
  // The x-redline-cache value when no lookup happens: "bypass" (the
  // request said no-cache) or "uncacheable".
  std::string verdict;
  std::string cls;
  int64_t ttl_ms = 0;
  int64_t max_age_ms = -1;  // s-maxage: older entries are not served
  bool pace_original = false;
  CacheKey key;
  std::string storage_key;
};

class CacheLayer : public std::enable_shared_from_this<CacheLayer> {
 public:
  using NowFn = std::function<int64_t()>;  // unix milliseconds

  CacheLayer(CacheConfig config, http::EventLoop& loop, GatewayMetrics& metrics,
             NowFn now = {});
  ~CacheLayer();
  // Compiles the rules and creates the Redis tier (when configured).
  Status Init();
  // On the loop thread once it runs: starts following the purge log
  // (with Redis and a purge-poll).
  void Start();
  void Stop();

  const CacheConfig& config() const { return config_; }

  // The class and TTL for a request, its overrides (body `cache` member,
  // Cache-Control / x-redline-cache-* headers) and its key.
  // InvalidArgument for a bad override (unknown class, negative TTL).
  Result<CacheDecision> Decide(const api::CompletionRequest& request,
                               std::string_view model,
                               std::string_view route_class,
                               const boost::json::object& body,
                               const http::ServerRequest* head);
  // The class rules alone (tests).
  std::string ClassFor(std::string_view model, std::string_view text) const;

  // Looks the decision's key up (local, then Redis). `done` runs once on
  // the loop thread (possibly before Lookup returns) with the entry (null on
  // a miss), the tier ("local", "redis") and the verdict ("hit", "miss",
  // "stale", "bypass").
  using LookupFn = std::function<void(std::shared_ptr<const CacheEntry>,
                                      std::string tier, std::string verdict)>;
  void Lookup(const CacheDecision& d, LookupFn done);

  // Single flight. kLead: the caller goes upstream and its tee (leader)
  // ends the flight; kAlone: it goes upstream outside any flight (single
  // flight off, nothing to store, or too many waiters); kWait: `fn` runs
  // later with the leader's stored entry, or null (the leader's answer was
  // not stored, or single-flight-wait passed: go upstream then).
  using WaitFn = std::function<void(std::shared_ptr<const CacheEntry>)>;
  enum class FlightRole { kAlone, kLead, kWait };
  FlightRole JoinOrLead(const CacheDecision& d, WaitFn fn);

  // A writer that adds `headers` to the answer and, when d.store, stores a
  // successful answer; `leader` ends the single flight of d's key.
  // `on_finish` (optional) runs once when the answer ended (or was
  // dropped).
  std::shared_ptr<http::ResponseWriter> Tee(
      const CacheDecision& d, std::shared_ptr<http::ResponseWriter> inner,
      std::vector<http::Header> headers, bool leader,
      std::function<void()> on_finish);

  // A writer that only adds `headers` and runs `on_finish` (routing without
  // a cache).
  static std::shared_ptr<http::ResponseWriter> HeaderTee(
      std::shared_ptr<http::ResponseWriter> inner,
      std::vector<http::Header> headers, std::function<void()> on_finish);

  // Answers from an entry; `headers` are added (x-redline-cache etc.).
  void Replay(std::shared_ptr<const CacheEntry> entry,
              const std::shared_ptr<http::ResponseWriter>& writer,
              std::vector<http::Header> headers, bool pace_original);
  // The standard headers of an answer: x-redline-cache, its class, Age
  // (hits), the tier (hits).
  static std::vector<http::Header> Headers(const std::string& verdict,
                                           const std::string& cls,
                                           const CacheEntry* hit,
                                           const std::string& tier,
                                           int64_t now_unix_ms);

  // Stores in both tiers (warm start and tees).
  void Store(const CacheDecision& d, std::shared_ptr<const CacheEntry> entry);
  // Purges keys "<namespace>:<prefix>" locally and in Redis; `done` gets
  // the local count, the Redis count (-1: Redis off or failed).
  void Purge(const std::string& prefix,
             std::function<void(int64_t local, int64_t redis)> done);

  int64_t NowMs() const { return now_(); }
  LocalCache& local() { return local_; }
  bool redis_enabled() const { return redis_ != nullptr; }

  // Ends d's single flight with no answer (its leader went away before a
  // tee existed); the waiters go upstream themselves.
  void AbandonFlight(const CacheDecision& d) {
    EndFlight(d.storage_key, nullptr);
  }

  // --- called by tees ---
  void Finished(const CacheDecision& d, std::shared_ptr<CacheEntry> entry,
                const char* skip_reason, bool leader);

 private:
  struct Rule {
    std::string cls;
    Regex regex;
    std::vector<std::string> keywords;  // lower case
    std::vector<std::string> models;
  };
  struct Waiter {
    std::unique_ptr<http::Timer> timer;
    WaitFn fn;
    bool done = false;
  };
  struct Flight {
    std::string canonical;
    std::vector<std::shared_ptr<Waiter>> waiters;
  };
  struct Pacer;
  int64_t ClassTtl(const std::string& cls) const;
  bool KnownClass(const std::string& cls) const;
  void EndFlight(const std::string& key, std::shared_ptr<const CacheEntry> e);
  void CountStoreTier(const char* tier);
  void CountEvictions(uint64_t before_lru, uint64_t before_expired);
  // The purge log: reads what other gateways purged since purge_cursor_
  // and applies it locally; re-arms itself every purge-poll.
  void PollPurges();
  void ApplyPurges(bool ok, std::vector<RedisTier::StreamEntry> entries);
  std::string PurgeLogKey() const { return config_.name_space + "-purges"; }

  CacheConfig config_;
  http::EventLoop& loop_;
  GatewayMetrics& metrics_;
  NowFn now_;
  std::vector<Rule> rules_;
  LocalCache local_;
  std::unique_ptr<RedisTier> redis_;
  std::unordered_map<std::string, Flight> flights_;
  std::map<uint64_t, std::unique_ptr<Pacer>> pacers_;
  uint64_t next_pacer_ = 1;
  bool stopped_ = false;
  // This process's id in the purge log (its own entries are skipped).
  const std::string instance_id_;
  std::unique_ptr<http::Timer> purge_timer_;
  // The last purge-log id applied; "" until the log's end was read.
  std::string purge_cursor_;
  bool purge_read_in_flight_ = false;

  // Metrics (families; children looked up per use).
  telemetry::CounterFamily* requests_;
  telemetry::CounterFamily* hits_;
  telemetry::CounterFamily* stores_;
  telemetry::CounterFamily* skipped_;
  telemetry::CounterFamily* evictions_;
  telemetry::CounterFamily* flight_waits_;
  telemetry::GaugeFamily* bytes_;
  telemetry::GaugeFamily* entries_;
  telemetry::CounterFamily* redis_errors_;
  telemetry::CounterFamily* redis_bypass_;
  telemetry::HistogramFamily* redis_latency_;
  RedisMetrics redis_metrics_;
  telemetry::Counter* remote_purges_ = nullptr;
  telemetry::Counter* remote_purged_entries_ = nullptr;

 public:
  // Counts one answer's verdict (x-redline-cache) by class.
  void CountVerdict(const std::string& cls, const std::string& verdict);
  // The gateway_cache_overhead_seconds child of a verdict and hit tier
  // ("" when not a hit).
  telemetry::Histogram* Overhead(const std::string& verdict,
                                 const std::string& tier) {
    return &overhead_->Labels({verdict, tier});
  }

 private:
  telemetry::HistogramFamily* overhead_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_CACHE_LAYER_H_

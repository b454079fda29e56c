// The response cache's shared tier: Redis through hiredis, on one worker
// thread with a bounded queue, so Redis I/O never blocks the gateway's
// event loop. Redis is optional and never a point of failure: every
// operation has a timeout (connect and command, in ms); when Redis is down
// the worker fails operations at once and reconnects with exponential
// backoff (100 ms doubling to 5 s); a full queue refuses at once. A failed
// Get is reported as an error, which the cache counts as a bypass and
// treats as a miss.
//
// Callbacks run on the event loop (posted). Ownership: owns the worker
// thread and the connection; the destructor stops the worker (operations
// still queued are dropped without their callbacks). Thread-safety: Get,
// Set and Purge from the loop thread; the counters from any thread.
#ifndef REDLINE_GATEWAY_REDIS_TIER_H_
#define REDLINE_GATEWAY_REDIS_TIER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "http/event_loop.h"
#include "telemetry/metrics.h"

struct redisContext;

namespace redline::gateway {

struct RedisOptions {
  std::string url;  // redis://host:port[/db] or unix:/path
  int64_t timeout_ms = 50;
  int64_t connect_timeout_ms = 200;
  int queue = 1024;
};

struct RedisMetrics {
  telemetry::Counter* get_errors = nullptr;
  telemetry::Counter* set_errors = nullptr;
  telemetry::Counter* refused = nullptr;  // down or queue full: not tried
  telemetry::Counter* reconnects = nullptr;
  telemetry::Histogram* get_latency = nullptr;
  telemetry::Histogram* set_latency = nullptr;
  telemetry::Gauge* up = nullptr;
};

class RedisTier {
 public:
  enum class Result { kFound, kNotFound, kError };
  using GetFn = std::function<void(Result, std::string value)>;
  using PurgeFn = std::function<void(int64_t deleted, bool ok)>;

  RedisTier(RedisOptions options, http::EventLoop& loop, RedisMetrics metrics);
  ~RedisTier();
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  void Get(std::string key, GetFn done);
  // SET key value PX ttl_ms; failures are counted, never reported.
  void Set(std::string key, std::string value, int64_t ttl_ms);
  // SCAN MATCH prefix* + DEL, bounded to 1,000,000 keys per call.
  void Purge(std::string prefix, PurgeFn done);

 private:
  struct Op {
    enum class Kind { kGet, kSet, kPurge } kind = Kind::kGet;
    std::string key, value;
    int64_t ttl_ms = 0;
    GetFn get_done;
    PurgeFn purge_done;
  };
  bool Enqueue(Op op);
  void Run();
  bool Connect();
  void Execute(Op& op);
  void Drop();

  const RedisOptions options_;
  http::EventLoop& loop_;
  const RedisMetrics metrics_;
  std::string host_, unix_path_;
  int port_ = 6379;
  int db_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  std::thread worker_;

  // Worker thread only.
  redisContext* ctx_ = nullptr;
  int64_t next_connect_ns_ = 0;
  int64_t backoff_ms_ = 100;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_REDIS_TIER_H_

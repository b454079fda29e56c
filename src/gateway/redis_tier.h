// The response cache's shared tier: Redis, spoken on the gateway's own event
// loop (an http::StreamSocket, commands encoded and replies decoded by
// hiredis), pipelined on one connection, so a lookup costs one round trip
// to Redis and no thread hand-off. Redis is optional and never a point of
// failure: every command has a timeout (`timeout_ms`: unanswered that long
// it fails, and its reply is dropped when it comes, so later replies still
// line up); a connection whose oldest command is unanswered for 4 x
// `timeout_ms` is closed and every command on it fails (Redis is stuck or
// the connection dead); the connect has `connect_timeout_ms`;
// after a failed connect operations fail at once and the tier reconnects
// with exponential backoff (100 ms doubling to 5 s); commands beyond
// `queue` (sent and unanswered, or waiting for the connection) are refused
// at once. A failed Get is reported as an error, which the cache counts as
// a bypass and treats as a miss.
//
// Callbacks run on the loop thread, never from inside Get/Set/Purge.
// Ownership: owns the connection; the destructor drops operations in
// progress without calling their callbacks. Thread-safety: loop thread
// only (construct, call and destroy there); the counters from any thread.
#ifndef REDLINE_GATEWAY_REDIS_TIER_H_
#define REDLINE_GATEWAY_REDIS_TIER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/event_loop.h"
#include "http/stream_socket.h"
#include "telemetry/metrics.h"

struct redisReader;
struct redisReply;

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
  // One entry of a Redis stream: its id ("ms-seq") and field/value pairs.
  struct StreamEntry {
    std::string id;
    std::vector<std::pair<std::string, std::string>> fields;
  };
  // ok false: the command failed (Redis down, timeout, error reply).
  using StreamFn = std::function<void(bool ok, std::vector<StreamEntry>)>;

  RedisTier(RedisOptions options, http::EventLoop& loop, RedisMetrics metrics);
  ~RedisTier();
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  void Get(std::string key, GetFn done);
  // SET key value PX ttl_ms; failures are counted, never reported.
  void Set(std::string key, std::string value, int64_t ttl_ms);
  // SCAN MATCH prefix* + DEL, bounded to 1,000,000 keys per call.
  void Purge(std::string prefix, PurgeFn done);
  // XADD key MAXLEN ~ max_len * field value ...; failures are counted,
  // never reported.
  void StreamAdd(std::string key,
                 const std::vector<std::pair<std::string, std::string>>& fields,
                 int64_t max_len);
  // XREAD COUNT count STREAMS key after_id: at most `count` entries after
  // `after_id`, oldest first (none: an empty list).
  void StreamRead(std::string key, std::string after_id, int count,
                  StreamFn done);
  // XREVRANGE key + - COUNT 1: the newest entry (none when the stream is
  // empty or absent).
  void StreamLast(std::string key, StreamFn done);

 private:
  struct PurgeState;
  struct Op {
    enum class Kind {
      kSelect,
      kGet,
      kSet,
      kScan,
      kDel,
      kStreamAdd,
      kStreamRead,
      kStreamLast
    } kind = Kind::kGet;
    std::string command;  // RESP bytes
    int64_t t_sent_ns = 0;
    uint64_t seq = 0;      // order of sending
    bool expired = false;  // timed out and failed; its reply is dropped
    GetFn get_done;
    StreamFn stream_done;
    std::shared_ptr<PurgeState> purge;
  };
  // Queues (and, when connected, sends) one command; false: refused.
  bool Submit(Op op);
  void Send(Op& op);
  void StartConnect();
  void OnConnected(const std::string& error);
  void OnData(std::string_view data);
  void OnReply(Op op, redisReply* reply);
  // Fails every operation and closes the connection; `connect_failed`
  // starts the backoff.
  void Drop(bool connect_failed);
  void Fail(Op& op);
  void ArmTimeout();
  void OnTimeout();
  // Fails the commands past their timeout (their replies, when they come,
  // are dropped); drops the connection when the oldest is past the
  // connection's limit.
  void Expire();
  void NextScan(const std::shared_ptr<PurgeState>& p);
  void EndPurge(const std::shared_ptr<PurgeState>& p, bool ok);
  static std::string Format(const std::vector<std::string_view>& args);

  const RedisOptions options_;
  http::EventLoop& loop_;
  const RedisMetrics metrics_;
  std::string host_, unix_path_;
  int port_ = 6379;
  int db_ = 0;

  http::StreamSocket socket_;
  redisReader* reader_ = nullptr;
  bool connected_ = false;
  bool connecting_ = false;
  int64_t next_connect_ns_ = 0;
  int64_t backoff_ms_ = 100;
  std::deque<Op> waiting_;  // before the connection is up
  std::deque<Op> sent_;     // unanswered, in order
  http::Timer connect_timer_;
  http::Timer timeout_timer_;
  bool timeout_timer_armed_ = false;
  uint64_t next_seq_ = 1;
  // Flipped by the destructor: a callback that destroyed this tier stops
  // the reply loop.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_REDIS_TIER_H_

#include "gateway/redis_tier.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>

#include "base/logging.h"

namespace redline::gateway {
namespace {

timeval Tv(int64_t ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Glob characters in a prefix must match themselves in SCAN MATCH.
std::string GlobEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

RedisTier::RedisTier(RedisOptions options, http::EventLoop& loop,
                     RedisMetrics metrics)
    : options_(std::move(options)), loop_(loop), metrics_(metrics) {
  std::string_view u = options_.url;
  if (u.starts_with("unix:")) {
    unix_path_ = std::string(u.substr(5));
  } else {
    u.remove_prefix(std::min<size_t>(u.size(), 8));  // "redis://"
    if (const size_t slash = u.find('/'); slash != std::string_view::npos) {
      std::string_view db = u.substr(slash + 1);
      std::from_chars(db.data(), db.data() + db.size(), db_);
      u = u.substr(0, slash);
    }
    if (const size_t colon = u.rfind(':'); colon != std::string_view::npos) {
      std::string_view p = u.substr(colon + 1);
      std::from_chars(p.data(), p.data() + p.size(), port_);
      u = u.substr(0, colon);
    }
    host_ = u.empty() ? "127.0.0.1" : std::string(u);
  }
  worker_ = std::thread([this] { Run(); });
}

RedisTier::~RedisTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  Drop();
}

bool RedisTier::Enqueue(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(queue_.size()) < options_.queue) {
      queue_.push_back(std::move(op));
      cv_.notify_one();
      return true;
    }
  }
  metrics_.refused->Increment();
  return false;
}

void RedisTier::Get(std::string key, GetFn done) {
  Op op{Op::Kind::kGet, std::move(key), {}, 0, std::move(done), {}};
  GetFn fallback = op.get_done;
  if (!Enqueue(std::move(op)))
    loop_.Post([fallback] { fallback(Result::kError, {}); });
}

void RedisTier::Set(std::string key, std::string value, int64_t ttl_ms) {
  Enqueue(Op{Op::Kind::kSet, std::move(key), std::move(value), ttl_ms, {}, {}});
}

void RedisTier::Purge(std::string prefix, PurgeFn done) {
  Op op{Op::Kind::kPurge, std::move(prefix), {}, 0, {}, std::move(done)};
  PurgeFn fallback = op.purge_done;
  if (!Enqueue(std::move(op))) loop_.Post([fallback] { fallback(0, false); });
}

void RedisTier::Run() {
  for (;;) {
    Op op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    Execute(op);
  }
}

void RedisTier::Drop() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  if (metrics_.up) metrics_.up->Set(0);
}

bool RedisTier::Connect() {
  if (ctx_ != nullptr) return true;
  const int64_t now = http::NowNs();
  if (now < next_connect_ns_) return false;
  metrics_.reconnects->Increment();
  const timeval ct = Tv(options_.connect_timeout_ms);
  redisContext* c = unix_path_.empty()
                        ? redisConnectWithTimeout(host_.c_str(), port_, ct)
                        : redisConnectUnixWithTimeout(unix_path_.c_str(), ct);
  bool ok = c != nullptr && c->err == 0 &&
            redisSetTimeout(c, Tv(options_.timeout_ms)) == REDIS_OK;
  if (ok && db_ != 0) {
    Reply r(static_cast<redisReply*>(redisCommand(c, "SELECT %d", db_)));
    ok = r != nullptr && r->type != REDIS_REPLY_ERROR;
  }
  if (!ok) {
    if (c != nullptr) redisFree(c);
    next_connect_ns_ = now + backoff_ms_ * 1'000'000;
    backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, 5000);
    return false;
  }
  ctx_ = c;
  backoff_ms_ = 100;
  if (metrics_.up) metrics_.up->Set(1);
  RL_LOG(kInfo, "gateway: cache: connected to Redis {}", options_.url);
  return true;
}

void RedisTier::Execute(Op& op) {
  const int64_t t0 = http::NowNs();
  auto fail = [&] {
    if (op.kind == Op::Kind::kGet) {
      GetFn fn = std::move(op.get_done);
      loop_.Post([fn] { fn(Result::kError, {}); });
    } else if (op.kind == Op::Kind::kPurge) {
      PurgeFn fn = std::move(op.purge_done);
      loop_.Post([fn] { fn(0, false); });
    }
  };
  if (!Connect()) {
    metrics_.refused->Increment();
    fail();
    return;
  }
  auto broken = [&](telemetry::Counter* errors) {
    errors->Increment();
    // A timeout or I/O error leaves the connection in an unknown state.
    if (ctx_->err != 0) Drop();
    fail();
  };
  switch (op.kind) {
    case Op::Kind::kGet: {
      Reply r(static_cast<redisReply*>(
          redisCommand(ctx_, "GET %b", op.key.data(), op.key.size())));
      metrics_.get_latency->Observe(static_cast<double>(http::NowNs() - t0) /
                                    1e9);
      if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
        broken(metrics_.get_errors);
        return;
      }
      Result res = Result::kNotFound;
      std::string value;
      if (r->type == REDIS_REPLY_STRING) {
        res = Result::kFound;
        value.assign(r->str, r->len);
      }
      GetFn fn = std::move(op.get_done);
      loop_.Post(
          [fn, res, v = std::move(value)]() mutable { fn(res, std::move(v)); });
      return;
    }
    case Op::Kind::kSet: {
      Reply r(static_cast<redisReply*>(redisCommand(
          ctx_, "SET %b %b PX %lld", op.key.data(), op.key.size(),
          op.value.data(), op.value.size(),
          static_cast<long long>(std::max<int64_t>(op.ttl_ms, 1)))));
      metrics_.set_latency->Observe(static_cast<double>(http::NowNs() - t0) /
                                    1e9);
      if (r == nullptr || r->type == REDIS_REPLY_ERROR)
        broken(metrics_.set_errors);
      return;
    }
    case Op::Kind::kPurge: {
      const std::string match = GlobEscape(op.key) + "*";
      std::string cursor = "0";
      int64_t deleted = 0;
      for (int rounds = 0; rounds < 10000; ++rounds) {
        Reply r(static_cast<redisReply*>(
            redisCommand(ctx_, "SCAN %s MATCH %b COUNT 100", cursor.c_str(),
                         match.data(), match.size())));
        if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
          broken(metrics_.get_errors);
          return;
        }
        cursor.assign(r->element[0]->str, r->element[0]->len);
        const redisReply* keys = r->element[1];
        for (size_t i = 0; i < keys->elements; ++i) {
          Reply d(static_cast<redisReply*>(redisCommand(
              ctx_, "DEL %b", keys->element[i]->str, keys->element[i]->len)));
          if (d == nullptr) {
            broken(metrics_.set_errors);
            return;
          }
          if (d->type == REDIS_REPLY_INTEGER) deleted += d->integer;
        }
        if (cursor == "0") break;
      }
      PurgeFn fn = std::move(op.purge_done);
      loop_.Post([fn, deleted] { fn(deleted, true); });
      return;
    }
  }
}

}  // namespace redline::gateway

#include "gateway/cache_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json/value.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <random>

#include "api/response.h"
#include "base/logging.h"
#include "gateway/sse_splitter.h"
#include "http/sse.h"

namespace redline::gateway {
namespace {

namespace json = boost::json;

constexpr int64_t kMaxPaceGapUs = 5'000'000;
// The purge log: entries read per command, and its length in Redis
// (trimmed approximately; a gateway away from Redis for more purges than
// this misses the oldest of them).
constexpr int kPurgeLogBatch = 100;
constexpr int64_t kPurgeLogMaxEntries = 1000;

std::string NewInstanceId() {
  std::random_device rd;
  const uint64_t a = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  const uint64_t b = static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", a ^ (b * 0x9e3779b97f4a7c15ull));
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool HasToken(std::string_view header, std::string_view token) {
  size_t pos = 0;
  while ((pos = header.find(token, pos)) != std::string_view::npos) {
    const bool start =
        pos == 0 || header[pos - 1] == ' ' || header[pos - 1] == ',';
    const size_t end = pos + token.size();
    const bool stop = end == header.size() || header[end] == ',' ||
                      header[end] == ' ' || header[end] == '=';
    if (start && stop) return true;
    pos = end;
  }
  return false;
}

// Seconds from a JSON number, as milliseconds; -1 when not a number >= 0.
int64_t SecondsMs(const json::value& v) {
  if (!v.is_number()) return -1;
  const double s = v.to_number<double>();
  if (!(s >= 0) || s > 10.0 * 365 * 86400) return -1;
  return static_cast<int64_t>(std::llround(s * 1000));
}

int64_t HeaderSecondsMs(std::string_view v) {
  double s = -1;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
  if (ec != std::errc() || !(s >= 0)) return -1;
  return static_cast<int64_t>(std::llround(s * 1000));
}

// The data payload of one raw SSE event ("" for comments).
std::string EventData(std::string_view raw) {
  std::string data;
  http::SseParser parser;
  auto take = [&](const http::SseEvent& e) {
    if (e.kind == http::SseEvent::Kind::kData)
      data.assign(e.data.data(), e.data.size());
  };
  parser.Feed(raw, take);
  parser.Finish(take);
  return data;
}

// Tees an answer into the cache while passing it to the client.
class CacheTee final : public http::ResponseWriter {
 public:
  CacheTee(std::weak_ptr<CacheLayer> layer, CacheDecision d,
           std::shared_ptr<http::ResponseWriter> inner,
           std::vector<http::Header> headers, bool leader,
           std::function<void()> on_finish, int64_t max_bytes,
           bool store_length)
      : layer_(std::move(layer)),
        d_(std::move(d)),
        inner_(std::move(inner)),
        headers_(std::move(headers)),
        leader_(leader),
        on_finish_(std::move(on_finish)),
        max_bytes_(max_bytes),
        store_length_(store_length) {}

  ~CacheTee() override { Finish(nullptr, "cancelled"); }

  void Respond(int status, std::vector<http::Header> headers,
               std::string body) override {
    Count();
    for (auto& h : headers_) headers.push_back(h);
    std::shared_ptr<CacheEntry> e;
    const char* skip = "no_store";
    if (d_.store) {
      skip = nullptr;
      if (status < 200 || status >= 300) {
        skip = "error";
      } else if (static_cast<int64_t>(body.size()) > max_bytes_) {
        skip = "too_large";
      } else {
        auto parsed = api::ParseResponse(body);
        if (!parsed.ok() || parsed->error) {
          skip = "error";
        } else if (parsed->finish_reason == "length" && !store_length_) {
          skip = "length";
        }
      }
      if (skip == nullptr) {
        e = NewEntry(status, headers);
        e->body = body;
      }
    }
    inner_->Respond(status, std::move(headers), std::move(body));
    Finish(std::move(e), skip);
  }

  void BeginStream(int status, std::vector<http::Header> headers) override {
    Count();
    for (auto& h : headers_) headers.push_back(h);
    status_ = status;
    recording_ = d_.store && status >= 200 && status < 300;
    if (recording_) entry_ = NewEntry(status, headers);
    t_last_ns_ = http::NowNs();
    inner_->BeginStream(status, std::move(headers));
  }

  void Write(std::string data) override {
    if (recording_) {
      splitter_.Feed(data, [this](std::string_view raw) { Record(raw); });
      if (splitter_.pending_bytes() > static_cast<size_t>(max_bytes_))
        Skip("too_large");
    }
    inner_->Write(std::move(data));
  }

  void End() override {
    std::shared_ptr<CacheEntry> e;
    const char* skip = d_.store ? skip_ : "no_store";
    if (d_.store && skip == nullptr) {
      if (status_ < 200 || status_ >= 300) {
        skip = "error";
      } else if (!splitter_.TakeRest().empty() || !saw_done_) {
        skip = "partial";
      } else if (entry_ != nullptr) {
        e = std::move(entry_);
      }
    }
    inner_->End();
    Finish(std::move(e), skip);
  }

  void Abort() override {
    inner_->Abort();
    Finish(nullptr, "partial");
  }
  bool peer_closed() const override { return inner_->peer_closed(); }
  void SetOnPeerClosed(std::function<void()> fn) override {
    inner_->SetOnPeerClosed(std::move(fn));
  }
  size_t pending_bytes() const override { return inner_->pending_bytes(); }
  void SetOnWritable(std::function<void()> fn) override {
    inner_->SetOnWritable(std::move(fn));
  }

 private:
  std::shared_ptr<CacheEntry> NewEntry(int status,
                                       const std::vector<http::Header>& h) {
    auto e = std::make_shared<CacheEntry>();
    auto layer = layer_.lock();
    e->canonical = d_.key.canonical;
    e->cls = d_.cls;
    e->stored_unix_ms = layer ? layer->NowMs() : WallMs();
    e->ttl_ms = d_.ttl_ms;
    e->status = status;
    e->stream = false;
    for (const http::Header& x : h) {
      if (x.name == "Content-Type") e->content_type = x.value;
      if (x.name == "X-Gateway-Upstream") e->upstream = x.value;
    }
    return e;
  }

  // Counts the verdict this answer carries (x-redline-cache).
  void Count() {
    if (auto layer = layer_.lock()) {
      for (const http::Header& x : headers_)
        if (x.name == "x-redline-cache") layer->CountVerdict(d_.cls, x.value);
    }
  }

  void Record(std::string_view raw) {
    if (!recording_ || entry_ == nullptr) return;
    const int64_t now = http::NowNs();
    bytes_ += static_cast<int64_t>(raw.size());
    if (bytes_ > max_bytes_) {
      Skip("too_large");
      return;
    }
    const std::string data = EventData(raw);
    if (data.empty()) return;  // keep-alive comments are not replayed
    if (saw_done_) {
      Skip("partial");
      return;
    }
    if (data == "[DONE]") {
      saw_done_ = true;
    } else {
      api::StreamChunk chunk;
      const Status s = api::ParseStreamChunk(data, &chunk);
      if (!s.ok() || chunk.error) {
        Skip("error");
        return;
      }
      if (chunk.has_finish && chunk.finish_reason == "length" &&
          !store_length_) {
        Skip("length");
        return;
      }
    }
    entry_->stream = true;
    entry_->events.push_back({std::string(raw), (now - t_last_ns_) / 1000});
    t_last_ns_ = now;
  }

  void Skip(const char* why) {
    if (skip_ == nullptr) skip_ = why;
    recording_ = false;
    entry_.reset();
  }

  void Finish(std::shared_ptr<CacheEntry> e, const char* skip) {
    if (finished_) return;
    finished_ = true;
    if (auto layer = layer_.lock())
      layer->Finished(d_, std::move(e), skip, leader_);
    if (on_finish_) on_finish_();
  }

  std::weak_ptr<CacheLayer> layer_;
  const CacheDecision d_;
  std::shared_ptr<http::ResponseWriter> inner_;
  std::vector<http::Header> headers_;
  const bool leader_;
  std::function<void()> on_finish_;
  const int64_t max_bytes_;
  const bool store_length_;
  bool finished_ = false;
  int status_ = 0;
  bool recording_ = false;
  bool saw_done_ = false;
  const char* skip_ = nullptr;
  int64_t bytes_ = 0;
  int64_t t_last_ns_ = 0;
  SseSplitter splitter_;
  std::shared_ptr<CacheEntry> entry_;
};

}  // namespace

// Replays a stream at its recorded pace, one timer per event.
struct CacheLayer::Pacer {
  Pacer(http::EventLoop& loop, std::shared_ptr<const CacheEntry> e,
        std::shared_ptr<http::ResponseWriter> w)
      : timer(loop), entry(std::move(e)), writer(std::move(w)) {}
  http::Timer timer;
  std::shared_ptr<const CacheEntry> entry;
  std::shared_ptr<http::ResponseWriter> writer;
  size_t next = 0;
  std::function<void()> step;
};

CacheLayer::CacheLayer(CacheConfig config, http::EventLoop& loop,
                       GatewayMetrics& metrics, NowFn now)
    : config_(std::move(config)),
      loop_(loop),
      metrics_(metrics),
      now_(now ? std::move(now) : NowFn(WallMs)),
      local_(config_.max_bytes),
      instance_id_(NewInstanceId()) {
  auto& r = metrics_.registry();
  const std::string p = metrics_.prefix() + "gateway_cache_";
  requests_ = &r.AddCounter(
      p + "requests_total",
      "Answers by cache verdict (x-redline-cache: hit, miss, bypass, stale, "
      "uncacheable) and class",
      {"class", "result"});
  hits_ = &r.AddCounter(p + "hits_total", "Answers served from the cache",
                        {"class", "tier"});
  stores_ =
      &r.AddCounter(p + "stores_total", "Answers stored, by tier", {"tier"});
  skipped_ = &r.AddCounter(
      p + "store_skipped_total",
      "Answers not stored: error, partial, length, too_large, no_store, "
      "cancelled",
      {"reason"});
  evictions_ = &r.AddCounter(p + "evictions_total",
                             "Local entries dropped: lru (byte budget) or "
                             "expired",
                             {"reason"});
  flight_waits_ = &r.AddCounter(
      p + "single_flight_waits_total",
      "Identical concurrent misses that waited for the first: served, "
      "leader_failed, timeout, overflow",
      {"outcome"});
  bytes_ = &r.AddGauge(p + "bytes", "Bytes held by the local tier", {"tier"});
  entries_ = &r.AddGauge(p + "entries", "Entries in the local tier", {"tier"});
  redis_errors_ =
      &r.AddCounter(p + "redis_errors_total",
                    "Redis commands that failed or timed out", {"op"});
  redis_bypass_ = &r.AddCounter(
      p + "redis_bypass_total",
      "Redis operations not tried: Redis down (backing off) or queue full", {});
  redis_latency_ = &r.AddHistogram(p + "redis_latency_seconds",
                                   "Redis command round trips", {"op"},
                                   {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25});
  overhead_ = &r.AddHistogram(
      p + "overhead_seconds",
      "The gateway's own time per request by cache verdict and hit tier: "
      "for hits arrival to the answer handed to the socket (a Redis round "
      "trip included), otherwise as overhead_seconds (arrival to attempt "
      "sent plus commit to forwarded, the lookup included)",
      {"result", "tier"},
      {0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
       0.0025, 0.005, 0.01, 0.025, 0.1});
  redis_metrics_.get_errors = &redis_errors_->Labels({"get"});
  redis_metrics_.set_errors = &redis_errors_->Labels({"set"});
  redis_metrics_.refused = &redis_bypass_->Labels(std::vector<std::string>{});
  redis_metrics_.reconnects =
      &r.AddCounter(p + "redis_connects_total", "Connection attempts to Redis")
           .Labels(std::vector<std::string>{});
  redis_metrics_.get_latency = &redis_latency_->Labels({"get"});
  redis_metrics_.set_latency = &redis_latency_->Labels({"set"});
  redis_metrics_.up = &r.AddGauge(p + "redis_up", "1 while connected to Redis")
                           .Labels(std::vector<std::string>{});
  remote_purges_ =
      &r.AddCounter(p + "remote_purges_total",
                    "Purges by other gateways (read from the Redis purge "
                    "log) applied to the local tier")
           .Labels(std::vector<std::string>{});
  remote_purged_entries_ = &r.AddCounter(p + "remote_purged_entries_total",
                                         "Local entries those purges removed")
                                .Labels(std::vector<std::string>{});
  telemetry::Gauge* b = &bytes_->Labels({"local"});
  telemetry::Gauge* n = &entries_->Labels({"local"});
  // Rendered on the loop thread (the gateway serves /metrics there).
  r.AddCollector([this, b, n] {
    b->Set(static_cast<double>(local_.bytes()));
    n->Set(static_cast<double>(local_.size()));
  });
}

CacheLayer::~CacheLayer() { Stop(); }

Status CacheLayer::Init() {
  RL_RETURN_IF_ERROR(ValidateCacheConfig(config_));
  const std::vector<CacheRuleSpec> specs =
      config_.rules.empty() ? DefaultCacheRules() : config_.rules;
  for (const CacheRuleSpec& s : specs) {
    Rule rule;
    rule.cls = s.cls;
    if (!s.regex.empty()) {
      RL_ASSIGN_OR_RETURN(rule.regex, Regex::Compile(s.regex));
    }
    for (const std::string& k : s.keywords) rule.keywords.push_back(Lower(k));
    rule.models = s.models;
    rules_.push_back(std::move(rule));
  }
  if (!config_.redis_url.empty()) {
    RedisOptions o;
    o.url = config_.redis_url;
    o.timeout_ms = config_.redis_timeout_ms;
    o.connect_timeout_ms = config_.redis_connect_timeout_ms;
    o.queue = config_.redis_queue;
    redis_ = std::make_unique<RedisTier>(o, loop_, redis_metrics_);
  }
  return Status::Ok();
}

void CacheLayer::Start() {
  if (redis_ == nullptr || config_.redis_purge_poll_ms <= 0 || stopped_) return;
  purge_timer_ = std::make_unique<http::Timer>(loop_);
  PollPurges();
}

void CacheLayer::Stop() {
  stopped_ = true;
  flights_.clear();
  pacers_.clear();
  purge_timer_.reset();
  redis_.reset();
}

void CacheLayer::PollPurges() {
  if (stopped_ || redis_ == nullptr || purge_read_in_flight_) return;
  purge_read_in_flight_ = true;
  std::weak_ptr<CacheLayer> weak = weak_from_this();
  auto done = [weak](bool ok, std::vector<RedisTier::StreamEntry> entries) {
    if (auto self = weak.lock()) self->ApplyPurges(ok, std::move(entries));
  };
  // Until the log's end is known, only that is asked: purges from before
  // this process started concern entries it never held.
  if (purge_cursor_.empty()) {
    redis_->StreamLast(PurgeLogKey(), done);
  } else {
    redis_->StreamRead(PurgeLogKey(), purge_cursor_, kPurgeLogBatch, done);
  }
}

void CacheLayer::ApplyPurges(bool ok,
                             std::vector<RedisTier::StreamEntry> entries) {
  purge_read_in_flight_ = false;
  if (stopped_) return;
  bool more = false;
  if (ok && purge_cursor_.empty()) {
    purge_cursor_ = entries.empty() ? "0-0" : entries.front().id;
    more = true;  // read what came after it at once
  } else if (ok) {
    for (const RedisTier::StreamEntry& e : entries) {
      purge_cursor_ = e.id;
      std::string_view origin, prefix;
      bool has_prefix = false;
      for (const auto& [f, v] : e.fields) {
        if (f == "origin") origin = v;
        if (f == "prefix") {
          prefix = v;
          has_prefix = true;
        }
      }
      if (!has_prefix || origin == instance_id_) continue;
      remote_purged_entries_->Increment(static_cast<double>(
          local_.Purge(config_.name_space + ":" + std::string(prefix))));
      remote_purges_->Increment();
    }
    more = static_cast<int>(entries.size()) >= kPurgeLogBatch;
  }
  if (more) {
    std::weak_ptr<CacheLayer> weak = weak_from_this();
    loop_.Post([weak] {
      if (auto self = weak.lock()) self->PollPurges();
    });
    return;
  }
  purge_timer_->ExpireAfter(config_.redis_purge_poll_ms * 1'000'000,
                            [this] { PollPurges(); });
}

int64_t CacheLayer::ClassTtl(const std::string& cls) const {
  for (const CacheClassSpec& c : config_.classes)
    if (c.name == cls) return c.ttl_ms;
  return 0;
}

bool CacheLayer::KnownClass(const std::string& cls) const {
  return std::any_of(config_.classes.begin(), config_.classes.end(),
                     [&](const CacheClassSpec& c) { return c.name == cls; });
}

std::string CacheLayer::ClassFor(std::string_view model,
                                 std::string_view text) const {
  std::string lowered;
  for (const Rule& r : rules_) {
    if (!r.models.empty() &&
        std::find(r.models.begin(), r.models.end(), model) == r.models.end())
      continue;
    if (!r.regex.empty() && !r.regex.Search(text)) continue;
    if (!r.keywords.empty()) {
      if (lowered.empty()) lowered = Lower(text);
      const bool any = std::any_of(
          r.keywords.begin(), r.keywords.end(), [&](const std::string& k) {
            return lowered.find(k) != std::string::npos;
          });
      if (!any) continue;
    }
    return r.cls;
  }
  return config_.default_class;
}

Result<CacheDecision> CacheLayer::Decide(const api::CompletionRequest& request,
                                         std::string_view model,
                                         std::string_view route_class,
                                         const json::object& body,
                                         const http::ServerRequest* head) {
  CacheDecision d;
  std::string cls;
  int64_t ttl_ms = -1;
  bool no_cache = false, no_store = false;
  if (const json::value* c = body.if_contains("cache"); c && !c->is_null()) {
    if (!c->is_object())
      return Status::InvalidArgument(
          "'cache' must be an object: {ttl, class, no-cache, no-store, "
          "s-maxage, pace}");
    for (const auto& kv : c->get_object()) {
      std::string k(kv.key());
      std::replace(k.begin(), k.end(), '_', '-');
      const json::value& v = kv.value();
      if (k == "ttl") {
        ttl_ms = SecondsMs(v);
        if (ttl_ms < 0)
          return Status::InvalidArgument("cache.ttl: seconds >= 0");
      } else if (k == "s-maxage") {
        d.max_age_ms = SecondsMs(v);
        if (d.max_age_ms < 0)
          return Status::InvalidArgument("cache.s-maxage: seconds >= 0");
      } else if (k == "class" || k == "namespace-class") {
        if (!v.is_string())
          return Status::InvalidArgument("cache.class must be a string");
        cls = std::string(v.get_string());
      } else if (k == "no-cache" || k == "no-store") {
        if (!v.is_bool())
          return Status::InvalidArgument("cache." + k + " must be a boolean");
        (k == "no-cache" ? no_cache : no_store) = v.get_bool();
      } else if (k == "pace") {
        d.pace_original = v.is_string() && v.get_string() == "original";
      }
    }
  }
  if (head != nullptr) {
    const std::string_view cc = head->HeaderValue("Cache-Control");
    if (HasToken(cc, "no-cache")) no_cache = true;
    if (HasToken(cc, "no-store")) no_store = true;
    if (const size_t p = cc.find("s-maxage="); p != std::string_view::npos) {
      std::string_view v = cc.substr(p + 9);
      v = v.substr(0, v.find(','));
      d.max_age_ms = HeaderSecondsMs(v);
      if (d.max_age_ms < 0)
        return Status::InvalidArgument("Cache-Control s-maxage: seconds >= 0");
    }
    if (std::string_view c = head->HeaderValue("x-redline-cache-class");
        !c.empty())
      cls = std::string(c);
    if (std::string_view t = head->HeaderValue("x-redline-cache-ttl");
        !t.empty()) {
      ttl_ms = HeaderSecondsMs(t);
      if (ttl_ms < 0)
        return Status::InvalidArgument("x-redline-cache-ttl: seconds >= 0");
    }
    if (head->HeaderValue("x-redline-cache-pace") == "original")
      d.pace_original = true;
  }
  if (!cls.empty() && !KnownClass(cls))
    return Status::InvalidArgument(
        fmt::format("cache class '{}' is not configured",
                    std::string_view(cls).substr(0, 64)));
  if (cls.empty()) cls = ClassFor(model, LastUserText(request));
  d.cls = cls;
  d.ttl_ms = ttl_ms >= 0 ? ttl_ms : ClassTtl(cls);
  d.key =
      BuildCacheKey(request, model, route_class, body, config_.normalize_text);
  d.storage_key = StorageKey(config_.name_space, cls, model, d.key.hash_hex);
  const auto per_model = config_.model_deterministic_only.find(model);
  const bool deterministic_only =
      per_model != config_.model_deterministic_only.end()
          ? per_model->second
          : config_.deterministic_only;
  const bool deterministic = !deterministic_only || IsDeterministic(request);
  if (d.ttl_ms <= 0 || !deterministic) {
    d.verdict = "uncacheable";
    return d;
  }
  d.lookup = !no_cache;
  d.store = !no_store;
  if (!d.lookup) d.verdict = "bypass";
  return d;
}

void CacheLayer::Lookup(const CacheDecision& d, LookupFn done) {
  const int64_t now = now_();
  auto fresh = [&](const CacheEntry& e) {
    return d.max_age_ms < 0 || now - e.stored_unix_ms <= d.max_age_ms;
  };
  const uint64_t ev = local_.evictions(), ex = local_.expirations();
  LocalCache::Found f = local_.Get(d.storage_key, d.key.canonical, now);
  CountEvictions(ev, ex);
  if (f.outcome == LocalCache::Outcome::kHit) {
    if (fresh(*f.entry)) {
      hits_->Labels({d.cls, "local"}).Increment();
      done(std::move(f.entry), "local", "hit");
      return;
    }
    done(nullptr, "", "stale");
    return;
  }
  const std::string local_verdict =
      f.outcome == LocalCache::Outcome::kExpired ? "stale" : "miss";
  if (redis_ == nullptr || stopped_) {
    done(nullptr, "", local_verdict);
    return;
  }
  // Redis answers within its timeouts; the timer bounds a backed-up queue.
  struct Pending {
    explicit Pending(http::EventLoop& loop) : timer(loop) {}
    http::Timer timer;
    LookupFn done;
    bool finished = false;
  };
  auto pending = std::make_shared<Pending>(loop_);
  pending->done = std::move(done);
  std::weak_ptr<CacheLayer> self = weak_from_this();
  pending->timer.ExpireAfter(
      (config_.redis_timeout_ms * 4 + config_.redis_connect_timeout_ms) *
          1'000'000,
      [pending, self] {
        if (pending->finished) return;
        pending->finished = true;
        if (auto l = self.lock()) l->redis_metrics_.refused->Increment();
        pending->done(nullptr, "", "bypass");
      });
  const CacheDecision dc = d;
  redis_->Get(d.storage_key, [pending, self, dc, local_verdict](
                                 RedisTier::Result res, std::string value) {
    if (pending->finished) return;
    pending->finished = true;
    pending->timer.Cancel();
    auto l = self.lock();
    if (!l || l->stopped_) return;
    if (res == RedisTier::Result::kError) {
      pending->done(nullptr, "", "bypass");
      return;
    }
    if (res == RedisTier::Result::kNotFound) {
      pending->done(nullptr, "", local_verdict);
      return;
    }
    auto e = DecodeEntry(value);
    const int64_t t = l->now_();
    if (!e.ok() || e->canonical != dc.key.canonical) {
      // A foreign or colliding value is a miss, never an answer.
      pending->done(nullptr, "", local_verdict);
      return;
    }
    if (t >= e->ExpiresUnixMs() ||
        (dc.max_age_ms >= 0 && t - e->stored_unix_ms > dc.max_age_ms)) {
      pending->done(nullptr, "", "stale");
      return;
    }
    auto entry = std::make_shared<const CacheEntry>(std::move(*e));
    const uint64_t ev2 = l->local_.evictions();
    l->local_.Put(dc.storage_key, entry);
    l->CountEvictions(ev2, l->local_.expirations());
    l->hits_->Labels({dc.cls, "redis"}).Increment();
    pending->done(std::move(entry), "redis", "hit");
  });
}

CacheLayer::FlightRole CacheLayer::JoinOrLead(const CacheDecision& d,
                                              WaitFn fn) {
  if (stopped_ || config_.single_flight_wait_ms <= 0 || !d.store)
    return FlightRole::kAlone;
  auto it = flights_.find(d.storage_key);
  if (it == flights_.end()) {
    flights_[d.storage_key].canonical = d.key.canonical;
    return FlightRole::kLead;
  }
  Flight& f = it->second;
  if (f.canonical != d.key.canonical) return FlightRole::kAlone;
  if (static_cast<int>(f.waiters.size()) >= config_.max_single_flight_waiters) {
    flight_waits_->Labels({"overflow"}).Increment();
    return FlightRole::kAlone;
  }
  auto w = std::make_shared<Waiter>();
  w->timer = std::make_unique<http::Timer>(loop_);
  w->fn = std::move(fn);
  std::weak_ptr<Waiter> weak = w;
  w->timer->ExpireAfter(config_.single_flight_wait_ms * 1'000'000,
                        [this, weak] {
                          auto w = weak.lock();
                          if (!w || w->done) return;
                          w->done = true;
                          flight_waits_->Labels({"timeout"}).Increment();
                          WaitFn fn = std::move(w->fn);
                          fn(nullptr);
                        });
  f.waiters.push_back(std::move(w));
  return FlightRole::kWait;
}

void CacheLayer::EndFlight(const std::string& key,
                           std::shared_ptr<const CacheEntry> e) {
  auto it = flights_.find(key);
  if (it == flights_.end()) return;
  std::vector<std::shared_ptr<Waiter>> waiters = std::move(it->second.waiters);
  flights_.erase(it);
  // Posted: the leader's writer is inside its own Respond/End here.
  loop_.Post([waiters = std::move(waiters), e, self = weak_from_this()] {
    auto l = self.lock();
    if (!l || l->stopped_) return;
    for (const auto& w : waiters) {
      if (w->done) continue;
      w->done = true;
      w->timer->Cancel();
      l->flight_waits_->Labels({e ? "served" : "leader_failed"}).Increment();
      WaitFn fn = std::move(w->fn);
      fn(e);
    }
  });
}

std::shared_ptr<http::ResponseWriter> CacheLayer::Tee(
    const CacheDecision& d, std::shared_ptr<http::ResponseWriter> inner,
    std::vector<http::Header> headers, bool leader,
    std::function<void()> on_finish) {
  return std::make_shared<CacheTee>(
      weak_from_this(), d, std::move(inner), std::move(headers), leader,
      std::move(on_finish), config_.max_entry_bytes, config_.store_length);
}

std::shared_ptr<http::ResponseWriter> CacheLayer::HeaderTee(
    std::shared_ptr<http::ResponseWriter> inner,
    std::vector<http::Header> headers, std::function<void()> on_finish) {
  return std::make_shared<CacheTee>(
      std::weak_ptr<CacheLayer>(), CacheDecision(), std::move(inner),
      std::move(headers), false, std::move(on_finish), 1, false);
}

void CacheLayer::Finished(const CacheDecision& d,
                          std::shared_ptr<CacheEntry> entry,
                          const char* skip_reason, bool leader) {
  if (stopped_) return;
  std::shared_ptr<const CacheEntry> stored;
  if (entry != nullptr) {
    stored = std::move(entry);
    Store(d, stored);
  } else if (skip_reason != nullptr && d.store) {
    skipped_->Labels({skip_reason}).Increment();
  }
  if (leader) EndFlight(d.storage_key, stored);
}

void CacheLayer::Store(const CacheDecision& d,
                       std::shared_ptr<const CacheEntry> entry) {
  if (stopped_ || entry->ttl_ms <= 0) return;
  if (redis_ != nullptr) {
    redis_->Set(d.storage_key,
                EncodeEntry(*entry, config_.compress_above_bytes),
                entry->ttl_ms);
    stores_->Labels({"redis"}).Increment();
  }
  const uint64_t ev = local_.evictions(), ex = local_.expirations();
  local_.Put(d.storage_key, std::move(entry));
  CountEvictions(ev, ex);
  stores_->Labels({"local"}).Increment();
}

void CacheLayer::CountEvictions(uint64_t before_lru, uint64_t before_expired) {
  if (local_.evictions() > before_lru)
    evictions_->Labels({"lru"}).Increment(
        static_cast<double>(local_.evictions() - before_lru));
  if (local_.expirations() > before_expired)
    evictions_->Labels({"expired"})
        .Increment(static_cast<double>(local_.expirations() - before_expired));
}

void CacheLayer::CountVerdict(const std::string& cls,
                              const std::string& verdict) {
  requests_->Labels({cls, verdict}).Increment();
}

std::vector<http::Header> CacheLayer::Headers(const std::string& verdict,
                                              const std::string& cls,
                                              const CacheEntry* hit,
                                              const std::string& tier,
                                              int64_t now_unix_ms) {
  std::vector<http::Header> h;
  h.push_back({"x-redline-cache", verdict});
  if (!cls.empty()) h.push_back({"x-redline-cache-class", cls});
  if (hit != nullptr) {
    h.push_back({"Age", std::to_string(std::max<int64_t>(
                            (now_unix_ms - hit->stored_unix_ms) / 1000, 0))});
    h.push_back({"x-redline-cache-tier", tier});
  }
  return h;
}

void CacheLayer::Replay(std::shared_ptr<const CacheEntry> entry,
                        const std::shared_ptr<http::ResponseWriter>& writer,
                        std::vector<http::Header> headers, bool pace_original) {
  CountVerdict(entry->cls, "hit");
  headers.push_back({"Content-Type", entry->content_type.empty()
                                         ? std::string("application/json")
                                         : entry->content_type});
  if (!entry->upstream.empty())
    headers.push_back({"X-Gateway-Upstream", entry->upstream});
  if (!entry->stream) {
    writer->Respond(entry->status, std::move(headers), entry->body);
    return;
  }
  headers.push_back({"Cache-Control", "no-cache"});
  headers.push_back({"X-Accel-Buffering", "no"});
  writer->BeginStream(entry->status, std::move(headers));
  if (!pace_original || stopped_) {
    for (const CacheEvent& ev : entry->events) writer->Write(ev.raw);
    writer->End();
    return;
  }
  const uint64_t id = next_pacer_++;
  auto p = std::make_unique<Pacer>(loop_, std::move(entry), writer);
  Pacer* raw = p.get();
  pacers_[id] = std::move(p);
  // One event per timer; the pacer erases itself (from a posted task) at
  // the end or when the client left, which also drops its timer.
  raw->step = [this, raw, id] {
    if (stopped_) return;
    if (raw->writer->peer_closed() || raw->next >= raw->entry->events.size()) {
      if (!raw->writer->peer_closed()) raw->writer->End();
      loop_.Post([id, self = weak_from_this()] {
        if (auto l = self.lock()) l->pacers_.erase(id);
      });
      return;
    }
    raw->writer->Write(raw->entry->events[raw->next].raw);
    ++raw->next;
    const int64_t gap_us =
        raw->next < raw->entry->events.size()
            ? std::min(raw->entry->events[raw->next].gap_us, kMaxPaceGapUs)
            : 0;
    raw->timer.ExpireAfter(gap_us * 1000, [raw] { raw->step(); });
  };
  const int64_t first_us =
      raw->entry->events.empty()
          ? 0
          : std::min(raw->entry->events[0].gap_us, kMaxPaceGapUs);
  raw->timer.ExpireAfter(first_us * 1000, [raw] { raw->step(); });
}

void CacheLayer::Purge(const std::string& prefix,
                       std::function<void(int64_t, int64_t)> done) {
  const std::string full = config_.name_space + ":" + prefix;
  const int64_t local = local_.Purge(full);
  if (redis_ == nullptr) {
    done(local, -1);
    return;
  }
  // The log entry goes out after the keys are gone from Redis: a gateway
  // applying it earlier could refill its local tier from Redis.
  std::weak_ptr<CacheLayer> weak = weak_from_this();
  redis_->Purge(full, [weak, prefix, local, done](int64_t n, bool ok) {
    if (auto self = weak.lock(); self && self->redis_ != nullptr)
      self->redis_->StreamAdd(
          self->PurgeLogKey(),
          {{"prefix", prefix}, {"origin", self->instance_id_}},
          kPurgeLogMaxEntries);
    done(local, ok ? n : -1);
  });
}

}  // namespace redline::gateway

// Redis on the loop: commands are written as they come (pipelined) and
// answered in order, so `sent_` is a FIFO that lines replies up with their
// operations. One lazily re-armed timer watches the oldest unanswered
// command instead of a timer per command: it fires at the head's deadline
// or earlier (then re-arms for the new head), never per command.
#include "gateway/redis_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>

#include "base/logging.h"

namespace redline::gateway {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int kMaxScanRounds = 10000;  // x COUNT 100: 1,000,000 keys

// Glob characters in a prefix must match themselves in SCAN MATCH.
std::string GlobEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The [id, [field, value, ...]] entries of an XRANGE-style array reply.
bool ParseEntries(const redisReply* r,
                  std::vector<RedisTier::StreamEntry>* out) {
  if (r->type != REDIS_REPLY_ARRAY) return false;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING ||
        e->element[1]->type != REDIS_REPLY_ARRAY)
      return false;
    RedisTier::StreamEntry entry;
    entry.id.assign(e->element[0]->str, e->element[0]->len);
    const redisReply* f = e->element[1];
    for (size_t j = 0; j + 1 < f->elements; j += 2) {
      const redisReply* k = f->element[j];
      const redisReply* v = f->element[j + 1];
      if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
        return false;
      entry.fields.emplace_back(std::string(k->str, k->len),
                                std::string(v->str, v->len));
    }
    out->push_back(std::move(entry));
  }
  return true;
}

}  // namespace

struct RedisTier::PurgeState {
  std::string match;
  std::string cursor = "0";
  int64_t deleted = 0;
  int rounds = 0;
  bool done = false;
  PurgeFn fn;
};

RedisTier::RedisTier(RedisOptions options, http::EventLoop& loop,
                     RedisMetrics metrics)
    : options_(std::move(options)),
      loop_(loop),
      metrics_(metrics),
      socket_(loop),
      connect_timer_(loop),
      timeout_timer_(loop) {
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
}

RedisTier::~RedisTier() {
  *alive_ = false;
  socket_.Close();
  if (reader_ != nullptr) redisReaderFree(reader_);
  if (metrics_.up) metrics_.up->Set(0);
}

std::string RedisTier::Format(const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()),
                                       argv.data(), lens.data());
  std::string out;
  if (n > 0 && cmd != nullptr) out.assign(cmd, static_cast<size_t>(n));
  redisFreeCommand(cmd);
  return out;
}

void RedisTier::Get(std::string key, GetFn done) {
  Op op;
  op.kind = Op::Kind::kGet;
  op.command = Format({"GET", key});
  op.get_done = done;
  if (!Submit(std::move(op))) loop_.Post([done] { done(Result::kError, {}); });
}

void RedisTier::Set(std::string key, std::string value, int64_t ttl_ms) {
  const std::string ttl = std::to_string(std::max<int64_t>(ttl_ms, 1));
  Op op;
  op.kind = Op::Kind::kSet;
  op.command = Format({"SET", key, value, "PX", ttl});
  Submit(std::move(op));
}

void RedisTier::Purge(std::string prefix, PurgeFn done) {
  auto p = std::make_shared<PurgeState>();
  p->match = GlobEscape(prefix) + "*";
  p->fn = done;
  Op op;
  op.kind = Op::Kind::kScan;
  op.command = Format({"SCAN", "0", "MATCH", p->match, "COUNT", "100"});
  op.purge = p;
  if (!Submit(std::move(op))) loop_.Post([done] { done(0, false); });
}

void RedisTier::StreamAdd(
    std::string key,
    const std::vector<std::pair<std::string, std::string>>& fields,
    int64_t max_len) {
  const std::string len = std::to_string(std::max<int64_t>(max_len, 1));
  std::vector<std::string_view> args{"XADD", key, "MAXLEN", "~", len, "*"};
  for (const auto& [f, v] : fields) {
    args.push_back(f);
    args.push_back(v);
  }
  Op op;
  op.kind = Op::Kind::kStreamAdd;
  op.command = Format(args);
  Submit(std::move(op));
}

void RedisTier::StreamRead(std::string key, std::string after_id, int count,
                           StreamFn done) {
  Op op;
  op.kind = Op::Kind::kStreamRead;
  op.command = Format({"XREAD", "COUNT", std::to_string(std::max(count, 1)),
                       "STREAMS", key, after_id});
  op.stream_done = done;
  if (!Submit(std::move(op))) loop_.Post([done] { done(false, {}); });
}

void RedisTier::StreamLast(std::string key, StreamFn done) {
  Op op;
  op.kind = Op::Kind::kStreamLast;
  op.command = Format({"XREVRANGE", key, "+", "-", "COUNT", "1"});
  op.stream_done = done;
  if (!Submit(std::move(op))) loop_.Post([done] { done(false, {}); });
}

bool RedisTier::Submit(Op op) {
  if (static_cast<int>(waiting_.size() + sent_.size()) >= options_.queue) {
    metrics_.refused->Increment();
    return false;
  }
  if (connected_) {
    Send(op);
    return true;
  }
  if (!connecting_) {
    if (http::NowNs() < next_connect_ns_) {
      metrics_.refused->Increment();
      return false;
    }
    StartConnect();
  }
  waiting_.push_back(std::move(op));
  return true;
}

void RedisTier::Send(Op& op) {
  op.t_sent_ns = http::NowNs();
  op.seq = next_seq_++;
  socket_.Write(op.command);
  op.command.clear();
  op.command.shrink_to_fit();
  sent_.push_back(std::move(op));
  ArmTimeout();
}

void RedisTier::StartConnect() {
  connecting_ = true;
  metrics_.reconnects->Increment();
  connect_timer_.ExpireAfter(options_.connect_timeout_ms * kNsPerMs, [this] {
    if (!connecting_) return;
    socket_.Close();
    OnConnected("connect timeout");
  });
  auto on_data = [this](std::string_view d) { OnData(d); };
  auto on_closed = [this](const std::string&) { Drop(false); };
  auto on_connect = [this](const std::string& e) { OnConnected(e); };
  if (unix_path_.empty()) {
    socket_.ConnectTcp(host_, static_cast<uint16_t>(port_), on_connect, on_data,
                       on_closed);
  } else {
    socket_.ConnectUnix(unix_path_, on_connect, on_data, on_closed);
  }
}

void RedisTier::OnConnected(const std::string& error) {
  connect_timer_.Cancel();
  connecting_ = false;
  if (!error.empty()) {
    Drop(true);
    return;
  }
  connected_ = true;
  backoff_ms_ = 100;
  reader_ = redisReaderCreate();
  if (metrics_.up) metrics_.up->Set(1);
  RL_LOG(kInfo, "gateway: cache: connected to Redis {}", options_.url);
  if (db_ != 0) {
    Op select;
    select.kind = Op::Kind::kSelect;
    select.command = Format({"SELECT", std::to_string(db_)});
    Send(select);
  }
  std::deque<Op> queued = std::move(waiting_);
  waiting_.clear();
  for (Op& op : queued) Send(op);
}

void RedisTier::OnData(std::string_view data) {
  if (reader_ == nullptr) return;
  if (redisReaderFeed(reader_, data.data(), data.size()) != REDIS_OK) {
    Drop(false);
    return;
  }
  const std::shared_ptr<bool> alive = alive_;
  while (connected_) {
    void* r = nullptr;
    if (redisReaderGetReply(reader_, &r) != REDIS_OK) {
      Drop(false);  // a protocol error: nothing after it can be trusted
      return;
    }
    if (r == nullptr) return;  // needs more bytes
    if (sent_.empty()) {
      freeReplyObject(r);
      Drop(false);
      return;
    }
    Op op = std::move(sent_.front());
    sent_.pop_front();
    if (op.expired) {  // already failed; the reply only keeps the order
      freeReplyObject(r);
      continue;
    }
    OnReply(std::move(op), static_cast<redisReply*>(r));
    if (!*alive) return;
  }
}

void RedisTier::OnReply(Op op, redisReply* reply) {
  struct Free {
    redisReply* r;
    ~Free() { freeReplyObject(r); }
  } owned{reply};
  const double seconds =
      static_cast<double>(http::NowNs() - op.t_sent_ns) / 1e9;
  const bool error = reply->type == REDIS_REPLY_ERROR;
  switch (op.kind) {
    case Op::Kind::kSelect:
      if (error) {
        RL_LOG(kWarning, "gateway: cache: Redis SELECT {}: {}", db_,
               std::string_view(reply->str, reply->len));
        Drop(false);
      }
      return;
    case Op::Kind::kGet: {
      metrics_.get_latency->Observe(seconds);
      if (error) {
        metrics_.get_errors->Increment();
        op.get_done(Result::kError, {});
        return;
      }
      if (reply->type == REDIS_REPLY_STRING) {
        op.get_done(Result::kFound, std::string(reply->str, reply->len));
      } else {
        op.get_done(Result::kNotFound, {});
      }
      return;
    }
    case Op::Kind::kSet:
      metrics_.set_latency->Observe(seconds);
      if (error) metrics_.set_errors->Increment();
      return;
    case Op::Kind::kScan: {
      const std::shared_ptr<PurgeState>& p = op.purge;
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
          reply->element[1]->type != REDIS_REPLY_ARRAY) {
        metrics_.get_errors->Increment();
        EndPurge(p, false);
        return;
      }
      p->cursor.assign(reply->element[0]->str, reply->element[0]->len);
      const redisReply* keys = reply->element[1];
      if (keys->elements == 0) {
        NextScan(p);
        return;
      }
      std::vector<std::string_view> args{"DEL"};
      for (size_t i = 0; i < keys->elements; ++i)
        args.emplace_back(keys->element[i]->str, keys->element[i]->len);
      Op del;
      del.kind = Op::Kind::kDel;
      del.command = Format(args);
      del.purge = p;
      if (!Submit(std::move(del))) EndPurge(p, false);
      return;
    }
    case Op::Kind::kDel: {
      const std::shared_ptr<PurgeState>& p = op.purge;
      if (reply->type != REDIS_REPLY_INTEGER) {
        metrics_.set_errors->Increment();
        EndPurge(p, false);
        return;
      }
      p->deleted += reply->integer;
      NextScan(p);
      return;
    }
    case Op::Kind::kStreamAdd:
      metrics_.set_latency->Observe(seconds);
      if (error) metrics_.set_errors->Increment();
      return;
    case Op::Kind::kStreamRead: {
      std::vector<StreamEntry> entries;
      bool ok = reply->type == REDIS_REPLY_NIL;  // nothing new
      // [[key, entries]]: one stream asked for.
      if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
          reply->element[0]->type == REDIS_REPLY_ARRAY &&
          reply->element[0]->elements == 2)
        ok = ParseEntries(reply->element[0]->element[1], &entries);
      if (!ok) {
        metrics_.get_errors->Increment();
        entries.clear();
      }
      op.stream_done(ok, std::move(entries));
      return;
    }
    case Op::Kind::kStreamLast: {
      std::vector<StreamEntry> entries;
      const bool ok = ParseEntries(reply, &entries);
      if (!ok) {
        metrics_.get_errors->Increment();
        entries.clear();
      }
      op.stream_done(ok, std::move(entries));
      return;
    }
  }
}

void RedisTier::NextScan(const std::shared_ptr<PurgeState>& p) {
  if (p->cursor == "0" || ++p->rounds >= kMaxScanRounds) {
    EndPurge(p, true);
    return;
  }
  Op op;
  op.kind = Op::Kind::kScan;
  op.command = Format({"SCAN", p->cursor, "MATCH", p->match, "COUNT", "100"});
  op.purge = p;
  if (!Submit(std::move(op))) EndPurge(p, false);
}

void RedisTier::EndPurge(const std::shared_ptr<PurgeState>& p, bool ok) {
  if (p->done) return;
  p->done = true;
  PurgeFn fn = std::move(p->fn);
  if (fn) fn(ok ? p->deleted : 0, ok);
}

void RedisTier::ArmTimeout() {
  if (sent_.empty() || timeout_timer_armed_) return;
  // The first command not yet failed, or the oldest one's connection
  // limit, whichever comes first.
  const int64_t timeout_ns = options_.timeout_ms * kNsPerMs;
  int64_t at = sent_.front().t_sent_ns + 4 * timeout_ns;
  for (const Op& op : sent_) {
    if (op.expired) continue;
    at = std::min(at, op.t_sent_ns + timeout_ns);
    break;
  }
  timeout_timer_armed_ = true;
  timeout_timer_.ExpireAt(at, [this] { OnTimeout(); });
}

void RedisTier::OnTimeout() {
  // After a stall of the whole process the timer and replies can be ready
  // together, in either order: the replies' handler is already queued and
  // runs before this posted check, so only commands that truly got no
  // answer fail. The timer stays marked armed until the check ran.
  loop_.Post([this, alive = alive_] {
    if (!*alive) return;
    timeout_timer_armed_ = false;
    Expire();
  });
}

void RedisTier::Expire() {
  if (sent_.empty()) return;
  const int64_t now = http::NowNs();
  const int64_t timeout_ns = options_.timeout_ms * kNsPerMs;
  if (now >= sent_.front().t_sent_ns + 4 * timeout_ns) {
    Drop(false);
    return;
  }
  // Sent in order, so they expire in order. Failed in place: a callback
  // may submit more commands (appended behind these).
  const std::shared_ptr<bool> alive = alive_;
  for (size_t i = 0; i < sent_.size(); ++i) {
    if (sent_[i].expired) continue;
    if (now < sent_[i].t_sent_ns + timeout_ns) break;
    sent_[i].expired = true;
    Op failed;
    failed.kind = sent_[i].kind;
    failed.get_done = std::move(sent_[i].get_done);
    failed.stream_done = std::move(sent_[i].stream_done);
    failed.purge = std::move(sent_[i].purge);
    Fail(failed);
    if (!*alive || !connected_) return;
  }
  ArmTimeout();
}

void RedisTier::Fail(Op& op) {
  switch (op.kind) {
    case Op::Kind::kSelect:
      return;
    case Op::Kind::kGet:
      metrics_.get_errors->Increment();
      op.get_done(Result::kError, {});
      return;
    case Op::Kind::kSet:
      metrics_.set_errors->Increment();
      return;
    case Op::Kind::kScan:
      metrics_.get_errors->Increment();
      EndPurge(op.purge, false);
      return;
    case Op::Kind::kDel:
      metrics_.set_errors->Increment();
      EndPurge(op.purge, false);
      return;
    case Op::Kind::kStreamAdd:
      metrics_.set_errors->Increment();
      return;
    case Op::Kind::kStreamRead:
    case Op::Kind::kStreamLast:
      metrics_.get_errors->Increment();
      op.stream_done(false, {});
      return;
  }
}

void RedisTier::Drop(bool connect_failed) {
  socket_.Close();
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
  if (connected_ && metrics_.up) metrics_.up->Set(0);
  connected_ = false;
  connecting_ = false;
  connect_timer_.Cancel();
  if (connect_failed) {
    next_connect_ns_ = http::NowNs() + backoff_ms_ * kNsPerMs;
    backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, 5000);
  }
  // Taken out first: the callbacks may submit new operations.
  std::deque<Op> waiting = std::move(waiting_);
  std::deque<Op> sent = std::move(sent_);
  waiting_.clear();
  sent_.clear();
  const std::shared_ptr<bool> alive = alive_;
  for (Op& op : sent) {
    if (op.expired) continue;  // failed already
    Fail(op);
    if (!*alive) return;
  }
  for (Op& op : waiting) {
    if (connect_failed) {
      // Never tried: a refusal, as when the backoff is already running.
      metrics_.refused->Increment();
      if (op.kind == Op::Kind::kGet) op.get_done(Result::kError, {});
      if (op.stream_done) op.stream_done(false, {});
      if (op.purge) EndPurge(op.purge, false);
    } else {
      Fail(op);
    }
    if (!*alive) return;
  }
}

}  // namespace redline::gateway

// Client implementation: Boost.Asio sockets and timers, OpenSSL through
// asio::ssl, and Boost.Beast's HTTP/1.1 response parser driven by hand
// (basic_parser::put on our own read buffer) so that body pieces reach the
// handler as soon as a read completes, stamped with that read's time.
#include "http/client.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/check.h"
#include "base/logging.h"
#include "http/event_loop_impl.h"

namespace redline::http {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;

std::string_view TransportErrorName(TransportError error) {
  switch (error) {
    case TransportError::kNone:
      return "none";
    case TransportError::kConnect:
      return "connect";
    case TransportError::kWrite:
      return "write";
    case TransportError::kTimeoutTotal:
      return "timeout_total";
    case TransportError::kTimeoutIdle:
      return "timeout_idle";
    case TransportError::kClosedBeforeResponse:
      return "closed_before_response";
    case TransportError::kClosedMidResponse:
      return "closed_mid_response";
    case TransportError::kProtocol:
      return "protocol";
    case TransportError::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string SerializeRequest(const Origin& origin,
                             const ClientRequest& request) {
  std::string out;
  size_t size =
      request.method.size() + request.target.size() + request.body.size() + 96;
  for (const Header& h : request.headers)
    size += h.name.size() + h.value.size() + 4;
  out.reserve(size);
  out += request.method;
  out += ' ';
  out += request.target;
  out += " HTTP/1.1\r\nHost: ";
  out += origin.HostHeader();
  out += "\r\n";
  for (const Header& h : request.headers) {
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
  if (!request.body.empty() || request.method == "POST" ||
      request.method == "PUT") {
    out += "Content-Length: ";
    out += std::to_string(request.body.size());
    out += "\r\n";
  }
  out += "\r\n";
  out += request.body;
  return out;
}

namespace {

// Forwards Beast's parse events to a ResponseHandler.
class ResponseParser final : public bhttp::basic_parser<false> {
 public:
  ResponseParser(ResponseHandler* handler, bool capture_headers,
                 const std::vector<std::string>* capture_only)
      : handler_(handler),
        capture_headers_(capture_headers),
        capture_only_(capture_only) {
    // Streams can be long; the body size is the server's business.
    body_limit(boost::none);
    eager(true);
  }

  void set_time(int64_t t_ns) { t_ns_ = t_ns; }
  bool head_reported() const { return head_reported_; }

 private:
  void on_request_impl(bhttp::verb, boost::beast::string_view,
                       boost::beast::string_view, int,
                       error_code& ec) override {
    ec = bhttp::error::bad_method;  // never called for a response parser
  }
  void on_response_impl(int code, boost::beast::string_view reason, int,
                        error_code&) override {
    head_.status = code;
    head_.reason.assign(reason.data(), reason.size());
  }
  void on_field_impl(bhttp::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, error_code&) override {
    if (name == bhttp::field::content_type)
      head_.content_type.assign(value.data(), value.size());
    if (capture_headers_ && Wanted(name_string)) {
      head_.headers.push_back(
          {std::string(name_string.data(), name_string.size()),
           std::string(value.data(), value.size())});
    }
  }
  void on_header_impl(error_code&) override {
    head_.chunked = chunked();
    if (auto len = content_length()) head_.content_length = *len;
    head_reported_ = true;
    handler_->OnHeaders(head_, t_ns_);
  }
  void on_body_init_impl(const boost::optional<uint64_t>&,
                         error_code&) override {}
  size_t on_body_impl(boost::beast::string_view body, error_code&) override {
    if (!body.empty())
      handler_->OnBody(std::string_view(body.data(), body.size()), t_ns_);
    return body.size();
  }
  void on_chunk_header_impl(uint64_t, boost::beast::string_view,
                            error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, boost::beast::string_view body,
                            error_code&) override {
    if (!body.empty())
      handler_->OnBody(std::string_view(body.data(), body.size()), t_ns_);
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  bool Wanted(boost::beast::string_view name) const {
    if (capture_only_ == nullptr || capture_only_->empty()) return true;
    for (const std::string& w : *capture_only_) {
      if (w.size() != name.size()) continue;
      bool same = true;
      for (size_t i = 0; i < w.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(w[i])) ==
               std::tolower(static_cast<unsigned char>(name[i]));
      if (same) return true;
    }
    return false;
  }

  ResponseHandler* handler_;
  bool capture_headers_;
  const std::vector<std::string>* capture_only_;
  int64_t t_ns_ = 0;
  bool head_reported_ = false;
  ResponseHead head_;
};

int64_t Ms(int64_t ms) { return ms * 1'000'000; }

}  // namespace

struct Pool;
struct Connection;

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
  Impl(EventLoop& loop, ClientOptions opts)
      : io(loop.impl()->io),
        options(std::move(opts)),
        tls_ctx(ssl::context::tls_client) {}

  // Loading the system CA store takes tens of milliseconds: done on the
  // first TLS connection only.
  void EnsureTls() {
    if (tls_ready) return;
    tls_ready = true;
    if (options.tls_verify) {
      tls_ctx.set_verify_mode(ssl::verify_peer);
      error_code ec;
      if (!options.tls_ca_file.empty()) {
        tls_ctx.load_verify_file(options.tls_ca_file, ec);
        if (ec)
          RL_LOG(kWarning, "http: cannot load CA file {}: {}",
                 options.tls_ca_file, ec.message());
      } else {
        tls_ctx.set_default_verify_paths(ec);
      }
    } else {
      tls_ctx.set_verify_mode(ssl::verify_none);
    }
  }

  Pool& GetPool(const Origin& origin);
  void Send(const Origin& origin, ClientRequest request,
            ResponseHandler* handler);
  void Shutdown();
  // Deadlines are checked by one sweep timer for all requests instead of a
  // timer per request (which would cost timer-queue work and a timerfd
  // update per request). The sweep is armed for the earliest deadline of
  // the requests in progress, not at a fixed period: a loop that proxies
  // short requests would otherwise wake every 5 ms for nothing. A request's
  // deadlines only move later while it runs (the idle limit follows
  // activity), so a sweep that finds nothing due re-arms for the new
  // earliest one. At least kSweepIntervalNs ahead (bounded re-arming);
  // timeouts fire at most that late.
  void EnsureSweep(int64_t deadline_ns);
  void Sweep();
  static constexpr int64_t kSweepIntervalNs = 5'000'000;
  int64_t sweep_at_ns = 0;        // when the armed sweep runs
  uint64_t sweep_generation = 0;  // a re-arm voids the earlier wait

  asio::io_context& io;
  ClientOptions options;
  ssl::context tls_ctx;
  bool tls_ready = false;
  std::unordered_map<std::string, std::unique_ptr<Pool>> pools;
  std::unordered_set<Connection*>
      live;  // every Connection object not yet destroyed
  std::unordered_set<Connection*>
      active;  // connections with a request in progress
  asio::steady_timer sweep_timer{io};
  bool sweeping = false;
  ClientStats stats;
  bool closed = false;
};

// A request that waits for a pooled connection (cap reached).
struct PendingRequest {
  ClientRequest request;
  ResponseHandler* handler;
};

struct Pool {
  Origin origin;
  std::vector<std::shared_ptr<Connection>> idle;  // LIFO: the warmest first
  int64_t open = 0;                               // connecting, busy or idle
  std::deque<PendingRequest> waiting;
  std::vector<tcp::endpoint> endpoints;  // resolved once, then reused
};

struct Connection : std::enable_shared_from_this<Connection> {
  enum class Phase { kIdle, kConnecting, kWriting, kReading, kClosed };
  static constexpr int64_t kPeekAfterIdleNs = 50'000'000;

  Connection(std::shared_ptr<Client::Impl> client_impl, Pool* owner)
      : impl(std::move(client_impl)), pool(owner), resolver(impl->io) {
    if (pool->origin.tls) {
      impl->EnsureTls();
      tls.emplace(impl->io, impl->tls_ctx);
    } else {
      plain.emplace(impl->io);
    }
    rbuf.resize(impl->options.read_buffer_bytes);
    impl->live.insert(this);
    impl->stats.connections_open++;
    impl->stats.connections_opened++;
  }

  ~Connection() {
    impl->live.erase(this);
    impl->stats.connections_open--;
  }

  tcp::socket::lowest_layer_type& Lowest() {
    return tls ? tls->lowest_layer() : plain->lowest_layer();
  }

  template <typename F>
  void WithStream(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(*plain);
    }
  }

  // True when an idle pooled connection still looks usable: the peer has not
  // closed it and sent nothing unexpected.
  bool LooksAlive() {
    if (phase == Phase::kClosed || !Lowest().is_open()) return false;
    // Recently used: skip the syscall (a server closing within this window is
    // covered by the stale-connection retry in Fail()).
    if (NowNs() - last_activity < kPeekAfterIdleNs) return true;
    char c;
    ssize_t r =
        ::recv(Lowest().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return false;           // orderly close
    if (r > 0) return tls.has_value();  // TLS may hold post-handshake records
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }

  void Start(ClientRequest&& req, ResponseHandler* h, bool is_reused) {
    RL_DCHECK(handler == nullptr);
    handler = h;
    request = std::move(req);
    reused = is_reused;
    generation++;
    rlen = 0;
    parser.reset();
    const int64_t now = NowNs();
    total_deadline =
        request.total_timeout_ms > 0 ? now + Ms(request.total_timeout_ms) : 0;
    last_activity = now;
    impl->stats.requests_in_flight++;
    impl->active.insert(this);
    if (phase == Phase::kIdle) {
      impl->stats.connections_reused++;
      ArmTimer();
      Write();
    } else {
      RL_DCHECK(phase == Phase::kConnecting);
      connect_deadline = impl->options.connect_timeout_ms > 0
                             ? now + Ms(impl->options.connect_timeout_ms)
                             : 0;
      ArmTimer();
      Connect();
    }
  }

  int64_t NextDeadline() const {
    int64_t d = 0;
    auto take = [&](int64_t x) {
      if (x > 0 && (d == 0 || x < d)) d = x;
    };
    take(total_deadline);
    if (phase == Phase::kConnecting) {
      take(connect_deadline);
    } else if (request.idle_timeout_ms > 0) {
      take(last_activity + Ms(request.idle_timeout_ms));
    }
    return d;
  }

  void ArmTimer() { impl->EnsureSweep(NextDeadline()); }

  void OnTimer() {
    const int64_t now = NowNs();
    if (phase == Phase::kConnecting) {
      if ((connect_deadline > 0 && now >= connect_deadline) ||
          (total_deadline > 0 && now >= total_deadline)) {
        Fail(TransportError::kConnect, "connect timeout");
        return;
      }
    } else {
      if (total_deadline > 0 && now >= total_deadline) {
        Fail(TransportError::kTimeoutTotal, "total request time limit");
        return;
      }
      if (request.idle_timeout_ms > 0 &&
          now >= last_activity + Ms(request.idle_timeout_ms)) {
        Fail(TransportError::kTimeoutIdle, "stream idle limit");
        return;
      }
    }
  }

  void Connect() {
    if (!pool->endpoints.empty()) {
      ConnectTo(pool->endpoints);
      return;
    }
    error_code ec;
    auto address = asio::ip::make_address(pool->origin.host, ec);
    if (!ec) {
      pool->endpoints.emplace_back(address, pool->origin.port);
      ConnectTo(pool->endpoints);
      return;
    }
    resolver.async_resolve(
        pool->origin.host, std::to_string(pool->origin.port),
        [self = shared_from_this(), gen = generation](
            const error_code& ec, tcp::resolver::results_type results) {
          if (gen != self->generation || self->handler == nullptr) return;
          if (ec) {
            self->Fail(TransportError::kConnect, "resolve: " + ec.message());
            return;
          }
          std::vector<tcp::endpoint> eps;
          for (const auto& r : results) eps.push_back(r.endpoint());
          if (self->pool->endpoints.empty()) self->pool->endpoints = eps;
          self->ConnectTo(eps);
        });
  }

  void ConnectTo(const std::vector<tcp::endpoint>& eps) {
    asio::async_connect(
        Lowest(), eps,
        [self = shared_from_this(), gen = generation](const error_code& ec,
                                                      const tcp::endpoint&) {
          if (gen != self->generation || self->handler == nullptr) return;
          if (ec) {
            self->Fail(TransportError::kConnect, "connect: " + ec.message());
            return;
          }
          error_code ignored;
          self->Lowest().set_option(tcp::no_delay(true), ignored);
          if (self->tls) {
            self->Handshake();
          } else {
            self->phase = Phase::kIdle;
            self->ArmTimer();  // connect limit no longer applies
            self->Write();
          }
        });
  }

  void Handshake() {
    const std::string& host = pool->origin.host;
    error_code ec;
    asio::ip::make_address(host, ec);
    if (ec) {  // SNI only for names, as RFC 6066 requires
      SSL_set_tlsext_host_name(tls->native_handle(), host.c_str());
    }
    if (impl->options.tls_verify)
      tls->set_verify_callback(ssl::host_name_verification(host));
    tls->async_handshake(
        ssl::stream_base::client,
        [self = shared_from_this(), gen = generation](const error_code& ec) {
          if (gen != self->generation || self->handler == nullptr) return;
          if (ec) {
            self->Fail(TransportError::kConnect,
                       "TLS handshake: " + ec.message());
            return;
          }
          self->phase = Phase::kIdle;
          self->ArmTimer();
          self->Write();
        });
  }

  void Write() {
    phase = Phase::kWriting;
    out = SerializeRequest(pool->origin, request);
    const int64_t t_send = NowNs();
    last_activity = t_send;
    handler->OnSent(t_send);
    WithStream([this](auto& stream) {
      asio::async_write(
          stream, asio::buffer(out),
          [self = shared_from_this(), gen = generation](const error_code& ec,
                                                        size_t) {
            if (gen != self->generation || self->handler == nullptr) return;
            if (ec) {
              self->Fail(TransportError::kWrite, "write: " + ec.message());
              return;
            }
            self->phase = Phase::kReading;
            self->last_activity = NowNs();
            self->parser.emplace(self->handler,
                                 self->impl->options.capture_headers,
                                 &self->impl->options.capture_only);
            self->Read();
          });
    });
  }

  void Read() {
    if (rlen == rbuf.size())
      rbuf.resize(rbuf.size() * 2);  // a header larger than the buffer
    WithStream([this](auto& stream) {
      stream.async_read_some(
          asio::buffer(rbuf.data() + rlen, rbuf.size() - rlen),
          [self = shared_from_this(), gen = generation](const error_code& ec,
                                                        size_t n) {
            if (gen != self->generation || self->handler == nullptr) return;
            self->OnRead(ec, n);
          });
    });
  }

  void OnRead(const error_code& ec, size_t n) {
    const int64_t t = NowNs();
    last_activity = t;
    parser->set_time(t);
    if (n > 0) {
      any_bytes = true;
      rlen += n;
      size_t off = 0;
      while (off < rlen) {
        error_code pec;
        size_t used =
            parser->put(asio::buffer(rbuf.data() + off, rlen - off), pec);
        off += used;
        if (handler == nullptr)
          return;  // failed re-entrantly (should not happen)
        if (pec == bhttp::error::need_more) break;
        if (pec) {
          Fail(TransportError::kProtocol, "HTTP parse: " + pec.message());
          return;
        }
        if (parser->is_done() || used == 0) break;
      }
      if (off > 0) {
        std::memmove(rbuf.data(), rbuf.data() + off, rlen - off);
        rlen -= off;
      }
      if (parser->is_done()) {
        Succeed(t);
        return;
      }
    }
    if (ec) {
      const bool eof =
          ec == asio::error::eof || ec == ssl::error::stream_truncated;
      if (eof && parser->got_some() && parser->is_header_done() &&
          parser->need_eof()) {
        error_code pec;
        parser->put_eof(pec);
        if (!pec && parser->is_done()) {
          keep_alive_after = false;
          Succeed(t);
          return;
        }
      }
      if (!any_bytes) {
        Fail(TransportError::kClosedBeforeResponse, "read: " + ec.message());
      } else {
        Fail(TransportError::kClosedMidResponse, "read: " + ec.message());
      }
      return;
    }
    Read();
  }

  // Releases the handler and the timer; returns the handler.
  ResponseHandler* Detach() {
    ResponseHandler* h = handler;
    handler = nullptr;
    generation++;
    impl->active.erase(this);
    impl->stats.requests_in_flight--;
    return h;
  }

  void Succeed(int64_t t) {
    TransportResult result;
    result.connection_reused = reused;
    result.head_received = true;
    const bool keep =
        keep_alive_after && parser->keep_alive() && rlen == 0 && !impl->closed;
    ResponseHandler* h = Detach();
    parser.reset();
    any_bytes = false;
    keep_alive_after = true;
    auto self = shared_from_this();
    if (keep) {
      phase = Phase::kIdle;
      Release(self);
    } else {
      Close();
      pool->open--;
      ServeWaiting();
    }
    h->OnComplete(result, t);
  }

  void Fail(TransportError error, std::string detail) {
    const bool head = parser && parser->head_reported();
    // A reused connection that died before answering was most likely closed
    // by the server's keep-alive timer while idle; retry once on a new one,
    // as browsers and curl do.
    if (reused && !retried && !head && !any_bytes &&
        (error == TransportError::kWrite ||
         error == TransportError::kClosedBeforeResponse) &&
        !impl->closed) {
      ResponseHandler* h = Detach();
      Close();
      pool->open--;
      auto fresh = std::make_shared<Connection>(impl, pool);
      pool->open++;
      fresh->phase = Phase::kConnecting;
      fresh->retried = true;
      fresh->Start(std::move(request), h, false);
      return;
    }
    TransportResult result;
    result.error = error;
    result.detail = std::move(detail);
    result.connection_reused = reused;
    result.head_received = head;
    ResponseHandler* h = Detach();
    auto self = shared_from_this();
    Close();
    pool->open--;
    ServeWaiting();
    h->OnComplete(result, NowNs());
  }

  void Close() {
    phase = Phase::kClosed;
    error_code ignored;
    Lowest().close(ignored);
    parser.reset();
  }

  // Returns an idle connection to the pool, or hands it to a waiting request.
  void Release(const std::shared_ptr<Connection>& self) {
    if (!pool->waiting.empty()) {
      PendingRequest next = std::move(pool->waiting.front());
      pool->waiting.pop_front();
      impl->stats.requests_waiting--;
      retried = false;
      Start(std::move(next.request), next.handler, true);
      return;
    }
    pool->idle.push_back(self);
  }

  // A connection slot freed up: open a new connection for a waiting request.
  void ServeWaiting() {
    if (pool->waiting.empty() || impl->closed) return;
    const int cap = impl->options.max_connections_per_origin;
    if (cap > 0 && pool->open >= cap) return;
    PendingRequest next = std::move(pool->waiting.front());
    pool->waiting.pop_front();
    impl->stats.requests_waiting--;
    auto fresh = std::make_shared<Connection>(impl, pool);
    pool->open++;
    fresh->phase = Phase::kConnecting;
    fresh->Start(std::move(next.request), next.handler, false);
  }

  std::shared_ptr<Client::Impl> impl;
  Pool* pool;
  std::optional<tcp::socket> plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  tcp::resolver resolver;
  Phase phase = Phase::kConnecting;

  // The request in progress (handler != nullptr while one is).
  ResponseHandler* handler = nullptr;
  ClientRequest request;
  std::string out;
  uint64_t generation = 0;
  bool reused = false;
  bool retried = false;
  bool any_bytes = false;
  bool keep_alive_after = true;
  int64_t total_deadline = 0;
  int64_t connect_deadline = 0;
  int64_t last_activity = 0;
  std::optional<ResponseParser> parser;
  std::vector<char> rbuf;
  size_t rlen = 0;
};

void Client::Impl::EnsureSweep(int64_t deadline_ns) {
  if (closed || active.empty() || deadline_ns <= 0) return;
  const int64_t at = std::max(deadline_ns, NowNs() + kSweepIntervalNs);
  if (sweeping && sweep_at_ns <= at) return;
  sweeping = true;
  sweep_at_ns = at;
  const uint64_t gen = ++sweep_generation;
  sweep_timer.expires_at(
      asio::steady_timer::time_point(std::chrono::nanoseconds(at)));
  sweep_timer.async_wait(
      [self = shared_from_this(), gen](const error_code& ec) {
        if (gen != self->sweep_generation) return;  // re-armed since
        self->sweeping = false;
        if (ec || self->closed) return;
        self->Sweep();
      });
}

void Client::Impl::Sweep() {
  const int64_t now = NowNs();
  std::vector<std::shared_ptr<Connection>> due;
  for (Connection* c : active) {
    const int64_t deadline = c->NextDeadline();
    if (deadline != 0 && now >= deadline) due.push_back(c->shared_from_this());
  }
  for (auto& c : due) {
    if (c->handler != nullptr) c->OnTimer();
  }
  int64_t next = 0;
  for (Connection* c : active) {
    const int64_t d = c->NextDeadline();
    if (d > 0 && (next == 0 || d < next)) next = d;
  }
  EnsureSweep(next);
}

Pool& Client::Impl::GetPool(const Origin& origin) {
  std::string key = origin.ToString();
  auto it = pools.find(key);
  if (it != pools.end()) return *it->second;
  auto pool = std::make_unique<Pool>();
  pool->origin = origin;
  Pool& ref = *pool;
  pools.emplace(std::move(key), std::move(pool));
  return ref;
}

void Client::Impl::Send(const Origin& origin, ClientRequest request,
                        ResponseHandler* handler) {
  if (closed) {
    asio::post(io, [handler] {
      TransportResult r;
      r.error = TransportError::kCancelled;
      r.detail = "client closed";
      handler->OnComplete(r, NowNs());
    });
    return;
  }
  Pool& pool = GetPool(origin);
  while (!pool.idle.empty()) {
    std::shared_ptr<Connection> conn = std::move(pool.idle.back());
    pool.idle.pop_back();
    if (conn->LooksAlive()) {
      conn->retried = false;
      conn->Start(std::move(request), handler, true);
      return;
    }
    conn->Close();
    pool.open--;
  }
  const int cap = options.max_connections_per_origin;
  if (cap > 0 && pool.open >= cap) {
    pool.waiting.push_back({std::move(request), handler});
    stats.requests_waiting++;
    return;
  }
  auto conn = std::make_shared<Connection>(shared_from_this(), &pool);
  pool.open++;
  conn->phase = Connection::Phase::kConnecting;
  conn->Start(std::move(request), handler, false);
}

void Client::Impl::Shutdown() {
  closed = true;
  sweep_timer.cancel();
  // Fail waiting requests first, then in-flight ones, synchronously.
  for (auto& [key, pool] : pools) {
    while (!pool->waiting.empty()) {
      PendingRequest p = std::move(pool->waiting.front());
      pool->waiting.pop_front();
      TransportResult r;
      r.error = TransportError::kCancelled;
      r.detail = "client closed";
      p.handler->OnComplete(r, NowNs());
    }
    stats.requests_waiting = 0;
    for (auto& conn : pool->idle) conn->Close();
    pool->idle.clear();
  }
  std::vector<std::shared_ptr<Connection>> active;
  for (Connection* c : live) active.push_back(c->shared_from_this());
  for (auto& c : active) {
    if (c->handler != nullptr) {
      TransportResult r;
      r.error = TransportError::kCancelled;
      r.detail = "client closed";
      ResponseHandler* h = c->Detach();
      c->Close();
      h->OnComplete(r, NowNs());
    } else {
      c->Close();
    }
  }
}

Client::Client(EventLoop& loop, ClientOptions options)
    : impl_(std::make_shared<Impl>(loop, std::move(options))) {}

Client::~Client() { impl_->Shutdown(); }

void Client::Send(const Origin& origin, ClientRequest request,
                  ResponseHandler* handler) {
  impl_->Send(origin, std::move(request), handler);
}

void Client::CloseIdle() {
  for (auto& [key, pool] : impl_->pools) {
    for (auto& conn : pool->idle) {
      conn->Close();
      pool->open--;
    }
    pool->idle.clear();
  }
}

ClientStats Client::stats() const { return impl_->stats; }

}  // namespace redline::http

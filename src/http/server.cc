// Server implementation: Asio acceptor and sockets (optionally asio::ssl),
// RequestParser (Beast inside) for requests, responses serialized by hand so
// that each streamed chunk goes to the socket at once.
//
// A connection moves through phases (Phase below); the read timer enforces
// the deadline of the phase it is in, the write timer watches every write
// for progress. Reads stop while the unparsed input is at its bound, so a
// client that sends faster than it is answered meets TCP back-pressure.
#include "http/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_set>
#include <utility>

#include "base/logging.h"
#include "http/event_loop_impl.h"
#include "http/request_parser.h"

namespace redline::http {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

// Initial and resting size of a connection's read buffer; it grows (up to
// max_buffered_bytes) only for a large header block or pipelined input.
constexpr size_t kReadBufferBytes = 16 * 1024;
// Output buffers keep at most this much capacity between writes.
constexpr size_t kKeepWriteCapacity = 64 * 1024;
// At the descriptor limit: pause accepting this long, and answer at most
// this many waiting connections through the reserve descriptor per pause.
constexpr int64_t kAcceptBackoffMs = 50;
constexpr int kMaxShedPerBackoff = 32;
// One log line per this interval for a failing accept loop.
constexpr int64_t kAcceptLogIntervalNs = 5'000'000'000;
// max_connections = 0: the descriptor limit minus this many, at least
// kMinConnections.
constexpr uint64_t kDescriptorReserve = 64;
constexpr uint64_t kMinConnections = 16;
// After an answer that closes the connection while the client may still be
// sending (a body refused early), input is read and dropped for this long or
// this many bytes before the socket closes: closing with unread input would
// reset the connection, and the client could lose the answer.
constexpr int64_t kLingerMs = 2000;
constexpr size_t kLingerMaxBytes = 1024 * 1024;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

void AppendHead(std::string& out, int status,
                const std::vector<Header>& headers) {
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += ReasonPhrase(status);
  out += "\r\n";
  for (const Header& h : headers) {
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
}

// A whole response with Content-Length (and the body unless `head_only`).
std::string SerializeResponse(int status, const std::vector<Header>& headers,
                              const std::string& body, bool head_only) {
  std::string out;
  out.reserve(body.size() + 160);
  AppendHead(out, status, headers);
  out += "Content-Length: ";
  out += std::to_string(body.size());
  out += "\r\n\r\n";
  if (!head_only) out += body;
  return out;
}

asio::steady_timer::time_point TimePointFromNs(int64_t ns) {
  return asio::steady_timer::time_point(std::chrono::nanoseconds(ns));
}

int64_t MsToNs(int64_t ms) { return ms * 1'000'000; }

// Accept failures that come from the process or the system running out of
// something: retrying at once would fail again.
bool IsExhaustion(const error_code& ec) {
  if (ec.category() != boost::system::system_category()) return false;
  const int v = ec.value();
  return v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM;
}

// Failures that concern one connection only (it went away while queued).
bool IsTransientAcceptError(const error_code& ec) {
  if (ec == asio::error::connection_aborted) return true;
  if (ec.category() != boost::system::system_category()) return false;
  const int v = ec.value();
  return v == ECONNABORTED || v == EPROTO || v == EPERM || v == EINTR ||
         v == EAGAIN;
}

int OpenReserveDescriptor() {
  return ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

}  // namespace

std::string_view ServerRequest::HeaderValue(std::string_view name) const {
  for (const Header& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  }
  return {};
}

std::string_view ServerRequest::Path() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? t : t.substr(0, q);
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 300   ? "OK"
             : status < 500 ? "Client Error"
                            : "Server Error";
  }
}

struct ServerConnection;

struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  Impl(EventLoop& loop, ServerOptions opts, RequestHandler h)
      : io(loop.impl()->io),
        options(std::move(opts)),
        handler(std::move(h)),
        acceptor(io),
        accept_backoff(io),
        tls_ctx(ssl::context::tls_server) {}
  ~Impl() { CloseReserve(); }

  void Accept();
  void OnAccepted(tcp::socket socket);
  void OnAcceptFailed(const error_code& ec);
  // Answers 503 on a connection refused before it gets a ServerConnection
  // (non-blocking; the caller closes `fd`).
  void Reject(int fd);
  void CloseReserve() {
    if (reserve_fd >= 0) ::close(reserve_fd);
    reserve_fd = -1;
  }

  asio::io_context& io;
  ServerOptions options;
  RequestHandler handler;
  tcp::acceptor acceptor;
  asio::steady_timer accept_backoff;
  ssl::context tls_ctx;
  bool tls = false;
  bool stopped = false;
  uint16_t port = 0;
  // Effective limits (options with their defaults resolved by Start()).
  size_t max_connections = 0;
  size_t max_buffered_bytes = 0;
  RequestLimits limits;
  // Held so that at the descriptor limit one waiting connection can still be
  // accepted, answered and closed.
  int reserve_fd = -1;
  int64_t last_accept_log_ns = 0;
  uint64_t accept_log_suppressed = 0;
  std::unordered_set<ServerConnection*> live;
  ServerStats stats;
};

class Writer;

struct ServerConnection : std::enable_shared_from_this<ServerConnection> {
  enum class Phase {
    kHandshake,  // TLS handshake (header timeout running)
    kIdle,       // keep-alive: before the first byte of the next request
    kHeader,     // reading the header block
    kBody,       // reading the body
    kHandler,    // the handler answers
    kClosing,    // writing an answer of the http layer, then closing
    kLinger,     // that answer sent, send side shut: dropping input
  };

  ServerConnection(std::shared_ptr<Server::Impl> server_impl,
                   tcp::socket socket)
      : impl(std::move(server_impl)),
        parser(impl->limits),
        read_timer(impl->io),
        write_timer(impl->io) {
    if (impl->tls) {
      tls.emplace(std::move(socket), impl->tls_ctx);
    } else {
      plain.emplace(std::move(socket));
    }
    rbuf.resize(std::min(kReadBufferBytes, impl->max_buffered_bytes));
    impl->live.insert(this);
    impl->stats.connections_open++;
  }
  ~ServerConnection();

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

  const ServerOptions& options() const { return impl->options; }

  void Begin() {
    error_code ignored;
    Lowest().set_option(tcp::no_delay(true), ignored);
    auto ep = Lowest().remote_endpoint(ignored);
    remote = ep.address().to_string();
    ArmRead(options().header_timeout_ms);
    if (tls) {
      phase = Phase::kHandshake;
      tls->async_handshake(ssl::stream_base::server,
                           [self = shared_from_this()](const error_code& ec) {
                             if (self->closed) return;
                             if (ec) {
                               self->Close();
                               return;
                             }
                             self->phase = Phase::kHeader;
                             self->DoRead();
                           });
    } else {
      phase = Phase::kHeader;
      DoRead();
    }
  }

  // --- reading -------------------------------------------------------------

  void DoRead() {
    if (reading || closed || phase == Phase::kHandshake ||
        phase == Phase::kClosing)
      return;
    if (phase == Phase::kLinger) rbegin = rend;  // dropped
    if (rbegin > 0) {
      // No read is in flight, so the unparsed bytes may move to the front.
      std::memmove(rbuf.data(), rbuf.data() + rbegin, rend - rbegin);
      rend -= rbegin;
      rbegin = 0;
    }
    if (rend == rbuf.size()) {
      // Full: wait until the handler's answer lets parsing go on.
      if (rbuf.size() >= impl->max_buffered_bytes) return;
      rbuf.resize(std::min(rbuf.size() * 2, impl->max_buffered_bytes));
    }
    reading = true;
    WithStream([this](auto& stream) {
      stream.async_read_some(
          asio::buffer(rbuf.data() + rend, rbuf.size() - rend),
          [self = shared_from_this()](const error_code& ec, size_t n) {
            self->OnRead(ec, n);
          });
    });
  }

  void OnRead(const error_code& ec, size_t n) {
    reading = false;
    if (closed) return;
    if (ec) {
      PeerGone(/*defer_notify=*/false);
      return;
    }
    if (phase == Phase::kLinger) {
      lingered_bytes += n;
      if (lingered_bytes > kLingerMaxBytes) {
        Close();
        return;
      }
      DoRead();
      return;
    }
    rend += n;
    Process();
    DoRead();
  }

  // Parses buffered bytes; judges the head once it is complete and
  // dispatches the request once its body is.
  void Process() {
    while (!closed && rend > rbegin &&
           (phase == Phase::kIdle || phase == Phase::kHeader ||
            phase == Phase::kBody)) {
      if (phase == Phase::kIdle) {
        phase = Phase::kHeader;
        ArmRead(options().header_timeout_ms);
      }
      const RequestParser::State before = parser.state();
      const size_t used =
          parser.Feed(std::string_view(rbuf.data() + rbegin, rend - rbegin));
      rbegin += used;
      const RequestParser::State state = parser.state();
      if (state == RequestParser::State::kError) {
        impl->stats.parse_errors++;
        AnswerAndClose(parser.error_status(), parser.error_detail(),
                       /*linger=*/true);
        return;
      }
      if (state == RequestParser::State::kHeader) return;  // needs more
      if (phase == Phase::kHeader && !HeadAccepted()) return;
      if (state == RequestParser::State::kDone) {
        Dispatch();
        return;
      }
      if (used == 0 && state == before) return;  // needs more body
    }
  }

  // Called once per request when its header block is complete. False when
  // the request was answered early (the connection then closes).
  bool HeadAccepted() {
    phase = Phase::kBody;
    ServerRequest& head = parser.request();
    head.remote_address = remote;
    if (options().on_headers) {
      std::optional<EarlyResponse> early = options().on_headers(head);
      if (early) {
        impl->stats.early_responses++;
        SendAndClose(early->status, std::move(early->headers), early->body,
                     head.method == "HEAD", /*linger=*/true);
        return false;
      }
    }
    if (parser.state() == RequestParser::State::kBody) {
      ArmRead(options().body_timeout_ms);
      // A client that waits for 100 Continue sends nothing until it comes.
      if (parser.expect_continue() && rend == rbegin)
        QueueWrite("HTTP/1.1 100 Continue\r\n\r\n");
    }
    return true;
  }

  void Dispatch();

  // An answer of the http layer itself (malformed request, limits,
  // timeouts): through on_parse_error when set.
  void AnswerAndClose(int status, std::string_view detail, bool linger) {
    std::vector<Header> headers;
    std::string body;
    if (options().on_parse_error) {
      options().on_parse_error(status == 413, detail, &status, &headers, &body);
    } else {
      headers.push_back({"Content-Type", "text/plain"});
      body =
          std::string(ReasonPhrase(status)) + ": " + std::string(detail) + "\n";
    }
    SendAndClose(status, std::move(headers), body, /*head_only=*/false, linger);
  }

  void SendAndClose(int status, std::vector<Header> headers,
                    const std::string& body, bool head_only, bool linger) {
    DisarmRead();
    phase = Phase::kClosing;
    keep_alive = false;
    linger_after_answer = linger;
    headers.push_back({"Connection", "close"});
    QueueWrite(SerializeResponse(status, headers, body, head_only));
  }

  // The answer of SendAndClose is out.
  void FinishClosing() {
    error_code ignored;
    // Half-close so the client sees EOF after the last byte.
    Lowest().shutdown(tcp::socket::shutdown_send, ignored);
    if (!linger_after_answer) {
      Close();
      return;
    }
    phase = Phase::kLinger;
    lingered_bytes = 0;
    ArmRead(kLingerMs);
    DoRead();
  }

  // --- deadlines -------------------------------------------------------------

  void ArmRead(int64_t timeout_ms) {
    if (timeout_ms <= 0) {
      DisarmRead();
      return;
    }
    read_deadline_ns = NowNs() + MsToNs(timeout_ms);
    read_timer.expires_at(TimePointFromNs(read_deadline_ns));
    read_timer.async_wait([self = shared_from_this()](const error_code& ec) {
      self->OnReadDeadline(ec);
    });
  }

  void DisarmRead() {
    if (read_deadline_ns == 0) return;
    read_deadline_ns = 0;
    read_timer.cancel();
  }

  void OnReadDeadline(const error_code& ec) {
    // A wait that completed just before a re-arm sees the later deadline.
    if (ec || closed || read_deadline_ns == 0 || NowNs() < read_deadline_ns)
      return;
    read_deadline_ns = 0;
    switch (phase) {
      case Phase::kHandshake:
        impl->stats.timeouts++;
        Close();
        return;
      case Phase::kHeader:
        impl->stats.timeouts++;
        if (parser.header_bytes() == 0 && rend == rbegin) {
          Close();  // not a byte of a request: nobody waits for an answer
          return;
        }
        AnswerAndClose(408,
                       "the request header block was not complete within " +
                           std::to_string(options().header_timeout_ms) + " ms",
                       /*linger=*/false);
        return;
      case Phase::kBody:
        impl->stats.timeouts++;
        AnswerAndClose(408,
                       "the request body was not complete within " +
                           std::to_string(options().body_timeout_ms) +
                           " ms of its header block",
                       /*linger=*/false);
        return;
      case Phase::kIdle:
        impl->stats.idle_closed++;
        Close();
        return;
      case Phase::kLinger:
        Close();
        return;
      case Phase::kHandler:
      case Phase::kClosing:
        return;
    }
  }

  void ArmWriteTimer() {
    const int64_t timeout_ms = options().write_timeout_ms;
    if (timeout_ms <= 0 || write_timer_armed) return;
    write_timer_armed = true;
    write_timer.expires_at(
        TimePointFromNs(last_write_progress_ns + MsToNs(timeout_ms)));
    write_timer.async_wait([self = shared_from_this()](const error_code& ec) {
      self->OnWriteDeadline(ec);
    });
  }

  void OnWriteDeadline(const error_code& ec) {
    write_timer_armed = false;
    if (ec || closed || !writing) return;
    if (NowNs() - last_write_progress_ns >=
        MsToNs(options().write_timeout_ms)) {
      impl->stats.timeouts++;
      PeerGone(/*defer_notify=*/false);
      return;
    }
    ArmWriteTimer();
  }

  // --- writing -------------------------------------------------------------

  size_t HeldBytes() const {
    return pending.size() + (inflight.size() - inflight_off);
  }

  void QueueWrite(std::string data) {
    if (closed) return;
    const size_t held = HeldBytes();
    if (held > 0 && held + data.size() > options().max_pending_write_bytes) {
      // The client reads slower than the response is produced; holding more
      // would let it grow without bound. The caller may be the handler
      // itself, so it learns of this from a fresh loop turn.
      impl->stats.write_overflows++;
      PeerGone(/*defer_notify=*/true);
      return;
    }
    if (pending.empty()) {
      pending.swap(data);
    } else {
      pending += data;
    }
    if (!writing) StartWrite();
    UpdateHeld();
  }

  void StartWrite() {
    writing = true;
    inflight.swap(pending);
    pending.clear();
    inflight_off = 0;
    last_write_progress_ns = NowNs();
    ArmWriteTimer();
    WriteSome();
  }

  // One write_some at a time rather than one async_write, so that each bit
  // of progress is seen (the stall timer) and pending_bytes() stays exact.
  void WriteSome() {
    WithStream([this](auto& stream) {
      stream.async_write_some(
          asio::buffer(inflight.data() + inflight_off,
                       inflight.size() - inflight_off),
          [self = shared_from_this()](const error_code& ec, size_t n) {
            self->OnWriteSome(ec, n);
          });
    });
  }

  void OnWriteSome(const error_code& ec, size_t n) {
    if (closed) {
      writing = false;
      return;
    }
    if (ec) {
      writing = false;
      PeerGone(/*defer_notify=*/false);
      return;
    }
    inflight_off += n;
    if (n > 0) last_write_progress_ns = NowNs();
    if (inflight_off < inflight.size()) {
      UpdateHeld();
      WriteSome();
      return;
    }
    writing = false;
    inflight.clear();
    inflight_off = 0;
    if (inflight.capacity() > kKeepWriteCapacity) std::string().swap(inflight);
    if (!pending.empty()) StartWrite();
    UpdateHeld();  // may run the handler's on-writable callback
    if (closed || writing) return;
    if (pending.capacity() > kKeepWriteCapacity) std::string().swap(pending);
    if (phase == Phase::kHandler && ended) {
      ResponseDone();
    } else if (phase == Phase::kClosing) {
      FinishClosing();
    }
  }

  void UpdateHeld();
  void ResponseDone();
  void PeerGone(bool defer_notify);

  void Close() {
    if (closed) return;
    closed = true;
    impl->live.erase(this);
    impl->stats.connections_open--;
    read_deadline_ns = 0;
    read_timer.cancel();
    write_timer.cancel();
    error_code ignored;
    Lowest().close(ignored);
  }

  std::shared_ptr<Server::Impl> impl;
  std::optional<tcp::socket> plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  std::string remote;
  RequestParser parser;
  Phase phase = Phase::kHeader;
  // Unparsed input is rbuf[rbegin, rend). A read in flight writes at rend;
  // rend moves only when it completes, and bytes move to the front only
  // when no read is in flight.
  std::vector<char> rbuf;
  size_t rbegin = 0;
  size_t rend = 0;
  size_t lingered_bytes = 0;
  asio::steady_timer read_timer;
  int64_t read_deadline_ns = 0;  // 0: not armed
  asio::steady_timer write_timer;
  bool write_timer_armed = false;
  int64_t last_write_progress_ns = 0;
  bool reading = false;
  bool writing = false;
  bool started = false;  // the head of the handler's response is queued
  bool ended = false;    // its last byte is queued
  bool keep_alive = true;
  bool linger_after_answer = false;
  bool above_half = false;  // held bytes reached max_pending_write_bytes / 2
  bool closed = false;
  std::string pending;   // bytes waiting for the current write to finish
  std::string inflight;  // bytes of the current write
  size_t inflight_off = 0;
  std::shared_ptr<Writer> writer;
};

// The ResponseWriter of one request. Holds its connection weakly; every call
// hops onto the loop thread (inline when already there).
class Writer final : public ResponseWriter,
                     public std::enable_shared_from_this<Writer> {
 public:
  Writer(std::weak_ptr<ServerConnection> conn, asio::io_context& io,
         bool head_only)
      : conn_(std::move(conn)), io_(io), head_only_(head_only) {}

  void Respond(int status, std::vector<Header> headers,
               std::string body) override {
    Run([status, headers = std::move(headers), body = std::move(body)](
            ServerConnection& c, Writer& w) mutable {
      if (c.started) return;
      std::string out;
      out.reserve((w.head_only_ ? 0 : body.size()) + 128);
      AppendHead(out, status, headers);
      out += "Content-Length: ";
      out += std::to_string(body.size());
      out += "\r\n";
      if (!c.keep_alive) out += "Connection: close\r\n";
      out += "\r\n";
      if (!w.head_only_) out += body;
      c.started = true;
      c.ended = true;
      c.QueueWrite(std::move(out));
    });
  }

  void BeginStream(int status, std::vector<Header> headers) override {
    Run([status, headers = std::move(headers)](ServerConnection& c,
                                               Writer&) mutable {
      if (c.started) return;
      std::string out;
      AppendHead(out, status, headers);
      out += "Transfer-Encoding: chunked\r\n";
      if (!c.keep_alive) out += "Connection: close\r\n";
      out += "\r\n";
      c.started = true;
      c.QueueWrite(std::move(out));
    });
  }

  void Write(std::string data) override {
    if (data.empty()) return;  // an empty chunk would end the body
    Run([data = std::move(data)](ServerConnection& c, Writer&) mutable {
      if (!c.started || c.ended) return;
      char size_line[24];
      int n =
          std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
      std::string out;
      out.reserve(data.size() + static_cast<size_t>(n) + 2);
      out.append(size_line, static_cast<size_t>(n));
      out += data;
      out += "\r\n";
      c.QueueWrite(std::move(out));
    });
  }

  void End() override {
    Run([](ServerConnection& c, Writer&) {
      if (!c.started || c.ended) return;
      c.ended = true;
      c.QueueWrite("0\r\n\r\n");
    });
  }

  void Abort() override {
    Run([](ServerConnection& c, Writer& w) {
      w.peer_closed_ = true;
      c.Close();
    });
  }

  bool peer_closed() const override {
    return peer_closed_.load(std::memory_order_relaxed);
  }

  void SetOnPeerClosed(std::function<void()> fn) override {
    Run([fn = std::move(fn)](ServerConnection&, Writer& w) mutable {
      w.on_peer_closed_ = std::move(fn);
    });
  }

  size_t pending_bytes() const override {
    return pending_bytes_.load(std::memory_order_relaxed);
  }

  void SetOnWritable(std::function<void()> fn) override {
    Run([fn = std::move(fn)](ServerConnection&, Writer& w) mutable {
      w.on_writable_ = std::move(fn);
    });
  }

  // Clears both callbacks (the response is over).
  void NotifyPeerClosed() {
    peer_closed_ = true;
    on_writable_ = nullptr;
    if (on_peer_closed_) {
      auto fn = std::move(on_peer_closed_);
      on_peer_closed_ = nullptr;
      fn();
    }
  }

  // Breaks the cycle a callback holding this writer would make, once the
  // response is over.
  void DropCallbacks() {
    on_peer_closed_ = nullptr;
    on_writable_ = nullptr;
  }

  void SetPendingBytes(size_t n) {
    pending_bytes_.store(n, std::memory_order_relaxed);
  }

  void NotifyWritable() {
    if (!on_writable_) return;
    // A copy: the callback may replace itself.
    auto fn = on_writable_;
    fn();
  }

 private:
  template <typename F>
  void Run(F&& f) {
    asio::dispatch(
        io_, [self = shared_from_this(), f = std::forward<F>(f)]() mutable {
          auto conn = self->conn_.lock();
          if (!conn || conn->closed || conn->writer.get() != self.get()) return;
          f(*conn, *self);
        });
  }

  std::weak_ptr<ServerConnection> conn_;
  asio::io_context& io_;
  bool head_only_;
  std::atomic<bool> peer_closed_{false};
  std::atomic<size_t> pending_bytes_{0};
  std::function<void()> on_peer_closed_;
  std::function<void()> on_writable_;
};

ServerConnection::~ServerConnection() {
  Close();
  if (writer) writer->DropCallbacks();
}

void ServerConnection::UpdateHeld() {
  const size_t held = HeldBytes();
  std::shared_ptr<Writer> w = writer;
  if (w) w->SetPendingBytes(held);
  if (held >= options().max_pending_write_bytes / 2) {
    above_half = true;
  } else if (above_half) {
    above_half = false;
    if (w) w->NotifyWritable();
  }
}

void ServerConnection::Dispatch() {
  DisarmRead();
  ServerRequest request = std::move(parser.request());
  keep_alive = parser.keep_alive();
  request.t_received_ns = NowNs();
  request.remote_address = remote;
  phase = Phase::kHandler;
  impl->stats.requests++;
  writer = std::make_shared<Writer>(weak_from_this(), impl->io,
                                    request.method == "HEAD");
  writer->SetPendingBytes(HeldBytes());  // a 100 Continue may still be out
  std::shared_ptr<ResponseWriter> w = writer;
  impl->handler(std::move(request), std::move(w));
}

void ServerConnection::ResponseDone() {
  ended = false;
  started = false;
  above_half = false;
  writer->DropCallbacks();
  writer.reset();
  if (!keep_alive || impl->stopped) {
    // Half-close so the client sees EOF after the last byte.
    error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_send, ignored);
    Close();
    return;
  }
  parser.Reset();
  phase = Phase::kIdle;
  ArmRead(options().idle_timeout_ms);
  if (!reading && rbuf.size() > kReadBufferBytes &&
      rend - rbegin <= kReadBufferBytes) {
    // A burst grew the buffer; an idle connection keeps only the usual size.
    std::vector<char> small(kReadBufferBytes);
    std::memcpy(small.data(), rbuf.data() + rbegin, rend - rbegin);
    rend -= rbegin;
    rbegin = 0;
    rbuf.swap(small);
  }
  Process();
  DoRead();
}

void ServerConnection::PeerGone(bool defer_notify) {
  // Taken out so that the connection's destructor, which may run before a
  // deferred notification, leaves the writer's callbacks to it.
  std::shared_ptr<Writer> w = std::move(writer);
  Close();
  if (!w) return;
  if (defer_notify) {
    asio::post(impl->io, [w] { w->NotifyPeerClosed(); });
  } else {
    w->NotifyPeerClosed();
  }
}

void Server::Impl::Accept() {
  if (stopped) return;
  acceptor.async_accept(
      [self = shared_from_this()](const error_code& ec, tcp::socket socket) {
        if (self->stopped || ec == asio::error::operation_aborted) return;
        if (!ec) {
          self->OnAccepted(std::move(socket));
          self->Accept();
        } else if (IsTransientAcceptError(ec)) {
          self->Accept();
        } else {
          self->OnAcceptFailed(ec);
        }
      });
}

void Server::Impl::OnAccepted(tcp::socket socket) {
  stats.connections_accepted++;
  if (static_cast<uint64_t>(stats.connections_open) >= max_connections) {
    stats.connections_rejected++;
    Reject(socket.native_handle());
    error_code ignored;
    socket.close(ignored);
    return;
  }
  auto conn =
      std::make_shared<ServerConnection>(shared_from_this(), std::move(socket));
  conn->Begin();
}

void Server::Impl::Reject(int fd) {
  if (tls) return;  // a plain-text answer would mean nothing to the client
  // Drop the request bytes already here, so that closing does not reset the
  // connection before the client reads the answer.
  char scratch[4096];
  for (int i = 0; i < 16; ++i) {
    if (::recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT) <= 0) break;
  }
  std::vector<Header> headers;
  std::string body;
  if (options.on_connection_rejected) {
    options.on_connection_rejected(&headers, &body);
  } else {
    headers.push_back({"Content-Type", "text/plain"});
    body = "server at its connection limit; retry later\n";
  }
  headers.push_back({"Retry-After", "1"});
  headers.push_back({"Connection", "close"});
  const std::string out =
      SerializeResponse(503, headers, body, /*head_only=*/false);
  // Best effort: a fresh socket's send buffer takes a short answer at once.
  [[maybe_unused]] ssize_t sent =
      ::send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
}

void Server::Impl::OnAcceptFailed(const error_code& ec) {
  stats.accept_errors++;
  int shed = 0;
  if (IsExhaustion(ec)) {
    // The waiting connection stays queued (accept failed before taking it):
    // free the reserve descriptor, take it, answer it and let it go, then
    // take the reserve back. Without this the queue never moves.
    while (shed < kMaxShedPerBackoff && reserve_fd >= 0) {
      CloseReserve();
      const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr,
                               SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        stats.connections_accepted++;
        stats.connections_rejected++;
        Reject(fd);
        ::close(fd);
        ++shed;
      }
      reserve_fd = OpenReserveDescriptor();
      if (fd < 0) break;
    }
  }
  const int64_t now = NowNs();
  if (last_accept_log_ns == 0 ||
      now - last_accept_log_ns >= kAcceptLogIntervalNs) {
    RL_LOG(kWarning,
           "http server: accept failed: {} ({} more failures since the last "
           "message); {} waiting connection(s) answered 503; retrying in {} ms",
           ec.message(), accept_log_suppressed, shed, kAcceptBackoffMs);
    last_accept_log_ns = now;
    accept_log_suppressed = 0;
  } else {
    accept_log_suppressed++;
  }
  accept_backoff.expires_after(std::chrono::milliseconds(kAcceptBackoffMs));
  accept_backoff.async_wait(
      [self = shared_from_this()](const error_code& wait_ec) {
        if (wait_ec || self->stopped) return;
        self->Accept();
      });
}

Server::Server(EventLoop& loop, ServerOptions options, RequestHandler handler)
    : impl_(std::make_shared<Impl>(loop, std::move(options),
                                   std::move(handler))) {}

Server::~Server() { Stop(); }

Result<uint16_t> Server::Start() {
  Impl& s = *impl_;
  error_code ec;
  if (!s.options.tls_cert_file.empty() || !s.options.tls_key_file.empty()) {
    s.tls_ctx.use_certificate_chain_file(s.options.tls_cert_file, ec);
    if (ec)
      return Status::InvalidArgument(
          "TLS certificate " + s.options.tls_cert_file + ": " + ec.message());
    s.tls_ctx.use_private_key_file(s.options.tls_key_file, ssl::context::pem,
                                   ec);
    if (ec)
      return Status::InvalidArgument("TLS key " + s.options.tls_key_file +
                                     ": " + ec.message());
    s.tls = true;
  }
  if (s.options.max_header_bytes == 0)
    return Status::InvalidArgument("max_header_bytes must be positive");
  s.limits.max_header_bytes = s.options.max_header_bytes;
  s.limits.max_body_bytes = s.options.max_request_bytes;
  s.max_buffered_bytes =
      s.options.max_buffered_bytes != 0
          ? s.options.max_buffered_bytes
          : s.options.max_request_bytes + s.options.max_header_bytes;
  s.max_buffered_bytes =
      std::max(s.max_buffered_bytes, RequestParser::MaxUnparsedBytes(s.limits));
  s.max_connections = s.options.max_connections;
  if (s.max_connections == 0) {
    rlimit lim{};
    uint64_t fds = 1024;
    if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
      fds = lim.rlim_cur;
    else if (lim.rlim_cur == RLIM_INFINITY)
      fds = uint64_t{1} << 20;
    s.max_connections = static_cast<size_t>(
        std::max(kMinConnections,
                 fds > kDescriptorReserve ? fds - kDescriptorReserve : 0));
  }
  auto address = asio::ip::make_address(s.options.host, ec);
  if (ec)
    return Status::InvalidArgument("bad listen address '" + s.options.host +
                                   "'");
  tcp::endpoint endpoint(address, s.options.port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (ec) return Status::IoError("socket: " + ec.message());
  s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (s.options.reuse_port) {
    s.acceptor.set_option(
        asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true),
        ec);
    if (ec) return Status::IoError("SO_REUSEPORT: " + ec.message());
  }
  s.acceptor.bind(endpoint, ec);
  if (ec)
    return Status::IoError("bind " + s.options.host + ":" +
                           std::to_string(s.options.port) + ": " +
                           ec.message());
  s.acceptor.listen(s.options.backlog, ec);
  if (ec) return Status::IoError("listen: " + ec.message());
  // The reserve descriptor is taken with accept4 on this socket, which must
  // then fail instead of blocking when nothing waits.
  s.acceptor.non_blocking(true, ec);
  if (ec) return Status::IoError("non-blocking listener: " + ec.message());
  s.port = s.acceptor.local_endpoint().port();
  if (s.reserve_fd < 0) s.reserve_fd = OpenReserveDescriptor();
  s.Accept();
  return s.port;
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  error_code ignored;
  s.acceptor.close(ignored);
  s.accept_backoff.cancel();
  s.CloseReserve();
  std::vector<std::shared_ptr<ServerConnection>> conns;
  for (ServerConnection* c : s.live) conns.push_back(c->shared_from_this());
  for (auto& c : conns) c->Close();
}

uint16_t Server::port() const { return impl_->port; }
ServerStats Server::stats() const { return impl_->stats; }

}  // namespace redline::http

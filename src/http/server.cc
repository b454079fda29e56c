// Server implementation: Asio acceptor and sockets (optionally asio::ssl),
// Beast's basic_parser for requests, responses serialized by hand so that
// each streamed chunk goes to the socket at once.
#include "http/server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cstring>
#include <optional>
#include <unordered_set>
#include <utility>

#include "base/logging.h"
#include "http/event_loop_impl.h"

namespace redline::http {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

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

class RequestParser final : public bhttp::basic_parser<true> {
 public:
  explicit RequestParser(size_t max_body) {
    body_limit(max_body);
    eager(true);
  }
  ServerRequest& request() { return request_; }

 private:
  void on_request_impl(bhttp::verb, boost::beast::string_view method,
                       boost::beast::string_view target, int,
                       error_code&) override {
    request_.method.assign(method.data(), method.size());
    request_.target.assign(target.data(), target.size());
  }
  void on_response_impl(int, boost::beast::string_view, int,
                        error_code& ec) override {
    ec = bhttp::error::bad_status;
  }
  void on_field_impl(bhttp::field, boost::beast::string_view name,
                     boost::beast::string_view value, error_code&) override {
    request_.headers.push_back({std::string(name.data(), name.size()),
                                std::string(value.data(), value.size())});
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<uint64_t>& length,
                         error_code&) override {
    if (length) request_.body.reserve(static_cast<size_t>(*length));
  }
  size_t on_body_impl(boost::beast::string_view body, error_code&) override {
    request_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(uint64_t, boost::beast::string_view,
                            error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, boost::beast::string_view body,
                            error_code&) override {
    request_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  ServerRequest request_;
};

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
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
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
        tls_ctx(ssl::context::tls_server) {}

  void Accept();

  asio::io_context& io;
  ServerOptions options;
  RequestHandler handler;
  tcp::acceptor acceptor;
  ssl::context tls_ctx;
  bool tls = false;
  bool stopped = false;
  uint16_t port = 0;
  std::unordered_set<ServerConnection*> live;
  ServerStats stats;
};

class Writer;

struct ServerConnection : std::enable_shared_from_this<ServerConnection> {
  ServerConnection(std::shared_ptr<Server::Impl> server_impl,
                   tcp::socket socket)
      : impl(std::move(server_impl)) {
    if (impl->tls) {
      tls.emplace(std::move(socket), impl->tls_ctx);
    } else {
      plain.emplace(std::move(socket));
    }
    rbuf.resize(16 * 1024);
    impl->live.insert(this);
    impl->stats.connections_open++;
  }
  ~ServerConnection() {
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

  void Begin() {
    error_code ignored;
    Lowest().set_option(tcp::no_delay(true), ignored);
    auto ep = Lowest().remote_endpoint(ignored);
    remote = ep.address().to_string();
    if (tls) {
      tls->async_handshake(ssl::stream_base::server,
                           [self = shared_from_this()](const error_code& ec) {
                             if (ec) {
                               self->Close();
                               return;
                             }
                             self->NewParser();
                             self->DoRead();
                           });
    } else {
      NewParser();
      DoRead();
    }
  }

  void NewParser() { parser.emplace(impl->options.max_request_bytes); }

  void DoRead() {
    if (reading || closed) return;
    if (rlen == rbuf.size()) {
      if (rbuf.size() >= impl->options.max_request_bytes + 64 * 1024)
        return;  // wait until idle
      rbuf.resize(rbuf.size() * 2);
    }
    reading = true;
    WithStream([this](auto& stream) {
      stream.async_read_some(
          asio::buffer(rbuf.data() + rlen, rbuf.size() - rlen),
          [self = shared_from_this()](const error_code& ec, size_t n) {
            self->OnRead(ec, n);
          });
    });
  }

  void OnRead(const error_code& ec, size_t n) {
    reading = false;
    if (closed) return;
    rlen += n;
    if (ec) {
      PeerGone();
      return;
    }
    if (!busy) Process();
    DoRead();
  }

  // Parses buffered bytes; dispatches a request when one is complete.
  void Process() {
    while (!busy && !closed && rlen > 0) {
      error_code pec;
      size_t used = parser->put(asio::buffer(rbuf.data(), rlen), pec);
      if (used > 0) {
        std::memmove(rbuf.data(), rbuf.data() + used, rlen - used);
        rlen -= used;
      }
      if (pec == bhttp::error::need_more) return;
      if (pec) {
        std::string body = "bad request: " + pec.message() + "\n";
        int status = 400;
        std::vector<Header> headers;
        if (impl->options.on_parse_error) {
          const bool too_large = pec == bhttp::error::body_limit ||
                                 pec == bhttp::error::header_limit;
          body.clear();
          impl->options.on_parse_error(too_large, pec.message(), &status,
                                       &headers, &body);
        } else {
          headers.push_back({"Content-Type", "text/plain"});
        }
        headers.push_back({"Connection", "close"});
        std::string out;
        AppendHead(out, status, headers);
        out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
               body;
        keep_alive = false;
        busy = true;
        ended = true;
        QueueWrite(std::move(out));
        return;
      }
      if (!parser->is_done()) return;
      Dispatch();
    }
  }

  void Dispatch();
  void PeerGone();

  void QueueWrite(std::string data) {
    if (closed) return;
    pending += data;
    if (!writing) StartWrite();
  }

  void StartWrite() {
    writing = true;
    inflight.swap(pending);
    pending.clear();
    WithStream([this](auto& stream) {
      asio::async_write(
          stream, asio::buffer(inflight),
          [self = shared_from_this()](const error_code& ec, size_t) {
            self->OnWritten(ec);
          });
    });
  }

  void OnWritten(const error_code& ec) {
    writing = false;
    if (closed) return;
    if (ec) {
      PeerGone();
      return;
    }
    if (!pending.empty()) {
      StartWrite();
      return;
    }
    if (busy && ended) ResponseDone();
  }

  void ResponseDone() {
    busy = false;
    ended = false;
    started = false;
    writer.reset();
    if (!keep_alive || impl->stopped) {
      // Half-close so the client sees EOF after the last byte.
      error_code ignored;
      Lowest().shutdown(tcp::socket::shutdown_send, ignored);
      Close();
      return;
    }
    NewParser();
    Process();
    DoRead();
  }

  void Close() {
    if (closed) return;
    closed = true;
    error_code ignored;
    Lowest().close(ignored);
  }

  std::shared_ptr<Server::Impl> impl;
  std::optional<tcp::socket> plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  std::string remote;
  std::vector<char> rbuf;
  size_t rlen = 0;
  std::optional<RequestParser> parser;
  bool reading = false;
  bool writing = false;
  bool busy = false;     // a request is being answered
  bool started = false;  // its head has been queued
  bool ended = false;    // its last byte has been queued
  bool keep_alive = true;
  bool closed = false;
  std::string pending;   // bytes waiting for the current write to finish
  std::string inflight;  // bytes of the current write
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
      out.reserve(body.size() + 128);
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

  void NotifyPeerClosed() {
    peer_closed_ = true;
    if (on_peer_closed_) {
      auto fn = std::move(on_peer_closed_);
      on_peer_closed_ = nullptr;
      fn();
    }
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
  std::function<void()> on_peer_closed_;
};

void ServerConnection::Dispatch() {
  ServerRequest request = std::move(parser->request());
  keep_alive = parser->keep_alive();
  request.t_received_ns = NowNs();
  request.remote_address = remote;
  busy = true;
  impl->stats.requests++;
  writer = std::make_shared<Writer>(weak_from_this(), impl->io,
                                    request.method == "HEAD");
  std::shared_ptr<ResponseWriter> w = writer;
  impl->handler(std::move(request), std::move(w));
}

void ServerConnection::PeerGone() {
  auto w = writer;
  Close();
  if (w) w->NotifyPeerClosed();
}

void Server::Impl::Accept() {
  acceptor.async_accept([self = shared_from_this()](const error_code& ec,
                                                    tcp::socket socket) {
    if (self->stopped) return;
    if (!ec) {
      self->stats.connections_accepted++;
      auto conn = std::make_shared<ServerConnection>(self, std::move(socket));
      conn->Begin();
    } else if (ec == asio::error::no_descriptors) {
      RL_LOG(kWarning, "http server: out of file descriptors while accepting");
    }
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
  s.port = s.acceptor.local_endpoint().port();
  s.Accept();
  return s.port;
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  error_code ignored;
  s.acceptor.close(ignored);
  std::vector<std::shared_ptr<ServerConnection>> conns;
  for (ServerConnection* c : s.live) conns.push_back(c->shared_from_this());
  for (auto& c : conns) c->Close();
}

uint16_t Server::port() const { return impl_->port; }
ServerStats Server::stats() const { return impl_->stats; }

}  // namespace redline::http

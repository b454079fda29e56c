// Server: a small asynchronous HTTP/1.1 server (plain TCP or TLS) on an
// EventLoop. It accepts connections, parses requests and hands each one to a
// RequestHandler together with a ResponseWriter, which answers either with a
// whole response or with a stream of chunks, each flushed as soon as it is
// written (chunked transfer encoding), as SSE needs.
//
// Generic on purpose: the test server of `redline bench` uses it now and
// `redline serve` can build its routes on it; nothing here knows OpenAI.
//
// Threading: Start/Stop, stats() and every callback (the RequestHandler and
// the ServerOptions hooks) run on the loop thread.
// ResponseWriter methods may be called from any thread (they hop onto the
// loop), so a handler may answer later, from a timer or another thread.
//
// Budgets: every connection is bounded in time (header, body, idle and write
// timeouts) and memory (header block, body, unparsed input and waiting
// output; the body buffer grows with the bytes that arrive, never from a
// declared length), and the number of connections is bounded
// (max_connections). At the descriptor limit the accept loop backs off
// (50 ms) instead of spinning, and one descriptor held in reserve is
// released to answer a waiting connection with 503 and close it.
//
// Cost per idle connection: one socket, a 16 KiB read buffer, two timers.
//
// Ownership: the Server must outlive the loop's Run() that serves it, or be
// stopped first. ResponseWriters are shared; they stay valid (as no-ops)
// after the connection is gone.
#ifndef REDLINE_HTTP_SERVER_H_
#define REDLINE_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "http/client.h"  // Header
#include "http/event_loop.h"

namespace redline::http {

struct ServerRequest {
  std::string method;
  std::string target;  // path and query as received
  std::vector<Header> headers;
  std::string body;
  int64_t t_received_ns = 0;  // NowNs() when the request was fully parsed
  std::string remote_address;

  // First header with this name (case-insensitive); empty when absent.
  std::string_view HeaderValue(std::string_view name) const;
  // Path without the query string.
  std::string_view Path() const;
};

// Answers one request. Exactly one of Respond() or BeginStream() ... End()
// (or Abort()) should be used; calls out of order are ignored.
//
// Back-pressure: bytes written while an earlier write is still in the socket
// wait in one per-connection buffer, bounded by
// ServerOptions::max_pending_write_bytes. A Respond() or Write() that would
// push the waiting bytes over the bound closes the connection instead (the
// client is not reading fast enough; peer_closed() turns true and the
// on-peer-closed callback runs), except that a single piece larger than the
// bound is accepted when nothing else waits. A write that makes no progress
// for write_timeout_ms closes the connection the same way. A handler that
// streams faster than a client may read can pace itself with pending_bytes()
// and SetOnWritable(). Bytes count once they reach the loop thread; calls
// from other threads are queued on the loop's task queue until then.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // Sends a complete response with Content-Length.
  virtual void Respond(int status, std::vector<Header> headers,
                       std::string body) = 0;

  // Sends the status line and headers now (Transfer-Encoding: chunked).
  virtual void BeginStream(int status, std::vector<Header> headers) = 0;
  // Sends one chunk now. Writes issued while a previous one is still in the
  // socket are coalesced into the next write.
  virtual void Write(std::string data) = 0;
  // Sends the terminating chunk; the connection then serves the next request.
  virtual void End() = 0;

  // Closes the connection at once without finishing the response (to test
  // how clients handle a dropped stream).
  virtual void Abort() = 0;

  // True once the client has gone away (read EOF, a failed or stalled write,
  // or the write bound exceeded).
  virtual bool peer_closed() const = 0;

  // Called on the loop thread when the client goes away before the response
  // ended (lets a server stop generating).
  virtual void SetOnPeerClosed(std::function<void()> fn) = 0;

  // Bytes of this response queued on the loop thread and not yet taken by
  // the socket. Safe from any thread (a relaxed snapshot).
  virtual size_t pending_bytes() const { return 0; }

  // Called on the loop thread each time pending_bytes() falls below half of
  // max_pending_write_bytes after having been at or above it. Stays set
  // until replaced or the response ends.
  virtual void SetOnWritable(std::function<void()> fn) {}
};

using RequestHandler = std::function<void(
    ServerRequest&& request, std::shared_ptr<ResponseWriter> writer)>;

// A response sent before the body is read (ServerOptions::on_headers). The
// http layer adds Content-Length and Connection: close.
struct EarlyResponse {
  int status = 400;
  std::vector<Header> headers;
  std::string body;
};

// Limits and hooks of one Server. Every limit bounds what one client can make
// the server hold or wait for; the defaults suit a public endpoint.
struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;   // 0: the OS picks a free port
  int backlog = 4096;  // capped by net.core.somaxconn
  // SO_REUSEPORT: several Servers (one per thread and loop) may bind the
  // same port; the kernel spreads connections across them.
  bool reuse_port = false;
  // TLS when both are set (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;

  // Request body limit (decoded bytes); over it: 413. A declared
  // Content-Length over it is refused before any body byte is read.
  size_t max_request_bytes = 16 * 1024 * 1024;
  // Request line plus header fields plus the empty line; over it: 431.
  // Chunk-size lines and trailers share what the header block left (at
  // least 1 KiB).
  size_t max_header_bytes = 16 * 1024;
  // Bytes read from the socket and not yet parsed (pipelined requests that
  // arrive while one is being answered). When full the server stops reading
  // (TCP back-pressure). 0: max_request_bytes + max_header_bytes. Never less
  // than max_header_bytes (and 1 KiB), which a header block may need.
  size_t max_buffered_bytes = 0;
  // Open connections; a connection accepted beyond it gets an immediate
  // "503 Service Unavailable" (Retry-After: 1, Connection: close) and is
  // closed. 0: the RLIMIT_NOFILE soft limit at Start() minus 64, at least 16.
  size_t max_connections = 0;

  // Timeouts in milliseconds; 0 or less disables one. Each closes the
  // connection and counts in ServerStats::timeouts (idle closes count in
  // idle_closed).
  // From accept (TLS handshake included), or from the first byte of a
  // later request, until its header block is complete. On expiry: 408 when
  // some of the request had arrived, else a silent close.
  int64_t header_timeout_ms = 10'000;
  // From the end of the header block until the whole body is read: a total,
  // not a per-read limit, so a body trickled byte by byte is still bounded.
  // On expiry: 408.
  int64_t body_timeout_ms = 30'000;
  // Keep-alive: from the end of a response until the first byte of the next
  // request. On expiry: silent close.
  int64_t idle_timeout_ms = 60'000;
  // A response write (or the 100 Continue, or an error answer) that makes no
  // progress for this long closes the connection as if the client had gone
  // (peer_closed(), on-peer-closed callback).
  int64_t write_timeout_ms = 30'000;
  // Per-connection bound on response bytes waiting behind the write in the
  // socket (see ResponseWriter).
  size_t max_pending_write_bytes = 4 * 1024 * 1024;

  // Optional: builds the answer to a request the http layer refuses; the
  // connection closes after it. *status is preset to the status the http
  // layer chose (400 malformed, 408 timeout, 413 body over
  // max_request_bytes, 431 header block over max_header_bytes, 501 transfer
  // coding not supported) and `too_large` is true exactly when it is 413.
  // `detail` says what was wrong (naming the limit). The callee may change
  // *status, add headers and sets *body. Unset: the preset status with a
  // text/plain body. Runs on the loop thread.
  //
  // After this answer or an early one (on_headers), input the client may
  // still be sending is read and dropped for up to 2 s or 1 MiB before the
  // socket closes, so that the close does not reset the connection before
  // the client has read the answer. Nothing of it is kept.
  std::function<void(bool too_large, std::string_view detail, int* status,
                     std::vector<Header>* headers, std::string* body)>
      on_parse_error;

  // Optional: called on the loop thread once a request's header block is
  // parsed and checked, before any body byte is consumed. `head` has method,
  // target, headers and remote_address; its body is empty. Returning a
  // response sends it (with Connection: close) and closes the connection
  // without reading the body; the handler is not called. Use it to refuse
  // early (401, 404, 413 by route). Returning nullopt reads the body (first
  // sending 100 Continue when the client asked for it) and calls the
  // handler. Must not block.
  std::function<std::optional<EarlyResponse>(const ServerRequest& head)>
      on_headers;

  // Optional: builds the body of the 503 sent to a connection refused over
  // max_connections or at the process's descriptor limit (the http layer sets
  // the status line, Retry-After: 1, Connection: close and Content-Length;
  // the callee may add headers such as Content-Type). Unset: a short
  // text/plain body. Runs on the loop thread once per refused connection;
  // keep it cheap. Not used with TLS (those connections are just closed).
  std::function<void(std::vector<Header>* headers, std::string* body)>
      on_connection_rejected;
};

// Counters of one Server since Start(). Read them on the loop thread.
struct ServerStats {
  uint64_t connections_accepted = 0;  // including the rejected ones
  uint64_t requests = 0;              // handed to the handler
  int64_t connections_open = 0;       // sockets held now
  // Refused with 503 (or closed, with TLS): over max_connections, or shed
  // through the reserve descriptor at the descriptor limit.
  uint64_t connections_rejected = 0;
  // accept() failures that are not a single connection's own: out of
  // descriptors or memory (each one backs the accept loop off 50 ms).
  uint64_t accept_errors = 0;
  // Connections closed for a header, body or write timeout.
  uint64_t timeouts = 0;
  // Keep-alive connections closed after idle_timeout_ms.
  uint64_t idle_closed = 0;
  // Connections closed because a response outgrew max_pending_write_bytes.
  uint64_t write_overflows = 0;
  // Requests refused as malformed or over a limit (400, 413, 431, 501);
  // 408s count in `timeouts`.
  uint64_t parse_errors = 0;
  // Requests answered by on_headers.
  uint64_t early_responses = 0;
};

class Server {
 public:
  Server(EventLoop& loop, ServerOptions options, RequestHandler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts accepting. Returns the bound port.
  Result<uint16_t> Start();
  // Stops accepting and closes every connection. Idempotent.
  void Stop();

  uint16_t port() const;
  ServerStats stats() const;

  // Implementation (defined in the .cc file only).
  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Standard reason phrase for a status code ("OK", "Too Many Requests").
std::string_view ReasonPhrase(int status);

}  // namespace redline::http

#endif  // REDLINE_HTTP_SERVER_H_

// Server: a small asynchronous HTTP/1.1 server (plain TCP or TLS) on an
// EventLoop. It accepts connections, parses requests and hands each one to a
// RequestHandler together with a ResponseWriter, which answers either with a
// whole response or with a stream of chunks, each flushed as soon as it is
// written (chunked transfer encoding), as SSE needs.
//
// Generic on purpose: the test server of `redline bench` uses it now and
// `redline serve` can build its routes on it; nothing here knows OpenAI.
//
// Threading: Start/Stop and the RequestHandler run on the loop thread.
// ResponseWriter methods may be called from any thread (they hop onto the
// loop), so a handler may answer later, from a timer or another thread.
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

  // True once the client has gone away (read EOF or a failed write).
  virtual bool peer_closed() const = 0;

  // Called on the loop thread when the client goes away before the response
  // ended (lets a server stop generating).
  virtual void SetOnPeerClosed(std::function<void()> fn) = 0;
};

using RequestHandler = std::function<void(
    ServerRequest&& request, std::shared_ptr<ResponseWriter> writer)>;

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
  size_t max_request_bytes = 16 * 1024 * 1024;
  // Optional: builds the answer to a request that cannot be parsed; the
  // connection closes after it. `too_large` is true when the body (or the
  // header block) exceeds its limit. The callee sets *status (default 400),
  // may add headers and sets *body. Unset: 400 text/plain for every parse
  // error. Runs on the loop thread.
  std::function<void(bool too_large, std::string_view detail, int* status,
                     std::vector<Header>* headers, std::string* body)>
      on_parse_error;
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t requests = 0;
  int64_t connections_open = 0;
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

// Client: an asynchronous HTTP/1.1 client (plain TCP or TLS) that runs on one
// EventLoop and keeps a pool of keep-alive connections per origin.
//
// Built for measurement: every callback carries the NowNs() time taken when
// the event happened (first request byte written, read completed), and
// response bodies are delivered piece by piece as they arrive, so a streamed
// (SSE) response can be timed chunk by chunk. Many thousands of requests can
// be in flight at once; each holds one connection.
//
// Threading: construct, use and destroy the Client on the loop thread (or
// before the loop runs). Handlers are called on the loop thread.
//
// Ownership: the Client does not own ResponseHandlers; a handler must stay
// alive until its OnComplete() has been called (exactly once per Send()).
// Destroying the Client closes all connections; requests still in flight
// then complete with TransportError::kCancelled while the loop drains.
#ifndef REDLINE_HTTP_CLIENT_H_
#define REDLINE_HTTP_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/event_loop.h"
#include "http/url.h"

namespace redline::http {

struct Header {
  std::string name;
  std::string value;
};

struct ClientOptions {
  // TCP connect plus TLS handshake limit for one new connection.
  int64_t connect_timeout_ms = 10'000;
  // Per-origin connection cap; 0 means unlimited. Requests beyond the cap
  // wait (FIFO) for a connection to come back to the pool.
  int max_connections_per_origin = 0;
  // TLS: verify the server certificate and host name against the system CA
  // store (or tls_ca_file when set). Turn off only for self-signed targets.
  bool tls_verify = true;
  std::string tls_ca_file;
  // Size of each connection's read buffer (one per connection).
  size_t read_buffer_bytes = 16 * 1024;
  // When true, OnHeaders receives every response header; otherwise only the
  // fields in ResponseHead that are always filled.
  bool capture_headers = false;
  // With capture_headers: when non-empty, only headers with these names
  // (case-insensitive) are kept, so a caller that wants one header does not
  // pay for copying all of them.
  std::vector<std::string> capture_only;
};

struct ClientRequest {
  std::string method = "POST";
  std::string target = "/";  // path and query
  std::vector<Header>
      headers;  // sent as given; Host and Content-Length are added
  std::string body;
  // Limits; 0 disables. The total limit runs from the moment the request gets
  // a connection (connect and handshake included) to the last body byte.
  // The idle limit is the longest silence (no byte received) allowed while
  // waiting for the response or between body pieces. One sweep timer checks
  // every request's deadlines, so a limit fires up to 5 ms after it passes.
  int64_t total_timeout_ms = 0;
  int64_t idle_timeout_ms = 0;
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  std::string content_type;
  std::optional<uint64_t> content_length;
  bool chunked = false;
  std::vector<Header> headers;  // only with ClientOptions::capture_headers
};

// Why a request ended. kNone means a complete response was received.
enum class TransportError {
  kNone,
  kConnect,       // DNS, TCP, TLS or connect timeout
  kWrite,         // reset or closed before the request was fully written
  kTimeoutTotal,  // ClientRequest::total_timeout_ms expired
  kTimeoutIdle,   // ClientRequest::idle_timeout_ms of silence
  kClosedBeforeResponse,  // request written, connection closed before any
                          // response byte
  kClosedMidResponse,     // connection closed (or reset) while the response was
                          // incomplete
  kProtocol,              // malformed HTTP
  kCancelled,             // Client destroyed or Cancel()
};

std::string_view TransportErrorName(TransportError error);

struct TransportResult {
  TransportError error = TransportError::kNone;
  std::string detail;  // OS / TLS / parser message, empty on success
  bool connection_reused = false;
  bool head_received = false;  // OnHeaders was called
};

// Receives the events of one request, in this order: OnSent, OnHeaders,
// OnBody* (zero or more), OnComplete. OnSent/OnHeaders/OnBody may be skipped
// when the request fails before reaching them; OnComplete always comes last.
class ResponseHandler {
 public:
  virtual ~ResponseHandler() = default;
  // The first request byte is about to be written (t_send).
  virtual void OnSent(int64_t t_ns) {}
  virtual void OnHeaders(const ResponseHead& head, int64_t t_ns) {}
  // A piece of the decoded body (chunked framing removed). `t_ns` is when
  // the read that delivered it completed.
  virtual void OnBody(std::string_view data, int64_t t_ns) {}
  virtual void OnComplete(const TransportResult& result, int64_t t_ns) = 0;
};

struct ClientStats {
  uint64_t connections_opened = 0;
  uint64_t connections_reused = 0;
  int64_t connections_open = 0;    // now
  int64_t requests_in_flight = 0;  // now
  int64_t requests_waiting = 0;    // waiting for a connection (cap reached)
};

class Client {
 public:
  Client(EventLoop& loop, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Starts a request. Never blocks and never calls the handler re-entrantly
  // from inside Send(): even an immediate failure is reported from the loop.
  void Send(const Origin& origin, ClientRequest request,
            ResponseHandler* handler);

  // Closes idle pooled connections (in-flight ones are untouched).
  void CloseIdle();

  ClientStats stats() const;

  // Implementation (defined in the .cc file only).
  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Builds the HTTP/1.1 request bytes Client sends (exposed for tests).
std::string SerializeRequest(const Origin& origin,
                             const ClientRequest& request);

}  // namespace redline::http

#endif  // REDLINE_HTTP_CLIENT_H_

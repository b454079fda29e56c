// UpstreamTransport: requests to one upstream origin over keep-alive
// connections, each of which can be cancelled at once.
//
// Why not one shared http::Client: the client has no per-request cancel
// (only its destructor stops requests), and a gateway must drop an upstream
// request the moment its client disconnects or a hedge loses. So each
// connection is a "lane": an http::Client limited to one connection, used
// for one call at a time and kept (with its pooled keep-alive connection)
// for the next call. Cancelling a call destroys its lane, which closes the
// connection; the upstream sees the close (redline serve then cancels the
// generation within one engine step).
//
// Threading: construct, use and destroy on the loop thread. Sinks are
// called on the loop thread, never from inside Start() or Cancel().
//
// Ownership: the transport owns its lanes; a sink must stay alive until its
// OnCallComplete, or until Cancel() for its call returned (after which it is
// never called).
//
// Bounds: at most `max_idle_lanes` idle lanes are kept; busy lanes are
// bounded by the caller (the pool's max_in_flight). Cost per lane: one
// socket, a 16 KiB read buffer, and while busy, the client's deadline
// sweep (armed for the call's earliest limit, not periodic).
#ifndef REDLINE_GATEWAY_UPSTREAM_TRANSPORT_H_
#define REDLINE_GATEWAY_UPSTREAM_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "http/client.h"
#include "http/event_loop.h"
#include "http/url.h"

namespace redline::gateway {

// The events of one call (http::ResponseHandler's, minus OnSent).
class CallSink {
 public:
  virtual ~CallSink() = default;
  virtual void OnCallHeaders(const http::ResponseHead& head, int64_t t_ns) = 0;
  virtual void OnCallBody(std::string_view data, int64_t t_ns) = 0;
  virtual void OnCallComplete(const http::TransportResult& result,
                              int64_t t_ns) = 0;
};

class UpstreamTransport {
 public:
  using CallId = uint64_t;

  UpstreamTransport(http::EventLoop& loop, http::Origin origin,
                    int64_t connect_timeout_ms, size_t max_idle_lanes);
  // Cancels every call in progress (their sinks are not called).
  ~UpstreamTransport();
  UpstreamTransport(const UpstreamTransport&) = delete;
  UpstreamTransport& operator=(const UpstreamTransport&) = delete;

  // Starts a call; `sink` receives its events. Never fails synchronously.
  CallId Start(http::ClientRequest request, CallSink* sink);
  // Stops the call: its sink is not called again and its connection is
  // closed (from the loop, right after). Unknown or finished ids are
  // ignored.
  void Cancel(CallId id);

  size_t busy() const { return busy_.size(); }
  size_t idle() const { return idle_.size(); }
  const http::Origin& origin() const { return origin_; }

 private:
  struct Lane;
  // Takes a finished lane out of the busy set.
  std::unique_ptr<Lane> Finished(Lane* lane);
  // Keeps a finished lane for the next call, or drops it over the bound.
  void Park(std::unique_ptr<Lane> lane);

  http::EventLoop& loop_;
  http::Origin origin_;
  http::ClientOptions options_;
  size_t max_idle_lanes_;
  CallId next_id_ = 1;
  std::unordered_map<CallId, std::unique_ptr<Lane>> busy_;
  std::vector<std::unique_ptr<Lane>> idle_;  // LIFO: the warmest on top
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_UPSTREAM_TRANSPORT_H_

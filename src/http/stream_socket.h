// StreamSocket: a plain byte stream (TCP or a Unix-domain socket) on an
// EventLoop, for protocols other than HTTP that should run on the loop
// instead of on a thread of their own (the gateway's Redis tier: a worker
// thread would cost two thread hand-offs per command).
//
// Use: Connect*(), then Write() bytes and receive what arrives through the
// data callback; the closed callback runs once when the peer closes or an
// I/O error happens. Close() (or destruction) stops everything: no callback
// runs after it, and none ever runs from inside a call on this object.
//
// Threading: loop thread only (callbacks on the loop thread).
// Bounds and cost: one 16 KiB read buffer; written bytes wait in one
// pending buffer while a write is in the socket (the caller bounds what it
// writes). TCP connections get TCP_NODELAY. The caller times out a connect
// (a Timer and Close()); name resolution uses the system resolver.
#ifndef REDLINE_HTTP_STREAM_SOCKET_H_
#define REDLINE_HTTP_STREAM_SOCKET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/event_loop.h"

namespace redline::http {

class StreamSocket {
 public:
  // `error` is empty on success.
  using ConnectFn = std::function<void(const std::string& error)>;
  using DataFn = std::function<void(std::string_view data)>;
  using ClosedFn = std::function<void(const std::string& error)>;

  explicit StreamSocket(EventLoop& loop);
  ~StreamSocket();
  StreamSocket(const StreamSocket&) = delete;
  StreamSocket& operator=(const StreamSocket&) = delete;

  // Connects once; reading starts after success. `on_data` and `on_closed`
  // are kept for the connection's life.
  void ConnectTcp(const std::string& host, uint16_t port, ConnectFn done,
                  DataFn on_data, ClosedFn on_closed);
  void ConnectUnix(const std::string& path, ConnectFn done, DataFn on_data,
                   ClosedFn on_closed);

  // Queues bytes; they go out as soon as the socket takes them. Ignored
  // before the connect succeeded or after a close.
  void Write(std::string_view bytes);
  void Close();
  bool connected() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace redline::http

#endif  // REDLINE_HTTP_STREAM_SOCKET_H_

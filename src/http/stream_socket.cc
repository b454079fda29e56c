// StreamSocket on Asio: a TCP or Unix-domain socket, one read always
// pending while connected, writes coalesced behind the one in the socket.
// Every handler holds the shared state and the generation it was started
// in; Close() bumps the generation, so late completions do nothing.
#include "http/stream_socket.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <vector>

#include "http/event_loop_impl.h"

namespace redline::http {

namespace asio = boost::asio;
using tcp = boost::asio::ip::tcp;
using unix_stream = boost::asio::local::stream_protocol;
using boost::system::error_code;

namespace {
constexpr size_t kReadBytes = 16 * 1024;
}  // namespace

struct StreamSocket::State : std::enable_shared_from_this<State> {
  explicit State(asio::io_context& c) : io(c), resolver(c) {}

  template <typename F>
  void WithStream(F&& f) {
    if (tcp_sock) {
      f(*tcp_sock);
    } else if (unix_sock) {
      f(*unix_sock);
    }
  }

  void Connected(uint64_t gen) {
    if (gen != generation) return;
    connected = true;
    ConnectFn fn = std::move(on_connect);
    on_connect = nullptr;
    Read();
    fn("");
  }

  void ConnectFailed(uint64_t gen, const std::string& error) {
    if (gen != generation) return;
    ConnectFn fn = std::move(on_connect);
    Shut();
    if (fn) fn(error);
  }

  void Read() {
    const uint64_t gen = generation;
    WithStream([&](auto& s) {
      s.async_read_some(
          asio::buffer(rbuf.data(), rbuf.size()),
          [self = shared_from_this(), gen](const error_code& ec, size_t n) {
            if (gen != self->generation) return;
            if (ec) {
              self->Broken(ec == asio::error::eof ? "closed by peer"
                                                  : ec.message());
              return;
            }
            // The callback may close or write; it cannot destroy the state
            // (held here).
            self->on_data(std::string_view(self->rbuf.data(), n));
            if (gen == self->generation) self->Read();
          });
    });
  }

  void StartWrite() {
    writing = true;
    inflight.swap(pending);
    pending.clear();
    const uint64_t gen = generation;
    WithStream([&](auto& s) {
      asio::async_write(
          s, asio::buffer(inflight),
          [self = shared_from_this(), gen](const error_code& ec, size_t) {
            if (gen != self->generation) return;
            self->writing = false;
            self->inflight.clear();
            if (ec) {
              self->Broken(ec.message());
              return;
            }
            if (!self->pending.empty()) self->StartWrite();
          });
    });
  }

  void Broken(const std::string& error) {
    ClosedFn fn = std::move(on_closed);
    Shut();
    if (fn) fn(error);
  }

  // Closes the socket; nothing pending runs any more.
  void Shut() {
    ++generation;
    connected = false;
    writing = false;
    on_connect = nullptr;
    on_data = nullptr;
    on_closed = nullptr;
    resolver.cancel();
    // Destroying a socket cancels its operations (their handlers see the
    // old generation); the buffers they point into live as long as this
    // state, which every handler holds.
    tcp_sock.reset();
    unix_sock.reset();
    pending.clear();
    inflight.clear();
  }

  asio::io_context& io;
  tcp::resolver resolver;
  std::optional<tcp::socket> tcp_sock;
  std::optional<unix_stream::socket> unix_sock;
  uint64_t generation = 0;
  bool connected = false;
  bool writing = false;
  std::string pending;
  std::string inflight;
  std::vector<char> rbuf = std::vector<char>(kReadBytes);
  ConnectFn on_connect;
  DataFn on_data;
  ClosedFn on_closed;
};

StreamSocket::StreamSocket(EventLoop& loop)
    : state_(std::make_shared<State>(loop.impl()->io)) {}

StreamSocket::~StreamSocket() { state_->Shut(); }

void StreamSocket::ConnectTcp(const std::string& host, uint16_t port,
                              ConnectFn done, DataFn on_data,
                              ClosedFn on_closed) {
  State& s = *state_;
  s.Shut();
  s.on_connect = std::move(done);
  s.on_data = std::move(on_data);
  s.on_closed = std::move(on_closed);
  s.tcp_sock.emplace(s.io);
  const uint64_t gen = s.generation;
  s.resolver.async_resolve(
      host, std::to_string(port),
      [self = state_, gen](const error_code& ec,
                           tcp::resolver::results_type results) {
        if (gen != self->generation) return;
        if (ec) {
          self->ConnectFailed(gen, "resolve: " + ec.message());
          return;
        }
        asio::async_connect(
            *self->tcp_sock, results,
            [self, gen](const error_code& ec2, const tcp::endpoint&) {
              if (gen != self->generation) return;
              if (ec2) {
                self->ConnectFailed(gen, "connect: " + ec2.message());
                return;
              }
              error_code ignored;
              self->tcp_sock->set_option(tcp::no_delay(true), ignored);
              self->Connected(gen);
            });
      });
}

void StreamSocket::ConnectUnix(const std::string& path, ConnectFn done,
                               DataFn on_data, ClosedFn on_closed) {
  State& s = *state_;
  s.Shut();
  s.on_connect = std::move(done);
  s.on_data = std::move(on_data);
  s.on_closed = std::move(on_closed);
  s.unix_sock.emplace(s.io);
  const uint64_t gen = s.generation;
  s.unix_sock->async_connect(
      unix_stream::endpoint(path), [self = state_, gen](const error_code& ec) {
        if (gen != self->generation) return;
        if (ec) {
          self->ConnectFailed(gen, "connect: " + ec.message());
          return;
        }
        self->Connected(gen);
      });
}

void StreamSocket::Write(std::string_view bytes) {
  State& s = *state_;
  if (!s.connected || bytes.empty()) return;
  s.pending.append(bytes.data(), bytes.size());
  if (!s.writing) s.StartWrite();
}

void StreamSocket::Close() { state_->Shut(); }

bool StreamSocket::connected() const { return state_->connected; }

}  // namespace redline::http

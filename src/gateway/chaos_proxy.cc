#include "gateway/chaos_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <list>
#include <random>

#include "base/logging.h"

namespace redline::gateway {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr size_t kReadBytes = 16 * 1024;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Closes with an RST instead of a FIN: what a crashed peer or a middlebox
// dropping state looks like.
void ResetClose(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

// Bytes of one direction waiting to be written, each piece with the time it
// may leave (latency), in order.
struct Pipe {
  struct Piece {
    std::string bytes;
    size_t offset = 0;
    int64_t release_ns = 0;
  };
  std::deque<Piece> q;
  size_t queued = 0;
  uint64_t forwarded = 0;
  int64_t last_release_ns = 0;
  double tokens = 0;  // bandwidth bucket (bytes)
  int64_t tokens_at_ns = 0;
  bool eof = false;   // the reading side closed
  bool shut = false;  // the write side was shut down after eof

  bool Due(int64_t now) const {
    return !q.empty() && q.front().release_ns <= now;
  }
};

struct Conn {
  int client = -1;
  int server = -1;
  bool connecting = true;
  bool blackholed = false;
  short client_events = 0;  // revents of the last poll
  short server_events = 0;
  Pipe up;    // client -> server
  Pipe down;  // server -> client
};

}  // namespace

struct ChaosProxy::Loop {
  explicit Loop(const ChaosOptions& o) : options(o), rng(o.seed) {}

  // --- shared with other threads (mu) ---
  mutable std::mutex mu;
  Faults pending;        // guarded by mu
  uint64_t version = 0;  // guarded by mu
  Faults current;        // guarded by mu: what the loop applies now
  ChaosStats stats;      // guarded by mu
  std::atomic<bool> stop{false};
  int wake[2] = {-1, -1};

  // --- loop thread ---
  ChaosOptions options;
  sockaddr_storage target{};
  socklen_t target_len = 0;
  sockaddr_in listen_addr{};
  int listener = -1;
  Faults faults;
  uint64_t seen_version = 0;
  std::list<Conn> conns;
  std::mt19937_64 rng;
  int64_t start_ns = 0;
  size_t next_step = 0;

  Status Listen() {
    listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (listener < 0) return Status::IoError("chaos: socket failed");
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, reinterpret_cast<sockaddr*>(&listen_addr),
             sizeof(listen_addr)) != 0 ||
        listen(listener, 1024) != 0) {
      const std::string err = std::strerror(errno);
      close(listener);
      listener = -1;
      return Status::IoError("chaos: cannot listen: " + err);
    }
    socklen_t len = sizeof(listen_addr);
    getsockname(listener, reinterpret_cast<sockaddr*>(&listen_addr), &len);
    return Status::Ok();
  }

  void Wake() {
    const char c = 1;
    [[maybe_unused]] ssize_t n = write(wake[1], &c, 1);
  }

  std::list<Conn>::iterator CloseConn(std::list<Conn>::iterator it,
                                      bool reset) {
    if (reset) {
      ResetClose(it->client);
      ResetClose(it->server);
    } else {
      if (it->client >= 0) close(it->client);
      if (it->server >= 0) close(it->server);
    }
    std::lock_guard<std::mutex> lock(mu);
    stats.open--;
    if (reset) stats.resets++;
    return conns.erase(it);
  }

  void Apply(const Faults& f) {
    const bool refuse_changed = f.refuse != faults.refuse;
    const bool blackhole_ended = faults.blackhole && !f.blackhole;
    faults = f;
    {
      std::lock_guard<std::mutex> lock(mu);
      current = f;
    }
    if (faults.reset) {
      while (!conns.empty()) CloseConn(conns.begin(), true);
    }
    if (blackhole_ended) {
      // Connections accepted into the hole were never connected onwards.
      for (auto it = conns.begin(); it != conns.end();)
        it = it->blackholed ? CloseConn(it, true) : std::next(it);
    }
    if (refuse_changed) {
      if (faults.refuse && listener >= 0) {
        close(listener);
        listener = -1;
      } else if (!faults.refuse && listener < 0) {
        if (Status s = Listen(); !s.ok()) RL_LOG(kWarning, "{}", s.message());
      }
    }
    RL_LOG(kInfo, "chaos: faults now {}", DescribeFaults(faults));
  }

  void Accept() {
    for (;;) {
      const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
      if (fd < 0) return;
      {
        std::lock_guard<std::mutex> lock(mu);
        stats.connections++;
      }
      if (faults.reset || conns.size() >= options.max_connections) {
        ResetClose(fd);
        std::lock_guard<std::mutex> lock(mu);
        stats.resets++;
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Conn c;
      c.client = fd;
      c.blackholed = faults.blackhole;
      if (!c.blackholed) {
        c.server = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
        setsockopt(c.server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        const int r =
            connect(c.server, reinterpret_cast<sockaddr*>(&target), target_len);
        if (r != 0 && errno != EINPROGRESS) {
          ResetClose(c.server);
          ResetClose(c.client);
          continue;
        }
        c.connecting = r != 0;
      }
      conns.push_back(std::move(c));
      std::lock_guard<std::mutex> lock(mu);
      stats.open++;
    }
  }

  // Reads what `from` has into `pipe`, each piece released after `delay_ms`
  // (+ jitter). Returns false when the connection must close.
  bool ReadInto(int from, Pipe& pipe, int64_t delay_ms, int64_t now) {
    char buf[kReadBytes];
    while (pipe.queued < options.max_buffered_bytes) {
      const ssize_t n = recv(from, buf, sizeof(buf), 0);
      if (n == 0) {
        pipe.eof = true;
        return true;
      }
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      int64_t release = now + delay_ms * kNsPerMs;
      if (faults.jitter_ms > 0) {
        std::uniform_int_distribution<int64_t> j(0,
                                                 faults.jitter_ms * kNsPerMs);
        release += j(rng);
      }
      release = std::max(release, pipe.last_release_ns);
      pipe.last_release_ns = release;
      pipe.q.push_back({std::string(buf, static_cast<size_t>(n)), 0, release});
      pipe.queued += static_cast<size_t>(n);
    }
    return true;
  }

  // Writes the due bytes of `pipe` to `to`, within the bandwidth (down
  // only). Returns false when the connection must close; *reset set when it
  // must close with an RST (drop-after).
  bool WriteFrom(Pipe& pipe, int to, bool down, int64_t now, bool* reset) {
    while (pipe.Due(now)) {
      Pipe::Piece& p = pipe.q.front();
      size_t want = p.bytes.size() - p.offset;
      if (down && faults.bandwidth_bytes_per_s > 0) {
        const double rate = static_cast<double>(faults.bandwidth_bytes_per_s);
        const double cap = std::max(rate / 20, 1024.0);
        if (pipe.tokens_at_ns == 0) {
          pipe.tokens = cap;
        } else {
          pipe.tokens = std::min(
              cap,
              pipe.tokens +
                  rate * static_cast<double>(now - pipe.tokens_at_ns) / 1e9);
        }
        pipe.tokens_at_ns = now;
        if (pipe.tokens < 1) return true;
        want = std::min(want, static_cast<size_t>(pipe.tokens));
      }
      if (down && faults.drop_after_bytes >= 0) {
        const uint64_t left =
            pipe.forwarded >= static_cast<uint64_t>(faults.drop_after_bytes)
                ? 0
                : static_cast<uint64_t>(faults.drop_after_bytes) -
                      pipe.forwarded;
        if (left == 0) {
          *reset = true;
          return false;
        }
        want = std::min<size_t>(want, left);
      }
      const ssize_t n = send(to, p.bytes.data() + p.offset, want, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      p.offset += static_cast<size_t>(n);
      pipe.queued -= static_cast<size_t>(n);
      pipe.forwarded += static_cast<uint64_t>(n);
      if (down && faults.bandwidth_bytes_per_s > 0)
        pipe.tokens -= static_cast<double>(n);
      {
        std::lock_guard<std::mutex> lock(mu);
        (down ? stats.bytes_down : stats.bytes_up) += static_cast<uint64_t>(n);
      }
      if (p.offset == p.bytes.size()) pipe.q.pop_front();
      if (static_cast<size_t>(n) < want) return true;  // socket full
    }
    if (pipe.eof && pipe.q.empty() && !pipe.shut) {
      shutdown(to, SHUT_WR);
      pipe.shut = true;
    }
    return true;
  }

  void Run() {
    start_ns = Now();
    std::vector<pollfd> fds;
    std::vector<std::list<Conn>::iterator> owners;
    while (!stop.load()) {
      int64_t now = Now();
      // Faults: from other threads, then the schedule.
      {
        std::unique_lock<std::mutex> lock(mu);
        if (version != seen_version) {
          seen_version = version;
          const Faults f = pending;
          lock.unlock();
          Apply(f);
        }
      }
      while (next_step < options.schedule.size() &&
             now - start_ns >= options.schedule[next_step].at_ms * kNsPerMs) {
        Apply(options.schedule[next_step++].faults);
      }
      fds.clear();
      owners.clear();
      fds.push_back({wake[0], POLLIN, 0});
      owners.push_back(conns.end());
      if (listener >= 0) {
        fds.push_back({listener, POLLIN, 0});
        owners.push_back(conns.end());
      }
      int64_t next_ns = now + 100 * kNsPerMs;
      if (next_step < options.schedule.size())
        next_ns = std::min(
            next_ns, start_ns + options.schedule[next_step].at_ms * kNsPerMs);
      for (auto it = conns.begin(); it != conns.end(); ++it) {
        Conn& c = *it;
        if (c.blackholed || faults.blackhole) continue;  // never served
        short ce = 0, se = 0;
        if (!c.up.eof && c.up.queued < options.max_buffered_bytes) ce |= POLLIN;
        if (c.connecting) {
          se |= POLLOUT;
        } else {
          if (!c.down.eof && c.down.queued < options.max_buffered_bytes)
            se |= POLLIN;
          if (c.up.Due(now)) se |= POLLOUT;
        }
        if (c.down.Due(now)) ce |= POLLOUT;
        for (Pipe* p : {&c.up, &c.down}) {
          if (!p->q.empty() && p->q.front().release_ns > now)
            next_ns = std::min(next_ns, p->q.front().release_ns);
        }
        if (faults.bandwidth_bytes_per_s > 0 && !c.down.q.empty())
          next_ns = std::min(next_ns, now + 5 * kNsPerMs);
        fds.push_back({c.client, ce, 0});
        owners.push_back(it);
        if (c.server >= 0) {
          fds.push_back({c.server, se, 0});
          owners.push_back(it);
        }
      }
      const int timeout_ms = static_cast<int>(
          std::max<int64_t>((next_ns - now + kNsPerMs - 1) / kNsPerMs, 0));
      const int ready = poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) break;
      now = Now();
      if (fds[0].revents & POLLIN) {
        char drain[64];
        while (read(wake[0], drain, sizeof(drain)) > 0) {
        }
      }
      if (listener >= 0 && fds.size() > 1 && fds[1].fd == listener &&
          (fds[1].revents & POLLIN))
        Accept();
      for (size_t i = 0; i < fds.size(); ++i) {
        if (owners[i] == conns.end()) continue;
        Conn& c = *owners[i];
        (fds[i].fd == c.client ? c.client_events : c.server_events) =
            fds[i].revents;
      }
      for (auto it = conns.begin(); it != conns.end();) {
        Conn& c = *it;
        if (c.blackholed || faults.blackhole) {
          ++it;
          continue;
        }
        const short ce = c.client_events, se = c.server_events;
        c.client_events = c.server_events = 0;
        bool ok = true, reset = false;
        if (c.connecting) {
          if (se & (POLLOUT | POLLERR | POLLHUP)) {
            int err = 0;
            socklen_t len = sizeof(err);
            getsockopt(c.server, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
              ok = false;
              reset = true;
            } else {
              c.connecting = false;
            }
          }
          if (ok && (ce & POLLIN))
            ok = ReadInto(c.client, c.up, faults.latency_up_ms, now);
        } else if ((ce | se) & POLLERR) {
          ok = false;
          reset = true;
        } else {
          if (ce & (POLLIN | POLLHUP))
            ok = ReadInto(c.client, c.up, faults.latency_up_ms, now);
          if (ok && (se & (POLLIN | POLLHUP)))
            ok = ReadInto(c.server, c.down, faults.latency_down_ms, now);
          reset = !ok;
        }
        if (ok && !c.connecting) {
          ok = WriteFrom(c.up, c.server, false, now, &reset) &&
               WriteFrom(c.down, c.client, true, now, &reset);
          if (!ok) reset = true;
        }
        if (!ok) {
          it = CloseConn(it, reset);
        } else if (c.up.shut && c.down.shut) {
          it = CloseConn(it, false);
        } else {
          ++it;
        }
      }
    }
    while (!conns.empty()) CloseConn(conns.begin(), false);
    if (listener >= 0) close(listener);
  }
};

ChaosProxy::ChaosProxy(ChaosOptions options) : options_(std::move(options)) {}

ChaosProxy::~ChaosProxy() { Stop(); }

Result<uint16_t> ChaosProxy::Start() {
  loop_ = std::make_unique<Loop>(options_);
  Loop& l = *loop_;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options_.target_port);
  if (getaddrinfo(options_.target_host.c_str(), port.c_str(), &hints, &res) !=
          0 ||
      res == nullptr)
    return Status::InvalidArgument("chaos: cannot resolve target " +
                                   options_.target_host);
  std::memcpy(&l.target, res->ai_addr, res->ai_addrlen);
  l.target_len = res->ai_addrlen;
  freeaddrinfo(res);
  l.listen_addr.sin_family = AF_INET;
  l.listen_addr.sin_port = htons(options_.listen_port);
  const std::string host =
      options_.listen_host == "localhost" ? "127.0.0.1" : options_.listen_host;
  if (inet_pton(AF_INET, host.c_str(), &l.listen_addr.sin_addr) != 1)
    return Status::InvalidArgument(
        "chaos: --listen needs an IPv4 address, got " + options_.listen_host);
  RL_RETURN_IF_ERROR(l.Listen());
  port_ = ntohs(l.listen_addr.sin_port);
  if (pipe2(l.wake, O_NONBLOCK | O_CLOEXEC) != 0)
    return Status::IoError("chaos: pipe failed");
  thread_ = std::thread([&l] { l.Run(); });
  return port_;
}

void ChaosProxy::Stop() {
  if (!thread_.joinable()) return;
  loop_->stop = true;
  loop_->Wake();
  thread_.join();
  close(loop_->wake[0]);
  close(loop_->wake[1]);
}

void ChaosProxy::SetFaults(const Faults& faults) {
  if (!loop_) return;
  {
    std::lock_guard<std::mutex> lock(loop_->mu);
    loop_->pending = faults;
    loop_->version++;
  }
  loop_->Wake();
}

Faults ChaosProxy::faults() const {
  if (!loop_) return {};
  std::lock_guard<std::mutex> lock(loop_->mu);
  return loop_->current;
}

ChaosStats ChaosProxy::stats() const {
  if (!loop_) return {};
  std::lock_guard<std::mutex> lock(loop_->mu);
  return loop_->stats;
}

}  // namespace redline::gateway

// Client and Server against each other on loopback (port 0), one loop thread.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "http/client.h"
#include "http/event_loop.h"
#include "http/server.h"
#include "http/testing/tls_test_cert.h"

namespace redline::http {
namespace {

constexpr int64_t kMs = 1'000'000;

struct Recorder : ResponseHandler {
  explicit Recorder(EventLoop* l, int* remaining) : loop(l), left(remaining) {}
  void OnSent(int64_t t) override { t_sent = t; }
  void OnHeaders(const ResponseHead& h, int64_t t) override {
    head = h;
    t_head = t;
  }
  void OnBody(std::string_view d, int64_t t) override {
    body.append(d);
    pieces.push_back(std::string(d));
    piece_times.push_back(t);
  }
  void OnComplete(const TransportResult& r, int64_t t) override {
    result = r;
    t_done = t;
    done = true;
    if (--*left == 0) loop->Stop();
  }
  EventLoop* loop;
  int* left;
  int64_t t_sent = 0, t_head = 0, t_done = 0;
  ResponseHead head;
  std::string body;
  std::vector<std::string> pieces;
  std::vector<int64_t> piece_times;
  TransportResult result;
  bool done = false;
};

// Routes: /hello (200 text), /stream?n=N&gap=MS (chunks "c0".."cN-1"),
// /abort-before, /abort-mid, /slow (never answers), /status/NNN.
class TestServer {
 public:
  explicit TestServer(EventLoop& loop, ServerOptions opts = {})
      : loop_(loop),
        server_(loop, std::move(opts),
                [this](ServerRequest&& r, std::shared_ptr<ResponseWriter> w) {
                  Handle(std::move(r), std::move(w));
                }) {}
  uint16_t Start() {
    auto port = server_.Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    return port.ok() ? *port : 0;
  }
  Server& server() { return server_; }

 private:
  void Handle(ServerRequest&& r, std::shared_ptr<ResponseWriter> w) {
    std::string_view path = r.Path();
    if (path == "/hello") {
      w->Respond(200, {{"Content-Type", "text/plain"}}, "hello " + r.body);
    } else if (path == "/stream") {
      int n = 3;
      int64_t gap_ms = 20;
      std::string_view q = r.target;
      if (auto p = q.find("n="); p != std::string_view::npos)
        n = std::atoi(std::string(q.substr(p + 2)).c_str());
      if (auto p = q.find("gap="); p != std::string_view::npos)
        gap_ms = std::atoi(std::string(q.substr(p + 4)).c_str());
      w->BeginStream(200, {{"Content-Type", "text/event-stream"}});
      // The server owns timers and steps; callbacks hold raw pointers, so
      // nothing keeps itself alive in a cycle.
      timers_.push_back(std::make_unique<Timer>(loop_));
      steps_.push_back(std::make_unique<std::function<void(int)>>());
      Timer* timer = timers_.back().get();
      std::function<void(int)>* step = steps_.back().get();
      *step = [=](int i) {
        if (i == n) {
          w->End();
          return;
        }
        w->Write("c" + std::to_string(i));
        timer->ExpireAfter(gap_ms * kMs, [step, i] { (*step)(i + 1); });
      };
      timer->ExpireAfter(gap_ms * kMs, [step] { (*step)(0); });
    } else if (path == "/abort-before") {
      w->Abort();
    } else if (path == "/abort-mid") {
      w->BeginStream(200, {{"Content-Type", "text/event-stream"}});
      w->Write("partial");
      w->Abort();
    } else if (path == "/slow") {
      held_.push_back(w);
    } else if (path.substr(0, 8) == "/status/") {
      w->Respond(std::atoi(std::string(path.substr(8)).c_str()), {},
                 "status body");
    } else {
      w->Respond(404, {}, "no route");
    }
  }

  EventLoop& loop_;
  Server server_;
  std::vector<std::unique_ptr<Timer>> timers_;
  std::vector<std::unique_ptr<std::function<void(int)>>> steps_;
  std::vector<std::shared_ptr<ResponseWriter>> held_;
};

Origin Local(uint16_t port, bool tls = false) {
  Origin o;
  o.host = "127.0.0.1";
  o.port = port;
  o.tls = tls;
  return o;
}

ClientRequest Req(std::string target, std::string body = "") {
  ClientRequest r;
  r.target = std::move(target);
  r.body = std::move(body);
  r.total_timeout_ms = 5000;
  return r;
}

TEST(ClientServerTest, RequestResponseAndKeepAliveReuse) {
  EventLoop loop;
  TestServer ts(loop);
  uint16_t port = ts.Start();
  Client client(loop, {});
  int left = 1;
  Recorder a(&loop, &left);
  client.Send(Local(port), Req("/hello", "bob"), &a);
  loop.RunFor(5000 * kMs);
  ASSERT_TRUE(a.done);
  EXPECT_EQ(a.result.error, TransportError::kNone) << a.result.detail;
  EXPECT_EQ(a.head.status, 200);
  EXPECT_EQ(a.head.content_type, "text/plain");
  EXPECT_EQ(a.body, "hello bob");
  EXPECT_FALSE(a.result.connection_reused);
  EXPECT_GT(a.t_sent, 0);
  EXPECT_GE(a.t_done, a.t_sent);

  loop.Restart();
  left = 1;
  Recorder b(&loop, &left);
  client.Send(Local(port), Req("/hello", "eve"), &b);
  loop.RunFor(5000 * kMs);
  ASSERT_TRUE(b.done);
  EXPECT_EQ(b.body, "hello eve");
  EXPECT_TRUE(b.result.connection_reused);
  EXPECT_EQ(client.stats().connections_opened, 1u);
}

TEST(ClientServerTest, StreamsPiecesAsTheyArrive) {
  EventLoop loop;
  TestServer ts(loop);
  uint16_t port = ts.Start();
  Client client(loop, {});
  int left = 1;
  Recorder r(&loop, &left);
  client.Send(Local(port), Req("/stream?n=4&gap=25"), &r);
  loop.RunFor(5000 * kMs);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.result.error, TransportError::kNone) << r.result.detail;
  EXPECT_EQ(r.body, "c0c1c2c3");
  // Each chunk is flushed on its own, so pieces arrive spread over time. (On
  // a loaded machine two chunks may share one read; the span still shows.)
  ASSERT_GE(r.pieces.size(), 2u);
  const double span_ms =
      static_cast<double>(r.piece_times.back() - r.piece_times.front()) / kMs;
  EXPECT_GE(span_ms, 50.0);
  EXPECT_GE(r.piece_times.front() - r.t_sent, 20 * kMs);
}

TEST(ClientServerTest, ClassifiesTransportFailures) {
  EventLoop loop;
  TestServer ts(loop);
  uint16_t port = ts.Start();
  Client client(loop, {});
  int left = 5;
  Recorder before(&loop, &left), mid(&loop, &left), idle(&loop, &left),
      total(&loop, &left), status(&loop, &left);
  client.Send(Local(port), Req("/abort-before"), &before);
  client.Send(Local(port), Req("/abort-mid"), &mid);
  ClientRequest slow = Req("/slow");
  slow.idle_timeout_ms = 50;
  client.Send(Local(port), slow, &idle);
  ClientRequest slow2 = Req("/stream?n=100&gap=20");
  slow2.total_timeout_ms = 100;
  slow2.idle_timeout_ms = 60;  // chunks every 20 ms keep the idle timer quiet
  client.Send(Local(port), slow2, &total);
  client.Send(Local(port), Req("/status/503"), &status);
  loop.RunFor(5000 * kMs);
  EXPECT_EQ(before.result.error, TransportError::kClosedBeforeResponse);
  EXPECT_EQ(mid.result.error, TransportError::kClosedMidResponse);
  EXPECT_TRUE(mid.result.head_received);
  EXPECT_EQ(idle.result.error, TransportError::kTimeoutIdle);
  EXPECT_EQ(total.result.error, TransportError::kTimeoutTotal);
  EXPECT_FALSE(total.pieces.empty());
  EXPECT_EQ(status.result.error, TransportError::kNone);
  EXPECT_EQ(status.head.status, 503);
}

TEST(ClientServerTest, ConnectionRefusedIsConnectError) {
  EventLoop loop;
  uint16_t dead_port;
  {
    TestServer ts(loop);
    dead_port = ts.Start();
    ts.server().Stop();
  }
  loop.RunFor(50 * kMs);
  loop.Restart();
  Client client(loop, {});
  int left = 1;
  Recorder r(&loop, &left);
  client.Send(Local(dead_port), Req("/hello"), &r);
  loop.RunFor(5000 * kMs);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.result.error, TransportError::kConnect) << r.result.detail;
  EXPECT_EQ(r.t_sent, 0);  // nothing was written
}

TEST(ClientServerTest, ConnectionCapQueuesRequests) {
  EventLoop loop;
  TestServer ts(loop);
  uint16_t port = ts.Start();
  ClientOptions opts;
  opts.max_connections_per_origin = 1;
  Client client(loop, opts);
  int left = 3;
  std::vector<std::unique_ptr<Recorder>> rs;
  for (int i = 0; i < 3; ++i) {
    rs.push_back(std::make_unique<Recorder>(&loop, &left));
    client.Send(Local(port), Req("/hello", std::to_string(i)), rs.back().get());
  }
  EXPECT_EQ(client.stats().requests_waiting, 2);
  loop.RunFor(5000 * kMs);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(rs[i]->body, "hello " + std::to_string(i));
  EXPECT_EQ(client.stats().connections_opened, 1u);
}

TEST(ClientServerTest, ManyConcurrentStreams) {
  EventLoop loop;
  TestServer ts(loop);
  uint16_t port = ts.Start();
  Client client(loop, {});
  constexpr int kN = 500;
  int left = kN;
  std::vector<std::unique_ptr<Recorder>> rs;
  for (int i = 0; i < kN; ++i) {
    rs.push_back(std::make_unique<Recorder>(&loop, &left));
    client.Send(Local(port), Req("/stream?n=3&gap=10"), rs.back().get());
  }
  loop.RunFor(20000 * kMs);
  int ok = 0;
  for (auto& r : rs)
    ok += r->result.error == TransportError::kNone && r->body == "c0c1c2";
  EXPECT_EQ(ok, kN);
}

TEST(ClientServerTest, HttpsWithSelfSignedCertificate) {
  std::string dir =
      ::testing::TempDir() + "/redline_tls_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string cert, key;
  ASSERT_TRUE(testing::WriteSelfSignedCert(dir, &cert, &key).ok());
  EventLoop loop;
  ServerOptions so;
  so.tls_cert_file = cert;
  so.tls_key_file = key;
  TestServer ts(loop, so);
  uint16_t port = ts.Start();

  ClientOptions verified;
  verified.tls_ca_file = cert;
  Client client(loop, verified);
  Origin origin = Local(port, true);
  origin.host = "localhost";
  int left = 2;
  Recorder a(&loop, &left), b(&loop, &left);
  client.Send(origin, Req("/stream?n=3&gap=5"), &a);
  ClientOptions strict;  // system CAs only: the self-signed cert must fail
  Client strict_client(loop, strict);
  strict_client.Send(origin, Req("/hello"), &b);
  loop.RunFor(5000 * kMs);
  EXPECT_EQ(a.result.error, TransportError::kNone) << a.result.detail;
  EXPECT_EQ(a.body, "c0c1c2");
  EXPECT_EQ(b.result.error, TransportError::kConnect);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace redline::http

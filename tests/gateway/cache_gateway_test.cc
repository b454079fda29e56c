// The response cache and light/full routing through real HTTP: fake OpenAI
// upstreams (bench/testing/fake_openai_server.h) behind the gateway, and a
// real redis-server started by the test (port from the OS, persistence off,
// stopped by pid; the Redis tests skip when the binary is absent).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/testing/fake_openai_server.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"
#include "gateway_test_util.h"
#include "test_http_client.h"

namespace redline::gateway {
namespace {

using bench::testing::FakeOpenAiServer;
using bench::testing::FakePlan;
using bench::testing::FakeServerOptions;
using redline::testing::Http;
using redline::testing::HttpResponse;
using namespace testing;
using Headers = std::vector<std::pair<std::string, std::string>>;

std::string RedisBinary() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server",
                        "/usr/sbin/redis-server"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

// A redis-server in the foreground on a free loopback port, no persistence.
class RedisProcess {
 public:
  ~RedisProcess() { Kill(); }
  bool Start() {
    const std::string bin = RedisBinary();
    if (bin.empty()) return false;
    port_ = ClosedPort();
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      if (freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
      execl(bin.c_str(), bin.c_str(), "--port", port.c_str(), "--bind",
            "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode",
            "no", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Ready when it accepts a connection.
    return Eventually([&] { return Connectable(); });
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  std::string Url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
  }

 private:
  bool Connectable() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok =
        connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    return ok;
  }
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

class CacheGatewayTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& g : gws_) {
      g->Shutdown();
      g->Wait();
    }
    gws_.clear();
    for (auto& f : fakes_) f->Stop();
  }

  FakeOpenAiServer& AddFake(
      FakePlan plan = Quick(),
      std::function<FakePlan(uint64_t, const http::ServerRequest&,
                             const FakePlan&)>
          plan_fn = {}) {
    FakeServerOptions o;
    o.default_plan = plan;
    o.plan_fn = std::move(plan_fn);
    fakes_.push_back(std::make_unique<FakeOpenAiServer>(o));
    EXPECT_TRUE(fakes_.back()->Start().ok());
    return *fakes_.back();
  }
  static FakePlan Quick() {
    FakePlan p;
    p.ttft_us = 1000;
    p.gap_us = 300;
    p.tokens = 4;
    return p;
  }
  static PoolSpec Pool(const std::string& name, const std::string& model,
                       const FakeOpenAiServer& f) {
    PoolSpec p;
    p.name = name;
    p.models = {{model, {model + "-alias"}, {}}};
    UpstreamSpec u;
    u.url = "http://127.0.0.1:" + std::to_string(f.port());
    u.name = name + "0";
    p.upstreams.push_back(u);
    p.probe.interval_ms = 0;  // start healthy
    p.retries = 0;
    return p;
  }
  static CacheConfig Cache() {
    CacheConfig c;
    c.enabled = true;
    c.name_space = "t" + std::to_string(getpid());
    return c;
  }
  uint16_t Start(CacheConfig cache, std::vector<PoolSpec> pools,
                 RoutingConfig routing = {},
                 std::vector<std::string> keys = {}) {
    GatewayConfig c;
    c.port = 0;
    c.shutdown_grace_s = 2;
    c.cache = std::move(cache);
    c.routing = std::move(routing);
    c.api_keys = std::move(keys);
    c.pools = std::move(pools);
    Status s = FinalizeGatewayConfig(&c);
    EXPECT_TRUE(s.ok()) << s.message();
    gws_.push_back(std::make_unique<Gateway>(std::move(c)));
    auto port = gws_.back()->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    return port.ok() ? *port : 0;
  }
  static HttpResponse Post(uint16_t port, const std::string& body,
                           const Headers& h = {}) {
    return Http(port, "POST", "/v1/chat/completions", body, h);
  }
  static std::string Q(const std::string& text, bool stream = false,
                       const std::string& model = "fake",
                       const std::string& extra = "") {
    std::string b = ChatBody(model, {text}, stream);
    if (!extra.empty()) b.insert(b.size() - 1, "," + extra);
    return b;
  }
  static double Metric(uint16_t port, const std::string& name,
                       const std::vector<std::string>& must = {}) {
    return MetricSum(Http(port, "GET", "/metrics").body,
                     "redline_gateway_" + name, must);
  }

  std::vector<std::unique_ptr<FakeOpenAiServer>> fakes_;
  std::vector<std::unique_ptr<Gateway>> gws_;
};

TEST_F(CacheGatewayTest, RepeatedWorkloadHitsWithByteIdenticalAnswers) {
  FakeOpenAiServer& f = AddFake();
  const uint16_t port = Start(Cache(), {Pool("p", "fake", f)});
  std::vector<std::string> bodies;
  for (int i = 0; i < 6; ++i)
    bodies.push_back(
        Q("What is fact number " + std::to_string(i) + "?", i % 2 == 1));
  std::vector<HttpResponse> first;
  for (const std::string& b : bodies) {
    first.push_back(Post(port, b));
    ASSERT_EQ(first.back().status, 200) << first.back().body;
    EXPECT_EQ(first.back().Header("x-redline-cache"), "miss");
    EXPECT_EQ(first.back().Header("x-redline-cache-class"), "facts");
  }
  const uint64_t upstream = f.requests();
  EXPECT_EQ(upstream, bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    HttpResponse r = Post(port, bodies[i]);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("x-redline-cache"), "hit") << i;
    EXPECT_EQ(r.Header("x-redline-cache-tier"), "local");
    EXPECT_EQ(r.Header("Age"), "0");
    EXPECT_EQ(r.body, first[i].body) << "byte for byte, request " << i;
    if (i % 2 == 1) {
      EXPECT_EQ(r.Header("Content-Type"), first[i].Header("Content-Type"));
      // Same events, same boundaries.
      EXPECT_EQ(redline::testing::ParseSse(r.body).data,
                redline::testing::ParseSse(first[i].body).data);
    }
  }
  EXPECT_EQ(f.requests(), upstream) << "the second pass never went upstream";
  EXPECT_EQ(Metric(port, "cache_hits_total", {"tier=\"local\""}), 6);
  // The gateway's own time, by verdict: every hit and every miss observed.
  EXPECT_EQ(Metric(port, "cache_overhead_seconds_count",
                   {"result=\"hit\"", "tier=\"local\""}),
            6);
  EXPECT_EQ(Metric(port, "cache_overhead_seconds_count", {"result=\"miss\""}),
            6);
  // An alias resolves to the same key.
  HttpResponse alias =
      Post(port, Q("What is fact number 0?", false, "fake-alias"));
  EXPECT_EQ(alias.Header("x-redline-cache"), "hit");
  // A non-deterministic request is not cached.
  std::string hot = Q("What is fact number 0?");
  hot.replace(hot.find("\"temperature\":0"), 15, "\"temperature\":0.8");
  EXPECT_EQ(Post(port, hot).Header("x-redline-cache"), "uncacheable");
}

TEST_F(CacheGatewayTest, TimeSensitiveIsNeverServedFromCache) {
  FakeOpenAiServer& f = AddFake();
  const uint16_t port = Start(Cache(), {Pool("p", "fake", f)});
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = Post(port, Q("What's the weather today in Oslo?"));
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("x-redline-cache"), "uncacheable");
    EXPECT_EQ(r.Header("x-redline-cache-class"), "time_sensitive");
  }
  EXPECT_EQ(f.requests(), 3u);
}

TEST_F(CacheGatewayTest, ShortTtlsExpireAndOverridesAreStripped) {
  FakeOpenAiServer& f = AddFake();
  CacheConfig c = Cache();
  c.classes = {{"facts", 800}, {"opinions", 300}, {"time_sensitive", 0}};
  CacheRuleSpec op;
  op.cls = "opinions";
  op.keywords = {"do you think"};
  c.rules = DefaultCacheRules();
  c.rules.push_back(op);
  const uint16_t port = Start(c, {Pool("p", "fake", f)});
  const std::string opinion = Q("What do you think of tabs?");
  EXPECT_EQ(Post(port, opinion).Header("x-redline-cache"), "miss");
  HttpResponse hit = Post(port, opinion);
  EXPECT_EQ(hit.Header("x-redline-cache"), "hit");
  EXPECT_EQ(hit.Header("x-redline-cache-class"), "opinions");
  const std::string fact = Q("What is the boiling point of water?");
  EXPECT_EQ(Post(port, fact).Header("x-redline-cache"), "miss");
  std::this_thread::sleep_for(400ms);
  // The opinion expired (300 ms); the fact (800 ms) still lives.
  EXPECT_EQ(Post(port, opinion).Header("x-redline-cache"), "stale");
  EXPECT_EQ(Post(port, fact).Header("x-redline-cache"), "hit");
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(Post(port, fact).Header("x-redline-cache"), "stale");

  // Body override: class and no-cache; the member never goes upstream.
  const std::string body =
      Q("Name a prime.", false, "fake", R"("cache":{"class":"opinions"})");
  HttpResponse r = Post(port, body);
  EXPECT_EQ(r.Header("x-redline-cache-class"), "opinions");
  EXPECT_EQ(f.Truths().back().body.find("\"cache\""), std::string::npos)
      << f.Truths().back().body;
  EXPECT_EQ(Post(port, body).Header("x-redline-cache"), "hit");
  EXPECT_EQ(Post(port, body, {{"Cache-Control", "no-cache"}})
                .Header("x-redline-cache"),
            "bypass");
  // s-maxage: an entry older than that is not served (stale), and the
  // fresh answer replaces it.
  const std::string aged =
      Q("An aged question.", false, "fake", R"("cache":{"ttl":60})");
  EXPECT_EQ(Post(port, aged).Header("x-redline-cache"), "miss");
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(Post(port, aged, {{"Cache-Control", "s-maxage=0.001"}})
                .Header("x-redline-cache"),
            "stale");
  HttpResponse renewed = Post(port, aged);
  EXPECT_EQ(renewed.Header("x-redline-cache"), "hit");
  EXPECT_EQ(renewed.Header("Age"), "0");
  // no-store: looked up, never stored.
  const std::string once = Q("Store me not.");
  EXPECT_EQ(Post(port, once, {{"Cache-Control", "no-store"}})
                .Header("x-redline-cache"),
            "miss");
  EXPECT_EQ(Post(port, once).Header("x-redline-cache"), "miss");
  HttpResponse bad = Post(port, Q("x", false, "fake", R"("cache":{"ttl":-3})"));
  EXPECT_EQ(bad.status, 400) << bad.body;
}

TEST_F(CacheGatewayTest, StreamReplayKeepsEventsAndPace) {
  FakePlan slow = Quick();
  slow.gap_us = 30'000;
  slow.tokens = 5;
  FakeOpenAiServer& f = AddFake(slow);
  const uint16_t port = Start(Cache(), {Pool("p", "fake", f)});
  const std::string body = Q("Tell me a fact.", true);
  HttpResponse miss = Post(port, body);
  ASSERT_EQ(miss.status, 200);
  const StreamRead a = ReadStream(miss);
  ASSERT_TRUE(a.done);
  HttpResponse fast = Post(port, body);
  EXPECT_EQ(fast.Header("x-redline-cache"), "hit");
  EXPECT_EQ(ReadStream(fast).data, a.data);
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse paced = Post(port, body, {{"x-redline-cache-pace", "original"}});
  const auto paced_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
  EXPECT_EQ(paced.Header("x-redline-cache"), "hit");
  EXPECT_EQ(ReadStream(paced).data, a.data);
  // Recorded gaps are replayed (not a timing assertion on speed: a floor).
  EXPECT_GE(paced_ms, 4 * 30 - 10);
  EXPECT_EQ(f.requests(), 1u);
}

TEST_F(CacheGatewayTest, ErrorsPartialStreamsAndLengthAreNotStored) {
  // Upstream request 0: 500; 2: the stream breaks mid-way; 3: an error
  // event mid-stream; the others are fine.
  FakeOpenAiServer& f = AddFake(
      Quick(), [](uint64_t i, const http::ServerRequest&, const FakePlan& b) {
        FakePlan p = b;
        if (i == 0) p.status = 500;
        if (i == 2) p.disconnect_after = 2;
        if (i == 3) p.error_after = 2;
        return p;
      });
  const uint16_t port = Start(Cache(), {Pool("p", "fake", f)});
  EXPECT_EQ(Post(port, Q("q0")).status, 500);
  EXPECT_EQ(Post(port, Q("q0")).Header("x-redline-cache"), "miss");
  HttpResponse broken = Post(port, Q("q1", true));
  EXPECT_FALSE(ReadStream(broken).done);
  HttpResponse errored = Post(port, Q("q2", true));
  EXPECT_TRUE(ReadStream(errored).error_event);
  EXPECT_EQ(Post(port, Q("q1", true)).Header("x-redline-cache"), "miss");
  EXPECT_EQ(Post(port, Q("q2", true)).Header("x-redline-cache"), "miss");
  EXPECT_EQ(Post(port, Q("q2", true)).Header("x-redline-cache"), "hit");
  // The 500 and both broken streams (each ends with an error event).
  EXPECT_GE(Metric(port, "cache_store_skipped_total", {"reason=\"error\""}), 3);
  // finish_reason "length" (max_tokens reached) is not stored by default:
  // checked through the codec in the unit test; here the fake says "stop".
}

TEST_F(CacheGatewayTest, SingleFlightSendsOneOfIdenticalConcurrentMisses) {
  FakePlan slow = Quick();
  slow.ttft_us = 1'000'000;  // the others arrive well within it
  FakeOpenAiServer& f = AddFake(slow);
  const uint16_t port = Start(Cache(), {Pool("p", "fake", f)});
  const std::string body = Q("The same question at once");
  constexpr int kClients = 6;
  std::vector<HttpResponse> out(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      if (i > 0) std::this_thread::sleep_for(50ms);  // the first leads
      out[i] = Post(port, body);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(f.requests(), 1u);
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(out[i].status, 200);
    EXPECT_EQ(out[i].body, out[0].body);
  }
  EXPECT_EQ(
      Metric(port, "cache_single_flight_waits_total", {"outcome=\"served\""}),
      kClients - 1);
}

TEST_F(CacheGatewayTest, SingleFlightWaitersGoUpstreamWhenTheLeaderFails) {
  FakePlan slow = Quick();
  slow.ttft_us = 1'000'000;  // the others arrive well within it
  FakeOpenAiServer& f = AddFake(
      slow, [](uint64_t i, const http::ServerRequest&, const FakePlan& b) {
        FakePlan p = b;
        if (i == 0) p.status = 500;
        return p;
      });
  const uint16_t port = Start(Cache(), {Pool("p", "fake", f)});
  const std::string body = Q("Leader fails");
  std::vector<HttpResponse> out(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      if (i > 0) std::this_thread::sleep_for(50ms);
      out[i] = Post(port, body);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(out[0].status, 500);
  EXPECT_EQ(out[1].status, 200);
  EXPECT_EQ(out[2].status, 200);
  EXPECT_EQ(Metric(port, "cache_single_flight_waits_total",
                   {"outcome=\"leader_failed\""}),
            2);
  // No flight is left behind: the next request is a plain hit.
  EXPECT_EQ(Post(port, body).Header("x-redline-cache"), "hit");
}

TEST_F(CacheGatewayTest, TwoGatewaysShareRedisAndPurge) {
  RedisProcess redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server not installed";
  FakeOpenAiServer& f = AddFake();
  CacheConfig c = Cache();
  c.redis_url = redis.Url();
  c.admin_key = "admin-secret";
  c.compress_above_bytes = 64;  // exercise zstd
  c.redis_purge_poll_ms = 20;
  const uint16_t a = Start(c, {Pool("p", "fake", f)});
  const uint16_t b = Start(c, {Pool("p", "fake", f)});
  const std::string body = Q("Shared question", false);
  const std::string stream = Q("Shared stream", true);
  HttpResponse first = Post(a, body);
  HttpResponse first_stream = Post(a, stream);
  EXPECT_EQ(first.Header("x-redline-cache"), "miss");
  // The SET is asynchronous: the other gateway sees it shortly.
  HttpResponse second;
  ASSERT_TRUE(Eventually([&] {
    second = Post(b, body);
    return second.Header("x-redline-cache") == "hit";
  }));
  EXPECT_EQ(second.Header("x-redline-cache-tier"), "redis");
  EXPECT_EQ(second.body, first.body);
  HttpResponse second_stream;
  ASSERT_TRUE(Eventually([&] {
    second_stream = Post(b, stream);
    return second_stream.Header("x-redline-cache") == "hit";
  }));
  EXPECT_EQ(ReadStream(second_stream).data, ReadStream(first_stream).data);
  EXPECT_EQ(Post(b, body).Header("x-redline-cache-tier"), "local");
  EXPECT_EQ(f.requests(), 2u);

  // Purge by class: needs the admin key; then both tiers miss.
  EXPECT_EQ(
      Http(b, "POST", "/admin/cache/purge", R"({"class":"facts"})").status,
      401);
  HttpResponse purge =
      Http(b, "POST", "/admin/cache/purge", R"({"class":"facts"})",
           {{"Authorization", "Bearer admin-secret"}});
  ASSERT_EQ(purge.status, 200) << purge.body;
  EXPECT_NE(purge.body.find("\"purged_redis\":2"), std::string::npos)
      << purge.body;
  EXPECT_EQ(Post(b, body).Header("x-redline-cache"), "miss");
  // Gateway A's local copies (stored on its misses) go too: it reads B's
  // purge from the log within a poll, and never applies its own.
  auto remote = [&](uint16_t port, const std::string& name) {
    return MetricValue(Http(port, "GET", "/metrics").body,
                       "redline_gateway_cache_remote_" + name);
  };
  ASSERT_TRUE(Eventually([&] { return remote(a, "purges_total") >= 1; }));
  EXPECT_EQ(remote(a, "purged_entries_total"), 2);
  EXPECT_EQ(Post(a, stream).Header("x-redline-cache"), "miss");
  EXPECT_EQ(remote(b, "purges_total"), 0);
  EXPECT_EQ(f.requests(), 4u);
}

TEST_F(CacheGatewayTest, KillingRedisMidRunLosesNoRequest) {
  RedisProcess redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server not installed";
  FakeOpenAiServer& f = AddFake();
  CacheConfig c = Cache();
  c.redis_url = redis.Url();
  c.redis_timeout_ms = 30;
  const uint16_t port = Start(c, {Pool("p", "fake", f)});
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    if (i == 15) redis.Kill();
    HttpResponse r = Post(port, Q("q" + std::to_string(i % 10), i % 3 == 0));
    ok += r.status == 200 ? 1 : 0;
    EXPECT_EQ(r.status, 200) << i << " " << r.error;
  }
  EXPECT_EQ(ok, 40);
  const std::string m = Http(port, "GET", "/metrics").body;
  // Failed on the dead connection (errors), or not tried because the
  // reconnect failed (bypass, a series without labels).
  EXPECT_GT(std::max(MetricValue(m, "redline_gateway_cache_redis_bypass_total"),
                     0.0) +
                MetricSum(m, "redline_gateway_cache_redis_errors_total"),
            0);
  EXPECT_EQ(MetricValue(m, "redline_gateway_cache_redis_up"), 0);
}

TEST_F(CacheGatewayTest, WarmFileFillsTheCacheBeforeReady) {
  FakeOpenAiServer& f = AddFake();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("warm_" + std::to_string(getpid()) + ".jsonl"))
                               .string();
  {
    std::ofstream out(path);
    out << R"({"request":)" << Q("Warm pair?")
        << R"(,"response":{"id":"w","object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Warm answer"},"finish_reason":"stop"}]}})"
        << "\n";
    out << R"({"request":)" << Q("Warm by upstream?") << "}\n";
  }
  CacheConfig c = Cache();
  c.warm_file = path;
  const uint16_t port = Start(c, {Pool("p", "fake", f)});
  ASSERT_TRUE(
      Eventually([&] { return Http(port, "GET", "/readyz").status == 200; }));
  HttpResponse pair = Post(port, Q("Warm pair?"));
  EXPECT_EQ(pair.Header("x-redline-cache"), "hit");
  EXPECT_NE(pair.body.find("Warm answer"), std::string::npos);
  EXPECT_EQ(Post(port, Q("Warm by upstream?")).Header("x-redline-cache"),
            "hit");
  EXPECT_EQ(f.requests(), 1u);
  std::filesystem::remove(path);
}

RoutingConfig AutoRouting() {
  RoutingConfig r;
  r.models = {"auto"};
  r.classes = {{"light", "small", 0.3}, {"full", "big", INFINITY}};
  return r;
}

TEST_F(CacheGatewayTest, RoutesByComplexityAndEscalatesUnreliableAnswers) {
  FakePlan light = Quick();
  light.tokens = 2;  // " w0 w1": matches the refusal pattern below
  FakeOpenAiServer& small = AddFake(light);
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.pinned = {"What is 2+2?"};
  CacheConfig c = Cache();
  c.enabled = false;
  const uint16_t port =
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r);
  // Simple: light, answered well (no escalation rule fires yet).
  HttpResponse simple = Post(port, Q("Hi there", false, "auto"));
  ASSERT_EQ(simple.status, 200) << simple.body;
  EXPECT_EQ(simple.Header("x-redline-route"), "light");
  EXPECT_EQ(simple.Header("X-Gateway-Upstream"), "s0");
  // Complex: full at once.
  HttpResponse complex =
      Post(port, Q("Explain step by step why the proof works and compare two "
                   "approaches, then derive the bound.",
                   true, "auto"));
  ASSERT_EQ(complex.status, 200);
  EXPECT_EQ(complex.Header("x-redline-route"), "full");
  EXPECT_EQ(complex.Header("X-Gateway-Upstream"), "b0");
  // Forced by header.
  HttpResponse forced =
      Post(port, Q("Hi there", false, "auto"), {{"x-redline-route", "full"}});
  EXPECT_EQ(forced.Header("x-redline-route"), "full");
  EXPECT_EQ(
      Post(port, Q("Hi", false, "auto"), {{"x-redline-route", "huge"}}).status,
      400);
  const std::string m = Http(port, "GET", "/metrics").body;
  EXPECT_EQ(
      MetricSum(m, "redline_gateway_route_requests_total", {"class=\"light\""}),
      1);
  EXPECT_GE(MetricSum(m, "redline_gateway_route_e2e_seconds_count",
                      {"route=\"full\""}),
            2);
  (void)m;
}

TEST_F(CacheGatewayTest, EscalatesARefusalToTheFullModel) {
  FakePlan light = Quick();
  light.tokens = 2;
  FakeOpenAiServer& small = AddFake(light);
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.refusal_regex = "^ w0 w1$";
  CacheConfig c = Cache();
  const uint16_t port =
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r);
  HttpResponse a = Post(port, Q("Hi there", false, "auto"));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.Header("x-redline-route"), "full");
  EXPECT_EQ(a.Header("x-redline-escalated"), "refusal");
  EXPECT_EQ(a.Header("X-Gateway-Upstream"), "b0");
  EXPECT_NE(a.body.find(" w0 w1 w2 w3"), std::string::npos) << a.body;
  EXPECT_EQ(small.requests(), 1u);
  EXPECT_EQ(big.requests(), 1u);
  // The forwarded model is the class's model.
  EXPECT_NE(big.Truths().back().body.find("\"model\":\"big\""),
            std::string::npos);
  // Cached under the routed request: a repeat is a hit, no model asked.
  HttpResponse again = Post(port, Q("Hi there", false, "auto"));
  EXPECT_EQ(again.Header("x-redline-cache"), "hit");
  EXPECT_EQ(again.body, a.body);
  EXPECT_EQ(small.requests() + big.requests(), 2u);
  EXPECT_EQ(Metric(port, "route_escalations_total", {"reason=\"refusal\""}), 1);
  // Streaming requests are not escalated (documented trade-off).
  HttpResponse s = Post(port, Q("Hello again", true, "auto"));
  EXPECT_EQ(s.Header("x-redline-route"), "light");
}

// Streamed escalation: the light stream's first tokens are held and judged
// before any byte is sent; a refusal among them hands the request to the
// full model, whose stream is the only one the client sees.
TEST_F(CacheGatewayTest, EscalatesAStreamOnItsHeldFirstTokens) {
  FakePlan light = Quick();
  light.tokens = 8;
  FakeOpenAiServer& small = AddFake(light);
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.refusal_regex = "^ w0 w1$";  // the first two tokens exactly
  r.escalate_stream_tokens = 2;
  const uint16_t port =
      Start(Cache(), {Pool("s", "small", small), Pool("b", "big", big)}, r);
  HttpResponse a = Post(port, Q("Hi there", true, "auto"));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.Header("x-redline-route"), "full");
  EXPECT_EQ(a.Header("x-redline-escalated"), "refusal");
  EXPECT_EQ(a.Header("X-Gateway-Upstream"), "b0");
  const StreamRead sr = ReadStream(a);
  EXPECT_TRUE(sr.done);
  EXPECT_FALSE(sr.error_event);
  EXPECT_EQ(sr.text, " w0 w1 w2 w3") << a.body;  // big's 4 tokens only
  EXPECT_EQ(std::count(sr.data.begin(), sr.data.end(), "[DONE]"), 1);
  EXPECT_EQ(small.requests(), 1u);
  EXPECT_EQ(big.requests(), 1u);
  EXPECT_NE(big.Truths().back().body.find("\"model\":\"big\""),
            std::string::npos);
  EXPECT_EQ(Metric(port, "route_escalations_total", {"reason=\"refusal\""}), 1);
  EXPECT_EQ(Metric(port, "route_requests_total", {"class=\"full\""}), 1);
  // The full stream was stored under the routed request: a repeat is a
  // hit with the same events.
  HttpResponse again = Post(port, Q("Hi there", true, "auto"));
  EXPECT_EQ(again.Header("x-redline-cache"), "hit");
  EXPECT_EQ(again.body, a.body);
  EXPECT_EQ(small.requests() + big.requests(), 2u);
  // Every answer counted once (the handed-over light attempt is not one).
  EXPECT_EQ(Metric(port, "requests_total", {"code=\"200\""}), 2);
}

// The pattern only shows after the held tokens: released, streamed from
// the light model to the end, never escalated.
TEST_F(CacheGatewayTest, ReleasedStreamIsNeverEscalated) {
  FakePlan light = Quick();
  light.tokens = 8;
  FakeOpenAiServer& small = AddFake(light);
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.refusal_regex = "w5";
  r.escalate_stream_tokens = 3;
  CacheConfig c = Cache();
  c.enabled = false;
  const uint16_t port =
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r);
  HttpResponse a = Post(port, Q("Hi there", true, "auto"));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.Header("x-redline-route"), "light");
  EXPECT_EQ(a.Header("x-redline-escalated"), "");
  EXPECT_EQ(a.Header("X-Gateway-Upstream"), "s0");
  const StreamRead sr = ReadStream(a);
  EXPECT_TRUE(sr.done);
  EXPECT_EQ(sr.text, " w0 w1 w2 w3 w4 w5 w6 w7");
  EXPECT_EQ(big.requests(), 0u);
  EXPECT_EQ(Metric(port, "route_escalations_total"), 0);
  EXPECT_EQ(Metric(port, "route_e2e_seconds_count", {"route=\"light\""}), 1);
  // A stream that ends inside the hold is judged at its end.
  r.escalate_stream_tokens = 16;
  const uint16_t port2 =
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r);
  HttpResponse b = Post(port2, Q("Hi there", true, "auto"));
  EXPECT_EQ(b.Header("x-redline-route"), "full");
  EXPECT_EQ(b.Header("x-redline-escalated"), "refusal");
  EXPECT_EQ(ReadStream(b).text, " w0 w1 w2 w3");
}

// A light stream that fails while held (an error answer, or an error event
// among the held tokens) with nothing left to try is handed to the full
// model, as a non-streamed error answer is.
TEST_F(CacheGatewayTest, HeldLightStreamThatFailsIsAnsweredByTheFullModel) {
  FakeOpenAiServer& small = AddFake(
      Quick(),
      [](uint64_t index, const http::ServerRequest&, const FakePlan& base) {
        FakePlan p = base;
        if (index == 0) p.status = 500;
        if (index == 1) p.error_after = 1;
        return p;
      });
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.escalate_stream_tokens = 4;
  CacheConfig c = Cache();
  c.enabled = false;
  const uint16_t port =
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r);
  for (int i = 0; i < 2; ++i) {
    HttpResponse a = Post(port, Q("Hi there", true, "auto"));
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.Header("x-redline-route"), "full") << i;
    EXPECT_EQ(a.Header("x-redline-escalated"), "error") << i;
    const StreamRead sr = ReadStream(a);
    EXPECT_TRUE(sr.done) << i;
    EXPECT_FALSE(sr.error_event) << i;
    EXPECT_EQ(sr.text, " w0 w1 w2 w3") << i;
  }
  EXPECT_EQ(small.requests(), 2u);
  EXPECT_EQ(big.requests(), 2u);
  EXPECT_EQ(Metric(port, "route_escalations_total", {"reason=\"error\""}), 2);
  EXPECT_EQ(Metric(port, "requests_total", {"code=\"200\""}), 2);
  EXPECT_EQ(Metric(port, "requests_total", {"code=\"500\""}), 0);
  EXPECT_EQ(Metric(port, "requests_total", {"code=\"502\""}), 0);
}

// The documented cost: a streamed light answer's first byte waits for the
// held tokens (here 3 tokens 150 ms apart: at least 300 ms), escalated or
// not; without the hold it comes with the first token.
TEST_F(CacheGatewayTest, HoldDelaysTheFirstByteByTheHeldTokens) {
  FakePlan light = Quick();
  light.tokens = 4;
  light.gap_us = 150'000;
  FakeOpenAiServer& small = AddFake(light);
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.refusal_regex = "never matches";
  CacheConfig c = Cache();
  c.enabled = false;
  auto first_byte_ms = [&](uint16_t port) {
    redline::testing::TestConnection conn;
    EXPECT_TRUE(conn.Connect(port));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(conn.SendRequest("POST", "/v1/chat/completions",
                                 Q("Hi there", true, "auto")));
    double ms = -1;
    HttpResponse resp = conn.ReadResponse([&](std::string_view) {
      if (ms < 0)
        ms = std::chrono::duration<double, std::milli>(
                 std::chrono::steady_clock::now() - t0)
                 .count();
      return true;
    });
    EXPECT_EQ(resp.Header("x-redline-route"), "light");
    EXPECT_NE(resp.body.find("[DONE]"), std::string::npos);
    return ms;
  };
  r.escalate_stream_tokens = 3;
  const double held = first_byte_ms(
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r));
  r.escalate_stream_tokens = 0;
  const double direct = first_byte_ms(
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r));
  std::printf("first byte: held 3 tokens %.1f ms, not held %.1f ms\n", held,
              direct);
  EXPECT_GE(held, 295);
  EXPECT_LT(direct, 150);
  EXPECT_EQ(big.requests(), 0u);
}

// A client that leaves while the light stream is held cancels it; nothing
// is escalated.
TEST_F(CacheGatewayTest, ClientLeavingDuringTheHoldCancelsTheLightStream) {
  FakePlan light = Quick();
  light.tokens = 100;
  light.gap_us = 200'000;  // 16 held tokens would take 3 s
  FakeOpenAiServer& small = AddFake(light);
  FakeOpenAiServer& big = AddFake();
  RoutingConfig r = AutoRouting();
  r.escalate_to = "full";
  r.refusal_regex = "never matches";
  r.escalate_stream_tokens = 16;
  CacheConfig c = Cache();
  c.enabled = false;
  const uint16_t port =
      Start(c, {Pool("s", "small", small), Pool("b", "big", big)}, r);
  redline::testing::TestConnection conn;
  ASSERT_TRUE(conn.Connect(port));
  ASSERT_TRUE(conn.SendRequest("POST", "/v1/chat/completions",
                               Q("Hi there", true, "auto")));
  ASSERT_TRUE(Eventually([&] {
    return small.requests() == 1 &&
           small.Truths().at(0).chunk_write_ns.size() >= 2;
  }));
  conn.Close();
  EXPECT_TRUE(Eventually(
      [&] {
        return MetricSum(Http(port, "GET", "/metrics").body,
                         "redline_gateway_upstream_in_flight") == 0;
      },
      2s));
  const size_t chunks = small.Truths().at(0).chunk_write_ns.size();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(small.Truths().at(0).chunk_write_ns.size(), chunks)
      << "the light stream kept going";
  EXPECT_LT(chunks, 16u);
  EXPECT_EQ(big.requests(), 0u);
  EXPECT_EQ(Metric(port, "client_cancelled_total", {"pool=\"s\""}), 1);
  EXPECT_EQ(Metric(port, "route_escalations_total"), 0);
}

}  // namespace
}  // namespace redline::gateway

// RedisTier against a real redis-server (started by the test on a free
// loopback port, persistence off, stopped by pid; skipped when the binary
// is absent): pipelined commands answered in order, purge by prefix across
// several SCAN batches, and Redis killed or unreachable: every operation
// still completes (as an error), none hangs.
#include "gateway/redis_tier.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "gateway_test_util.h"
#include "http/event_loop.h"
#include "telemetry/metrics.h"

namespace redline::gateway {
namespace {

using namespace testing;

class RedisServer {
 public:
  ~RedisServer() { Kill(); }
  bool Start() {
    const char* bin = "/usr/bin/redis-server";
    if (access(bin, X_OK) != 0) return false;
    port_ = ClosedPort();
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      if (freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
      execl(bin, bin, "--port", port.c_str(), "--bind", "127.0.0.1", "--save",
            "", "--appendonly", "no", static_cast<char*>(nullptr));
      _exit(127);
    }
    return Eventually([&] {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool ok =
          connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      close(fd);
      return ok;
    });
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

class RedisTierTest : public ::testing::Test {
 protected:
  RedisTierTest() {
    auto& r = registry_;
    m_.get_errors =
        &r.AddCounter("get_errors", "", {}).Labels(std::vector<std::string>{});
    m_.set_errors =
        &r.AddCounter("set_errors", "", {}).Labels(std::vector<std::string>{});
    m_.refused =
        &r.AddCounter("refused", "", {}).Labels(std::vector<std::string>{});
    m_.reconnects =
        &r.AddCounter("reconnects", "", {}).Labels(std::vector<std::string>{});
    m_.get_latency = &r.AddHistogram("get_latency", "", {}, {0.001})
                          .Labels(std::vector<std::string>{});
    m_.set_latency = &r.AddHistogram("set_latency", "", {}, {0.001})
                          .Labels(std::vector<std::string>{});
    m_.up = &r.AddGauge("up", "", {}).Labels(std::vector<std::string>{});
  }
  std::unique_ptr<RedisTier> Tier(const std::string& url, int queue = 1024) {
    RedisOptions o;
    o.url = url;
    o.timeout_ms = 500;  // generous: a loaded test machine
    o.connect_timeout_ms = 500;
    o.queue = queue;
    return std::make_unique<RedisTier>(o, loop_, m_);
  }
  // Runs the loop until `done` holds (bounded).
  bool RunUntil(const std::function<bool()>& done, int64_t limit_ms = 10000) {
    const int64_t end = http::NowNs() + limit_ms * 1'000'000;
    while (!done() && http::NowNs() < end) loop_.RunFor(5'000'000);
    return done();
  }

  telemetry::Registry registry_;
  RedisMetrics m_;
  http::EventLoop loop_;
};

TEST_F(RedisTierTest, PipelinedCommandsAnswerInOrderAndPurgeByPrefix) {
  RedisServer redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server not installed";
  auto tier = Tier("redis://127.0.0.1:" + std::to_string(redis.port()));
  constexpr int kKeys = 250;  // more than one SCAN batch (COUNT 100)
  for (int i = 0; i < kKeys; ++i)
    tier->Set("pre:" + std::to_string(i), "value-" + std::to_string(i), 60000);
  tier->Set("other:1", "kept", 60000);
  // All queued at once, behind the connect: every reply must land on its
  // own request.
  std::vector<std::string> got(kKeys);
  int answered = 0, found = 0;
  for (int i = 0; i < kKeys; ++i) {
    tier->Get("pre:" + std::to_string(i),
              [&, i](RedisTier::Result r, std::string v) {
                ++answered;
                if (r == RedisTier::Result::kFound) ++found;
                got[i] = std::move(v);
              });
  }
  RedisTier::Result missing = RedisTier::Result::kError;
  bool missing_done = false;
  tier->Get("pre:none", [&](RedisTier::Result r, std::string) {
    missing = r;
    missing_done = true;
  });
  ASSERT_TRUE(RunUntil([&] { return answered == kKeys && missing_done; }));
  EXPECT_EQ(found, kKeys);
  for (int i = 0; i < kKeys; ++i)
    EXPECT_EQ(got[i], "value-" + std::to_string(i));
  EXPECT_EQ(missing, RedisTier::Result::kNotFound);
  EXPECT_EQ(m_.up->value(), 1);

  int64_t deleted = -1;
  bool purge_ok = false, purged = false;
  tier->Purge("pre:", [&](int64_t n, bool ok) {
    deleted = n;
    purge_ok = ok;
    purged = true;
  });
  ASSERT_TRUE(RunUntil([&] { return purged; }));
  EXPECT_TRUE(purge_ok);
  EXPECT_EQ(deleted, kKeys);
  std::string kept;
  bool kept_done = false;
  tier->Get("other:1", [&](RedisTier::Result, std::string v) {
    kept = std::move(v);
    kept_done = true;
  });
  ASSERT_TRUE(RunUntil([&] { return kept_done; }));
  EXPECT_EQ(kept, "kept");
  EXPECT_EQ(m_.get_errors->value(), 0);
  EXPECT_EQ(m_.set_errors->value(), 0);
}

TEST_F(RedisTierTest, KilledOrUnreachableRedisFailsEveryOperationAtOnce) {
  RedisServer redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server not installed";
  auto tier = Tier("redis://127.0.0.1:" + std::to_string(redis.port()));
  bool first = false;
  tier->Get("k", [&](RedisTier::Result r, std::string) {
    first = r == RedisTier::Result::kNotFound;
  });
  ASSERT_TRUE(RunUntil([&] { return first; }));
  redis.Kill();
  // In flight when the connection dies, or refused while reconnecting:
  // each one completes, as an error.
  int errors = 0, answered = 0;
  for (int i = 0; i < 20; ++i) {
    tier->Get("k", [&](RedisTier::Result r, std::string) {
      ++answered;
      if (r == RedisTier::Result::kError) ++errors;
    });
  }
  ASSERT_TRUE(RunUntil([&] { return answered == 20; }));
  EXPECT_EQ(errors, 20);
  EXPECT_EQ(m_.up->value(), 0);

  // Nothing listens: the connect fails, then the backoff refuses at once.
  auto down = Tier("redis://127.0.0.1:" + std::to_string(ClosedPort()));
  int down_answered = 0;
  for (int i = 0; i < 2; ++i) {
    down->Get("k", [&](RedisTier::Result r, std::string) {
      EXPECT_EQ(r, RedisTier::Result::kError);
      ++down_answered;
    });
    ASSERT_TRUE(RunUntil([&] { return down_answered == i + 1; }));
  }
  EXPECT_GE(m_.refused->value(), 2);

  // A full queue refuses at once too.
  auto tiny = Tier("redis://127.0.0.1:" + std::to_string(ClosedPort()), 1);
  int tiny_answered = 0;
  for (int i = 0; i < 3; ++i)
    tiny->Get("k", [&](RedisTier::Result, std::string) { ++tiny_answered; });
  ASSERT_TRUE(RunUntil([&] { return tiny_answered == 3; }));
}

}  // namespace
}  // namespace redline::gateway

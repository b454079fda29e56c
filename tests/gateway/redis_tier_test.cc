// RedisTier against a real redis-server (started by the test on a free
// loopback port, persistence off, stopped by pid; skipped when the binary
// is absent): pipelined commands answered in order, purge by prefix across
// several SCAN batches, the stream commands of the purge log, and Redis
// killed or unreachable: every operation still completes (as an error),
// none hangs.
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
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }

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
  std::unique_ptr<RedisTier> Tier(const std::string& url, int queue = 1024,
                                  int64_t timeout_ms = 500) {
    RedisOptions o;
    o.url = url;
    o.timeout_ms = timeout_ms;  // generous by default: a loaded machine
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

// The purge log's commands: the newest entry of an absent stream is none,
// added entries read back in order after a cursor, a batch is bounded by
// its count, the stream is trimmed near its cap, and with Redis gone every
// read still completes, as a failure.
TEST_F(RedisTierTest, StreamAddReadAndLast) {
  RedisServer redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server not installed";
  auto tier = Tier("redis://127.0.0.1:" + std::to_string(redis.port()));
  struct Got {
    bool done = false, ok = false;
    std::vector<RedisTier::StreamEntry> entries;
  };
  auto collect = [](Got* g) {
    *g = Got();
    return [g](bool ok, std::vector<RedisTier::StreamEntry> e) {
      g->done = true;
      g->ok = ok;
      g->entries = std::move(e);
    };
  };
  Got last;
  tier->StreamLast("log", collect(&last));
  ASSERT_TRUE(RunUntil([&] { return last.done; }));
  EXPECT_TRUE(last.ok);
  EXPECT_TRUE(last.entries.empty());

  for (int i = 0; i < 5; ++i)
    tier->StreamAdd("log", {{"prefix", "p" + std::to_string(i)}, {"o", "x"}},
                    1000);
  Got all;
  tier->StreamRead("log", "0-0", 100, collect(&all));
  ASSERT_TRUE(RunUntil([&] { return all.done; }));
  ASSERT_TRUE(all.ok);
  ASSERT_EQ(all.entries.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(all.entries[i].fields.size(), 2u);
    EXPECT_EQ(all.entries[i].fields[0].first, "prefix");
    EXPECT_EQ(all.entries[i].fields[0].second, "p" + std::to_string(i));
  }
  Got two;
  tier->StreamRead("log", all.entries[1].id, 2, collect(&two));
  ASSERT_TRUE(RunUntil([&] { return two.done; }));
  ASSERT_EQ(two.entries.size(), 2u);
  EXPECT_EQ(two.entries[0].id, all.entries[2].id);
  EXPECT_EQ(two.entries[1].id, all.entries[3].id);
  Got none;
  tier->StreamRead("log", all.entries[4].id, 100, collect(&none));
  ASSERT_TRUE(RunUntil([&] { return none.done; }));
  EXPECT_TRUE(none.ok);
  EXPECT_TRUE(none.entries.empty());
  tier->StreamLast("log", collect(&last));
  ASSERT_TRUE(RunUntil([&] { return last.done; }));
  ASSERT_EQ(last.entries.size(), 1u);
  EXPECT_EQ(last.entries[0].id, all.entries[4].id);

  // MAXLEN ~: trimmed in whole nodes (100 entries by default), so 300
  // more entries capped at 10 leave far fewer than 305.
  for (int i = 0; i < 300; ++i) tier->StreamAdd("cap", {{"i", "x"}}, 10);
  Got capped;
  tier->StreamRead("cap", "0-0", 1000, collect(&capped));
  ASSERT_TRUE(RunUntil([&] { return capped.done; }));
  EXPECT_TRUE(capped.ok);
  EXPECT_LE(capped.entries.size(), 200u);
  EXPECT_EQ(m_.get_errors->value(), 0);
  EXPECT_EQ(m_.set_errors->value(), 0);

  redis.Kill();
  Got gone;
  tier->StreamRead("log", "0-0", 100, collect(&gone));
  ASSERT_TRUE(RunUntil([&] { return gone.done; }));
  EXPECT_FALSE(gone.ok);
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

// A command that times out fails at once, and its late reply must not be
// taken for the next command's (the connection may stay open).
TEST_F(RedisTierTest, LateRepliesNeverAnswerLaterCommands) {
  RedisServer redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server not installed";
  auto tier = Tier("redis://127.0.0.1:" + std::to_string(redis.port()), 1024,
                   /*timeout_ms=*/100);
  tier->Set("a", "value-a", 60000);
  tier->Set("b", "value-b", 60000);
  std::string b_first;
  bool ready = false;
  tier->Get("b", [&](RedisTier::Result, std::string v) {
    b_first = std::move(v);
    ready = true;
  });
  ASSERT_TRUE(RunUntil([&] { return ready; }));
  ASSERT_EQ(b_first, "value-b");

  redis.Signal(SIGSTOP);  // Redis hangs: the command times out
  RedisTier::Result a_result = RedisTier::Result::kFound;
  bool a_done = false;
  tier->Get("a", [&](RedisTier::Result r, std::string) {
    a_result = r;
    a_done = true;
  });
  ASSERT_TRUE(RunUntil([&] { return a_done; }));
  EXPECT_EQ(a_result, RedisTier::Result::kError);
  redis.Signal(SIGCONT);  // the reply to "a" is on its way now
  std::string b_after;
  bool b_done = false;
  tier->Get("b", [&](RedisTier::Result r, std::string v) {
    b_after = r == RedisTier::Result::kFound ? std::move(v) : "error";
    b_done = true;
  });
  ASSERT_TRUE(RunUntil([&] { return b_done; }));
  // Either answered on the same connection after "a"'s late reply was
  // dropped, or, had the connection hit its limit, failed or answered on a
  // new one: never "value-a".
  EXPECT_NE(b_after, "value-a");
  // And the tier keeps working.
  std::string b_last;
  bool last_done = false;
  ASSERT_TRUE(RunUntil([&] {
    if (last_done && b_last == "value-b") return true;
    last_done = false;
    tier->Get("b", [&](RedisTier::Result, std::string v) {
      b_last = std::move(v);
      last_done = true;
    });
    return RunUntil([&] { return last_done; }, 2000) && b_last == "value-b";
  }));
  EXPECT_GE(m_.get_errors->value(), 1);
}

}  // namespace
}  // namespace redline::gateway

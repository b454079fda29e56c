// Normal traffic next to an attack, against one in-process `redline serve`
// on loopback: slowloris connections, stalled 8 MB bodies, oversize
// prompts, requests with thousands of messages, and /tokenize clients that
// never read — all at once, for a bounded time (RL_SOAK_SECONDS, default
// 20). Asserts: no 5xx, every normal request answered, the server alive,
// RSS flat after warm-up and descriptors back to the baseline, and normal
// latency within a loose bound of the quiet run (the ratio is printed; the
// product bar is p99 within 2x, measured by the attack benchmark, not here).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/sanitizers.h"
#include "base/thread_pool.h"
#include "model/arch/synthetic.h"
#include "server/server.h"
#include "test_http_client.h"

namespace redline::server {
namespace {

// Sanitizer builds (kSanitized) run the same attack for its races and
// leaks; their slowdown (5-15x) and shadow memory make the latency and RSS
// bounds meaningless there.

using testing::Http;
using testing::HttpResponse;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int64_t RssBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int OpenFds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

// A raw loopback socket (the attacker's), closed on destruction.
struct RawSocket {
  int fd = -1;
  explicit RawSocket(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd);
      fd = -1;
    }
    timeval tv{0, 100000};
    if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawSocket() {
    if (fd >= 0) ::close(fd);
  }
  bool Send(std::string_view s) {
    return fd >= 0 && ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) ==
                          static_cast<ssize_t>(s.size());
  }
  // True once the server closed its side (EOF or reset), after whatever
  // answer it sent first (a 408, say).
  bool Closed() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) continue;
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

class AttackSoakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_attack_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / "tiny.gguf").string();
    auto spec = model::SyntheticPreset("tiny");
    ASSERT_TRUE(spec.ok());
    ThreadPool pool(1);
    ASSERT_TRUE(
        model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 2, path, pool)
            .ok());
    ServerConfig c;
    c.model_paths = {path};
    c.port = 0;
    c.threads = 1;
    c.parallel = 4;
    c.ctx_tokens = 512;
    c.header_timeout_s = 1;
    c.body_timeout_s = 2;
    c.write_timeout_s = 2;
    c.queue_budget_s = 0;
    ASSERT_TRUE(FinalizeConfig(&c).ok());
    server_ = std::make_unique<InferenceServer>(std::move(c));
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    const auto end = Clock::now() + 60s;
    while (Http(port_, "GET", "/readyz").status != 200 && Clock::now() < end)
      std::this_thread::sleep_for(20ms);
  }
  void TearDown() override {
    server_->Shutdown();
    EXPECT_EQ(server_->Wait(), 0);
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // One normal request; its latency in ms, or -1 when it was not a 200.
  double Normal(int i) {
    const std::string body =
        R"({"messages":[{"role":"user","content":"Tell me a story )" +
        std::to_string(i % 7) +
        R"("}],"max_tokens":8,"temperature":0,"ignore_eos":true})";
    const auto t0 = Clock::now();
    HttpResponse r = Http(port_, "POST", "/v1/chat/completions", body);
    if (r.status >= 500) server_errors_++;
    if (r.status != 200) return -1;
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

  std::filesystem::path dir_;
  std::unique_ptr<InferenceServer> server_;
  uint16_t port_ = 0;
  std::atomic<int> server_errors_{0};
};

TEST_F(AttackSoakTest, NormalTrafficSurvivesEveryAttackAtOnce) {
  const char* env = std::getenv("RL_SOAK_SECONDS");
  const int seconds = env != nullptr ? std::max(5, std::atoi(env)) : 20;

  // Quiet: warm up, then the latency of normal requests alone.
  for (int i = 0; i < 10; ++i) Normal(i);
  std::vector<double> quiet;
  for (int i = 0; i < 60; ++i) {
    const double ms = Normal(i);
    ASSERT_GE(ms, 0);
    quiet.push_back(ms);
  }
  const int64_t rss_before = RssBytes();
  const int fds_before = OpenFds();

  std::atomic<bool> stop{false};
  std::atomic<int> slowloris_closed{0}, stalled_closed{0}, oversize_refused{0},
      many_messages_answered{0}, tokenize_closed{0}, attack_5xx{0};
  std::vector<std::thread> attackers;
  // Slowloris: headers trickled forever; the header timeout must close them.
  attackers.emplace_back([&] {
    while (!stop) {
      std::vector<std::unique_ptr<RawSocket>> socks;
      for (int i = 0; i < 40; ++i) {
        socks.push_back(std::make_unique<RawSocket>(port_));
        socks.back()->Send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
      }
      const auto end = Clock::now() + 3s;
      while (!stop && Clock::now() < end) {
        for (auto& s : socks) s->Send("X-Slow: y\r\n");
        std::this_thread::sleep_for(200ms);
      }
      for (auto& s : socks) slowloris_closed += s->Closed();
    }
  });
  // Stalled bodies: an 8 MB body declared, 10 bytes sent.
  attackers.emplace_back([&] {
    while (!stop) {
      std::vector<std::unique_ptr<RawSocket>> socks;
      for (int i = 0; i < 40; ++i) {
        socks.push_back(std::make_unique<RawSocket>(port_));
        socks.back()->Send(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/json\r\nContent-Length: 8000000\r\n\r\n"
            "{\"messages");
      }
      const auto end = Clock::now() + 3500ms;
      while (!stop && Clock::now() < end) std::this_thread::sleep_for(50ms);
      for (auto& s : socks) stalled_closed += s->Closed();
    }
  });
  // Oversize prompts: 6 MB of text, refused from their length.
  attackers.emplace_back([&] {
    const std::string body = R"({"messages":[{"role":"user","content":")" +
                             std::string(6 << 20, 'z') + R"("}]})";
    while (!stop) {
      HttpResponse r = Http(port_, "POST", "/v1/chat/completions", body);
      if (r.status >= 500) attack_5xx++;
      oversize_refused += r.status == 400;
    }
  });
  // Thousands of messages: the template's work grows with them, bounded by
  // its budget; the answer is 200 or 400, never a stall or a 5xx.
  attackers.emplace_back([&] {
    std::string body = R"({"max_tokens":1,"messages":[)";
    for (int i = 0; i < 5000; ++i)
      body += std::string(i ? "," : "") +
              R"({"role":"user","content":"aaaaaaaaaaaaaaaaaaaa"})";
    body += "]}";
    while (!stop) {
      HttpResponse r = Http(port_, "POST", "/v1/chat/completions", body);
      if (r.status >= 500) attack_5xx++;
      many_messages_answered += r.status == 200 || r.status == 400;
    }
  });
  // /tokenize with pieces, never read.
  attackers.emplace_back([&] {
    const std::string content(1 << 20, 'q');
    const std::string body =
        R"({"content":")" + content + R"(","with_pieces":true})";
    while (!stop) {
      std::vector<std::unique_ptr<RawSocket>> socks;
      for (int i = 0; i < 4; ++i) {
        socks.push_back(std::make_unique<RawSocket>(port_));
        socks.back()->Send(
            "POST /tokenize HTTP/1.1\r\nHost: x\r\n"
            "Content-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body);
      }
      const auto end = Clock::now() + 4s;
      while (!stop && Clock::now() < end) std::this_thread::sleep_for(50ms);
      for (auto& s : socks) tokenize_closed += s->Closed();
    }
  });

  std::vector<double> attacked;
  int normal_failures = 0;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  for (int i = 0; Clock::now() < end; ++i) {
    const double ms = Normal(i);
    if (ms < 0) {
      ++normal_failures;
    } else {
      attacked.push_back(ms);
    }
    EXPECT_EQ(Http(port_, "GET", "/livez").status, 200);
  }
  stop = true;
  for (auto& t : attackers) t.join();

  const double quiet_p99 = Percentile(quiet, 0.99);
  const double attacked_p99 = Percentile(attacked, 0.99);
  std::printf(
      "attack: quiet p50 %.2f ms p99 %.2f ms; under attack p50 %.2f ms p99 "
      "%.2f ms (ratio %.2f) over %zu requests; slowloris closed %d, stalled "
      "closed %d, oversize refused %d, many-message answers %d, tokenize "
      "closed %d\n",
      Percentile(quiet, 0.5), quiet_p99, Percentile(attacked, 0.5),
      attacked_p99, attacked_p99 / quiet_p99, attacked.size(),
      slowloris_closed.load(), stalled_closed.load(), oversize_refused.load(),
      many_messages_answered.load(), tokenize_closed.load());

  EXPECT_EQ(normal_failures, 0);
  EXPECT_EQ(server_errors_.load(), 0);
  EXPECT_EQ(attack_5xx.load(), 0);
  EXPECT_GT(attacked.size(), 10u);
  EXPECT_GT(slowloris_closed.load(), 0);
  EXPECT_GT(stalled_closed.load(), 0);
  EXPECT_GT(oversize_refused.load(), 0);
  // Loose: the attackers share this process and its two cores.
  if (!kSanitized) {
    EXPECT_LT(attacked_p99, 4 * quiet_p99 + 250) << "quiet p99 " << quiet_p99;
  }

  // Everything the attack opened is gone again; memory is flat.
  EXPECT_EQ(Http(port_, "GET", "/livez").status, 200);
  const auto settle = Clock::now() + 10s;
  while (OpenFds() > fds_before + 2 && Clock::now() < settle)
    std::this_thread::sleep_for(50ms);
  EXPECT_LE(OpenFds(), fds_before + 2);
  if (!kSanitized) {
    EXPECT_LT(RssBytes() - rss_before, int64_t{150} << 20)
        << "RSS grew by " << (RssBytes() - rss_before) / (1 << 20) << " MiB";
  }
}

}  // namespace
}  // namespace redline::server

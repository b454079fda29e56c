// `redline bench` against `redline serve` over loopback, end to end: the
// real load runner, report and JSON writer against the real server with a
// tiny synthetic model. Two ways in:
//   - in-process: InferenceServer on port 0 and bench::RunBenchCommand (the
//     whole command, flags struct in, exit code out);
//   - subprocess: the built `redline` binary running
//     `redline bench --cold-start 'redline serve ...'`, which also covers the
//     cold-start path (launch, readiness polling, process-group stop) and the
//     exit codes as a shell sees them.
// Assertions are about behaviour (counts, token sources, exit codes, schema,
// TTFT <= E2E), never about absolute timing, so a loaded 2-core machine
// cannot make them flaky; every run is a few seconds at most.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "bench/command.h"
#include "bench/report.h"
#include "model/arch/synthetic.h"
#include "server/server.h"
#include "server/startup.h"

namespace redline {
namespace {

namespace json = boost::json;

constexpr int kMaxTokens = 8;
constexpr const char* kPercentiles[] = {"min", "p50",   "p90", "p95",
                                        "p99", "p99.9", "max"};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json::value ParseJson(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << "not JSON: " << text.substr(0, 200);
  return v;
}

// A port that was free a moment ago (the subprocess server binds it next).
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs a shell command; returns its exit status (-1 when it did not exit).
int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class BenchAgainstServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_bench_e2e_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_path_ = (dir_ / "tiny.gguf").string();
    auto spec = model::SyntheticPreset("tiny");
    ASSERT_TRUE(spec.ok());
    ThreadPool pool(2);
    ASSERT_TRUE(model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 42,
                                           model_path_, pool)
                    .ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  void SetUp() override {
    null_ = std::fopen("/dev/null", "w");
    ASSERT_NE(null_, nullptr);
  }

  void TearDown() override {
    if (server_) {
      server_->Shutdown();
      server_->Wait();
      server_.reset();
    }
    std::fclose(null_);
  }

  // The in-process server; returns its port (0 on failure).
  uint16_t StartServer() {
    server::ServerConfig c;
    c.model_paths = {model_path_};
    c.port = 0;
    c.threads = 1;
    c.parallel = 4;
    c.shutdown_grace_s = 5;
    EXPECT_TRUE(server::FinalizeConfig(&c).ok());
    server_ = std::make_unique<server::InferenceServer>(std::move(c));
    auto port = server_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    if (!port.ok()) return 0;
    // The model loads in the background; bench without --cold-start expects
    // a ready target. Bounded poll.
    const auto limit =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (server_->startup().phase != server::Phase::kReady) {
      if (server_->startup().phase == server::Phase::kFailed ||
          std::chrono::steady_clock::now() > limit) {
        ADD_FAILURE() << "server not ready: " << server_->startup().error;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return *port;
  }

  // Closed loop, pinned output length (ignore_eos + min_tokens), so the
  // server's usage must report exactly kMaxTokens per request.
  bench::BenchCommandOptions Options(uint16_t port, const std::string& name) {
    bench::BenchCommandOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(port);
    o.users = 2;
    o.requests = 12;
    o.cold_requests = 1;
    o.max_tokens = kMaxTokens;
    o.pin_output_length = true;
    o.temperature = 0;
    o.quiet = true;
    // Dispatch delay has its own checks; a loaded machine must not turn a
    // scheduling hiccup into exit 100 here.
    o.max_dispatch_delay = "1s";
    o.json_path = (dir_ / (name + ".json")).string();
    o.requests_out = (dir_ / (name + ".jsonl")).string();
    return o;
  }

  static inline std::filesystem::path dir_;
  static inline std::string model_path_;
  std::unique_ptr<server::InferenceServer> server_;
  std::FILE* null_ = nullptr;
};

// Checks the documented schema (docs/BENCH_JSON.md) and what a passing run
// against Redline's server must show: every request ok, token counts from the
// server's usage and equal to max_tokens, TTFT <= E2E at every percentile.
void CheckPassingResult(const json::value& v, int64_t requests) {
  ASSERT_TRUE(v.is_object());
  const json::object& o = v.as_object();
  EXPECT_EQ(o.at("schema").as_string(), "redline.bench.result/2");
  for (const char* field :
       {"tool", "started_at", "config", "method", "phases", "goodput_slo_us",
        "thresholds", "validity", "verdict", "verdict_reason", "exit_code",
        "warnings", "client", "timeseries", "cdf", "tasks", "abort"}) {
    EXPECT_TRUE(o.contains(field)) << "missing top-level field " << field;
  }
  EXPECT_TRUE(o.at("abort").is_null());
  EXPECT_EQ(o.at("verdict").as_string(), "pass")
      << o.at("verdict_reason").as_string();
  EXPECT_EQ(o.at("exit_code").as_int64(), 0);
  EXPECT_TRUE(o.at("validity").at("valid").as_bool());
  for (const json::value& t : o.at("thresholds").as_array())
    EXPECT_TRUE(t.at("pass").as_bool()) << json::serialize(t);

  const json::value& m = o.at("phases").at("measure");
  const json::value& req = m.at("requests");
  EXPECT_EQ(req.at("attempted").as_int64(), requests);
  EXPECT_EQ(req.at("sent").as_int64(), requests);
  EXPECT_EQ(req.at("ok").as_int64(), requests);
  EXPECT_EQ(req.at("failed").as_int64(), 0);
  EXPECT_EQ(m.at("errors").at("all").at("count").as_int64(), 0);
  const json::value& tokens = m.at("tokens");
  EXPECT_EQ(tokens.at("sources").at("usage").as_int64(), requests);
  EXPECT_EQ(tokens.at("sources").at("chunks").as_int64(), 0);
  EXPECT_FALSE(tokens.at("mixed").as_bool());
  EXPECT_EQ(tokens.at("output_total").as_int64(), requests * kMaxTokens);

  const json::value& lat = m.at("latency_us");
  for (const char* metric :
       {"ttft", "ttfo", "ttft_sched", "e2e", "e2e_stream", "e2e_sched", "tpot",
        "ntpot", "itl", "dispatch_delay"}) {
    ASSERT_TRUE(lat.as_object().contains(metric)) << metric;
    EXPECT_TRUE(lat.at(metric).as_object().contains("success")) << metric;
  }
  EXPECT_EQ(lat.at("e2e").at("success").at("count").as_int64(), requests);
  EXPECT_EQ(lat.at("e2e").at("adjusted").at("infinite").as_int64(), 0);
  // kMaxTokens chunks per request: kMaxTokens - 1 gaps each.
  EXPECT_EQ(lat.at("itl").at("success").at("count").as_int64(),
            requests * (kMaxTokens - 1));
  for (const char* p : kPercentiles) {
    const double ttft = lat.at("ttft").at("success").at(p).to_number<double>();
    const double e2e = lat.at("e2e").at("success").at(p).to_number<double>();
    EXPECT_GT(ttft, 0) << p;
    EXPECT_LE(ttft, e2e) << p;
    // Schedule-relative latencies include the dispatch delay: never smaller.
    EXPECT_LE(e2e, lat.at("e2e_sched").at("success").at(p).to_number<double>())
        << p;
  }
}

// Every measured request in the per-request file: ok, usage-sourced count
// equal to max_tokens, one chunk per token, ordered timestamps.
void CheckRequestsFile(const std::string& path, int64_t requests) {
  std::ifstream f(path);
  std::string line;
  int64_t measured = 0;
  while (std::getline(f, line)) {
    json::value r = ParseJson(line);
    if (r.at("phase").as_string() != "measure") continue;
    measured++;
    EXPECT_EQ(r.at("class").as_string(), "ok") << line;
    EXPECT_EQ(r.at("status").as_int64(), 200);
    EXPECT_EQ(r.at("token_source").as_string(), "usage");
    EXPECT_EQ(r.at("output_tokens").as_int64(), kMaxTokens);
    EXPECT_EQ(r.at("chunk_ns").as_array().size(),
              static_cast<size_t>(kMaxTokens));
    EXPECT_TRUE(r.at("done").as_bool());
    EXPECT_TRUE(r.at("finish").as_bool());
    EXPECT_GT(r.at("prompt_tokens").as_int64(), 0);
    const int64_t sched = r.at("t_sched_ns").as_int64(),
                  send = r.at("t_send_ns").as_int64();
    const int64_t first = r.at("t_first_ns").as_int64(),
                  last = r.at("t_last_ns").as_int64();
    EXPECT_LE(sched, send);
    EXPECT_LT(send, first);
    EXPECT_LE(first, last);
    EXPECT_LE(last, r.at("t_end_ns").as_int64());
  }
  EXPECT_EQ(measured, requests);
}

TEST_F(BenchAgainstServerTest, InProcessPassingRunUsesServerUsage) {
  const uint16_t port = StartServer();
  ASSERT_NE(port, 0);
  bench::BenchCommandOptions o = Options(port, "pass");
  // Open loop on a constant schedule: exactly 40 arrivals in 1 s.
  o.users = 0;
  o.requests = -1;
  o.rate = "40";
  o.arrival = "constant";
  o.duration = "1s";
  o.slo = {"errors: rate<1%", "ttft: p(50)<60s", "e2e: max<60s"};
  ASSERT_EQ(bench::RunBenchCommand(o, nullptr, null_, null_), bench::kExitPass);
  const json::value v = ParseJson(ReadFile(o.json_path));
  CheckPassingResult(v, 40);
  EXPECT_EQ(
      v.at("phases").at("measure").at("requests").at("planned").as_int64(), 40);
  // The cold phase is the first request alone, reported apart.
  EXPECT_EQ(v.at("phases").at("cold").at("requests").at("ok").as_int64(), 1);
  CheckRequestsFile(o.requests_out, 40);
}

TEST_F(BenchAgainstServerTest, InProcessImpossibleSloExitsSloFailed) {
  const uint16_t port = StartServer();
  ASSERT_NE(port, 0);
  bench::BenchCommandOptions o = Options(port, "fail");
  o.requests = 4;
  o.slo = {"ttft: p(50)<1us"};
  ASSERT_EQ(bench::RunBenchCommand(o, nullptr, null_, null_),
            bench::kExitSloFailed);
  const json::value v = ParseJson(ReadFile(o.json_path));
  EXPECT_EQ(v.at("verdict").as_string(), "fail");
  EXPECT_EQ(v.at("exit_code").as_int64(), bench::kExitSloFailed);
  ASSERT_EQ(v.at("thresholds").as_array().size(), 1u);
  EXPECT_FALSE(v.at("thresholds").at(0).at("pass").as_bool());
  // The run itself was fine: the failure is the SLO, not the requests.
  EXPECT_EQ(v.at("phases").at("measure").at("requests").at("ok").as_int64(), 4);
}

// `--scrape` of Redline's own /metrics: its names (redline_ prefix) fill the
// curated server view of the report, including the server-side TTFT and E2E
// percentiles from its histogram buckets.
TEST_F(BenchAgainstServerTest, ScrapedRedlineMetricsFillTheCuratedServerView) {
  const uint16_t port = StartServer();
  ASSERT_NE(port, 0);
  bench::BenchCommandOptions o = Options(port, "scrape");
  // Several scrapes (one a second): rates and bucket deltas need two. Long
  // outputs and no think time keep requests in the server's slots when it
  // is scraped (an 8-token request takes well under a millisecond).
  o.requests = -1;
  o.duration = "3s";
  o.users = 4;
  o.max_tokens = 64;
  o.scrape = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  o.html_path = (dir_ / "scrape.html").string();
  ASSERT_EQ(bench::RunBenchCommand(o, nullptr, null_, null_), bench::kExitPass);
  const json::value v = ParseJson(ReadFile(o.json_path));
  const json::object& server = v.at("scrape").at("server").as_object();
  std::set<std::string> panels;
  for (const json::value& p : server.at("panels").as_array())
    panels.insert(std::string(p.at("id").as_string()));
  // Counters and histograms move under load; so do CPU and RSS readings.
  for (const char* id : {"tokens", "ttft", "e2e", "cpu", "rss"})
    EXPECT_TRUE(panels.count(id)) << id << " in " << json::serialize(server);
  // The slot gauges may read the same at every scrape (4 users on 4 slots:
  // always 4 running); then they are listed as constant instead.
  const std::string constant = json::serialize(server.at("constant"));
  EXPECT_TRUE(panels.count("requests") ||
              constant.find("redline_num_requests_running") !=
                  std::string::npos)
      << json::serialize(server);
  EXPECT_GT(server.at("ttft_p50_us").to_number<double>(), 0);
  EXPECT_LE(server.at("ttft_p50_us").to_number<double>(),
            server.at("e2e_p99_us").to_number<double>());
  const std::string html = ReadFile(o.html_path);
  EXPECT_NE(html.find("id=\"server-ttft\""), std::string::npos);
  EXPECT_NE(html.find("redline_time_to_first_token_seconds"),
            std::string::npos);
}

// The shipped binary, as CI would call it: bench launches the server itself
// (cold start), measures, stops it, and exits 0 or 99 by the SLO.
TEST_F(BenchAgainstServerTest, SubprocessColdStartPassAndSloFailExitCodes) {
  const std::string redline = RL_REDLINE_BIN;
  ASSERT_TRUE(std::filesystem::exists(redline)) << redline;
  const std::string log = (dir_ / "server.log").string();
  auto command = [&](uint16_t port, const std::string& slo,
                     const std::string& json_path) {
    const std::string serve = redline + " serve -m " + model_path_ +
                              " --port " + std::to_string(port) +
                              " --threads 1 --parallel 2";
    return redline + " bench --cold-start '" + serve +
           "' --url http://127.0.0.1:" + std::to_string(port) +
           " --ready-timeout 60s --users 2 --requests 6 --max-tokens " +
           std::to_string(kMaxTokens) +
           " --pin-output-length --temperature 0 --max-dispatch-delay 1s --slo "
           "'" +
           slo + "' --json " + json_path + " --server-log " + log +
           " -q > /dev/null 2>> " + log + ".bench";
  };

  const std::string pass_json = (dir_ / "sub_pass.json").string();
  uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  ASSERT_EQ(Shell(command(port, "errors: rate<1%", pass_json)),
            bench::kExitPass)
      << ReadFile(log + ".bench");
  const json::value v = ParseJson(ReadFile(pass_json));
  CheckPassingResult(v, 6);
  const json::value& cold = v.at("cold_start");
  ASSERT_TRUE(cold.is_object());
  EXPECT_TRUE(cold.at("ready").as_bool());
  EXPECT_GT(cold.at("time_to_ready_s").to_number<double>(), 0);
  EXPECT_EQ(v.at("phases").at("cold").at("requests").at("ok").as_int64(), 1);

  const std::string fail_json = (dir_ / "sub_fail.json").string();
  port = FreePort();
  ASSERT_NE(port, 0);
  EXPECT_EQ(Shell(command(port, "ttft: p(50)<1us", fail_json)),
            bench::kExitSloFailed)
      << ReadFile(log + ".bench");
  EXPECT_EQ(ParseJson(ReadFile(fail_json)).at("verdict").as_string(), "fail");
}

}  // namespace
}  // namespace redline

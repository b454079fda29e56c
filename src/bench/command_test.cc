// The whole `redline bench` command in-process against the fake server:
// exit codes (0 / 99 / 100 / 101), the JSON result schema, compare, and the
// HTML report rendered by headless Chromium.
#include "bench/command.h"

#include <gtest/gtest.h>

#include <array>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench/report.h"
#include "bench/testing/fake_openai_server.h"
#include "http/event_loop.h"
#include "http/server.h"

namespace redline::bench {
namespace {

namespace json = boost::json;
using testing::FakeOpenAiServer;
using testing::FakeServerOptions;

class BenchCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/redline_bench_cmd_" +
           std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    null_ = std::fopen("/dev/null", "w");
  }
  void TearDown() override {
    std::fclose(null_);
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<FakeOpenAiServer> Server(int64_t ttft_us, int64_t gap_us,
                                           int tokens) {
    FakeServerOptions o;
    o.default_plan.ttft_us = ttft_us;
    o.default_plan.gap_us = gap_us;
    o.default_plan.tokens = tokens;
    o.record_truth = false;
    auto s = std::make_unique<FakeOpenAiServer>(o);
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  BenchCommandOptions Options(const FakeOpenAiServer& s) {
    BenchCommandOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(s.port());
    o.users = 4;
    o.requests = 24;
    o.quiet = true;
    // Validity has its own test; elsewhere a loaded CI machine must not turn
    // a scheduling hiccup into exit 100.
    o.max_dispatch_delay = "500ms";
    return o;
  }

  int Run(const BenchCommandOptions& o) {
    return RunBenchCommand(o, nullptr, null_, null_);
  }

  static std::string Read(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::string dir_;
  std::FILE* null_ = nullptr;
};

TEST_F(BenchCommandTest, PassExitsZeroAndWritesTheJsonSchema) {
  auto server = Server(20'000, 2'000, 8);
  BenchCommandOptions o = Options(*server);
  o.profile = "three-second";
  o.slo = {"ttft: p(99)<1s", "errors: rate<1%"};
  o.warmup = "4";
  o.json_path = dir_ + "/r.json";
  o.requests_out = dir_ + "/requests.jsonl";
  EXPECT_EQ(Run(o), kExitPass);

  json::value v = json::parse(Read(o.json_path));
  const json::object& r = v.as_object();
  EXPECT_EQ(r.at("schema").as_string(), "redline.bench.result/2");
  EXPECT_EQ(r.at("verdict").as_string(), "pass");
  EXPECT_EQ(r.at("exit_code").as_int64(), 0);
  const json::object& m = r.at("phases").at("measure").as_object();
  EXPECT_EQ(m.at("requests").at("attempted").as_int64(), 24);
  EXPECT_EQ(m.at("requests").at("ok").as_int64(), 24);
  for (const char* metric : {"ttft", "ttfo", "ttft_sched", "e2e", "e2e_stream",
                             "e2e_sched", "tpot", "ntpot"}) {
    const json::object& d = m.at("latency_us").at(metric).as_object();
    for (const char* view : {"success", "adjusted"}) {
      for (const char* k : {"count", "mean", "min", "p50", "p90", "p95", "p99",
                            "p99.9", "max"}) {
        EXPECT_TRUE(d.at(view).as_object().contains(k))
            << metric << "." << view << "." << k;
      }
    }
  }
  EXPECT_TRUE(m.at("latency_us").at("itl").as_object().contains("success"));
  EXPECT_FALSE(m.at("latency_us").at("itl").as_object().contains("adjusted"));
  for (const char* k : {"connect", "timeout", "http_429", "http_4xx",
                        "http_5xx", "abort", "parse", "all", "by_label"}) {
    EXPECT_TRUE(m.at("errors").as_object().contains(k)) << k;
  }
  for (const char* k :
       {"window_s", "offered_rps", "achieved_send_rps", "completed_rps",
        "output_tps", "peak_output_tps", "mean_concurrency", "goodput_rps",
        "token_goodput_tps", "good_fraction"}) {
    EXPECT_TRUE(m.at("rates").as_object().contains(k)) << k;
  }
  EXPECT_EQ(m.at("tokens").at("sources").at("usage").as_int64(), 24);
  EXPECT_TRUE(r.at("phases").as_object().contains("cold"));
  EXPECT_TRUE(r.at("phases").as_object().contains("warmup"));
  ASSERT_EQ(r.at("thresholds").as_array().size(), 7u);
  for (const json::value& t : r.at("thresholds").as_array()) {
    EXPECT_TRUE(t.at("pass").as_bool()) << json::serialize(t);
    EXPECT_TRUE(t.as_object().contains("observed"));
    EXPECT_TRUE(t.as_object().contains("success_only"));
  }
  EXPECT_TRUE(r.at("validity").at("valid").as_bool());
  const json::object& ts = r.at("timeseries").as_object();
  const size_t n = ts.at("t_s").as_array().size();
  EXPECT_GT(n, 0u);
  for (const char* k : {"sent", "ok", "failed", "output_tps", "in_flight",
                        "ttft_p50_us", "e2e_p99_us"}) {
    EXPECT_EQ(ts.at(k).as_array().size(), n) << k;
  }
  EXPECT_FALSE(r.at("cdf").at("e2e").as_array().empty());

  // The per-request file has one line per request with every timestamp.
  std::istringstream lines(Read(o.requests_out));
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    json::value q = json::parse(line);
    for (const char* k : {"t_sched_ns", "t_send_ns", "t_first_ns", "t_last_ns",
                          "t_end_ns", "chunk_ns", "class"}) {
      EXPECT_TRUE(q.as_object().contains(k)) << k;
    }
    count++;
  }
  EXPECT_EQ(count, 1 + 4 + 24);  // cold + warm-up + measured
}

// A scenario task that sets no length or temperature takes --max-tokens and
// --temperature (as it takes --model); one that sets them keeps its own. A
// chat task's fixed `prompt:` is its user message.
TEST_F(BenchCommandTest, ScenarioTasksDefaultToTheSamplingFlags) {
  FakeServerOptions fo;
  fo.default_plan.tokens = 2;
  auto server = std::make_unique<FakeOpenAiServer>(fo);
  ASSERT_TRUE(server->Start().ok());
  const std::string scenario = dir_ + "/s.yaml";
  std::ofstream(scenario)
      << "tasks:\n"
         "  - {name: plain, weight: 1, prompt: hi}\n"
         "  - {name: own, weight: 1, messages: [{role: user, content: yo}],\n"
         "     max_tokens: 5, temperature: 0.9}\n";
  BenchCommandOptions o = Options(*server);
  o.scenario = scenario;
  o.max_tokens = 7;
  o.temperature = 0;
  o.requests = 16;
  EXPECT_EQ(Run(o), kExitPass);
  int plain = 0, own = 0;
  for (const testing::FakeTruth& t : server->Truths()) {
    json::value v = json::parse(t.body);
    const json::object& b = v.as_object();
    const std::string text = json::serialize(b.at("messages"));
    if (text.find("\"hi\"") != std::string::npos) {
      ++plain;
      EXPECT_EQ(b.at("max_tokens").as_int64(), 7) << t.body;
      EXPECT_EQ(b.at("temperature").to_number<double>(), 0) << t.body;
    } else {
      ++own;
      EXPECT_EQ(b.at("max_tokens").as_int64(), 5) << t.body;
      EXPECT_EQ(b.at("temperature").to_number<double>(), 0.9) << t.body;
    }
  }
  EXPECT_GT(plain, 0);
  EXPECT_GT(own, 0);
}

TEST_F(BenchCommandTest, SloBreachExits99) {
  auto server = Server(50'000, 1'000, 4);
  BenchCommandOptions o = Options(*server);
  o.slo = {"ttft: p(95)<10ms"};
  o.json_path = dir_ + "/r.json";
  EXPECT_EQ(Run(o), kExitSloFailed);
  json::value v = json::parse(Read(o.json_path));
  EXPECT_EQ(v.at("verdict").as_string(), "fail");
  EXPECT_FALSE(v.at("thresholds").as_array()[0].at("pass").as_bool());
}

// Without any threshold, a run in which every request failed (a wrong URL
// path, a server that answers errors) must not pass; a few errors under the
// bound still do.
TEST_F(BenchCommandTest, ABrokenRunNeverPassesWithoutThresholds) {
  FakeServerOptions fo;
  fo.default_plan.tokens = 2;
  fo.default_plan.status = 500;
  fo.record_truth = false;
  FakeOpenAiServer broken(fo);
  ASSERT_TRUE(broken.Start().ok());
  BenchCommandOptions o = Options(broken);
  o.json_path = dir_ + "/broken.json";
  EXPECT_EQ(Run(o), kExitSloFailed);
  json::value v = json::parse(Read(o.json_path));
  EXPECT_EQ(v.at("verdict").as_string(), "fail");
  EXPECT_NE(std::string(v.at("verdict_reason").as_string()).find("failed"),
            std::string::npos)
      << v.at("verdict_reason");

  // 1 error in 40 is 2.5 %: over the default 1 %, under a 5 % bound.
  FakeServerOptions few;
  few.default_plan.tokens = 2;
  few.record_truth = false;
  few.plan_fn = [](uint64_t i, const http::ServerRequest&,
                   const testing::FakePlan& base) {
    testing::FakePlan p = base;
    if (i == 5) p.status = 503;
    return p;
  };
  FakeOpenAiServer flaky(few);
  ASSERT_TRUE(flaky.Start().ok());
  BenchCommandOptions f = Options(flaky);
  f.requests = 40;
  f.users = 1;
  f.cold_requests = 0;
  EXPECT_EQ(Run(f), kExitSloFailed);
  f.max_error_rate = "5%";
  EXPECT_EQ(Run(f), kExitPass);
}

// "200 - parse" or "503 - ..." says little; the first failure of each class
// keeps the start of its body, in the summary and the JSON, and
// --debug-requests N writes the first N exchanges in full.
TEST_F(BenchCommandTest, FirstErrorBodyPerClassAndDebugRequests) {
  FakeServerOptions fo;
  fo.default_plan.tokens = 2;
  fo.record_truth = false;
  fo.plan_fn = [](uint64_t i, const http::ServerRequest&,
                  const testing::FakePlan& base) {
    testing::FakePlan p = base;
    if (i == 3 || i == 8) p.status = 503;
    if (i == 5) p.bad_json_after = 0;
    return p;
  };
  FakeOpenAiServer server(fo);
  ASSERT_TRUE(server.Start().ok());
  BenchCommandOptions o = Options(server);
  o.requests = 12;
  o.users = 1;
  o.cold_requests = 0;
  o.max_error_rate = "50%";
  o.json_path = dir_ + "/r.json";
  o.debug_requests = 2;
  o.debug_file = dir_ + "/debug.jsonl";
  const std::string out_path = dir_ + "/out.txt";
  std::FILE* out = std::fopen(out_path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  RunBenchCommand(o, nullptr, out, null_);
  std::fclose(out);

  const std::string text = Read(out_path);
  EXPECT_NE(text.find("first error of each class:"), std::string::npos) << text;
  EXPECT_NE(text.find("  http_5xx (request "), std::string::npos) << text;
  EXPECT_NE(text.find("  parse (request "), std::string::npos) << text;
  EXPECT_NE(text.find("    body: {\"error\":"), std::string::npos) << text;

  json::value v = json::parse(Read(o.json_path));
  const json::array& first = v.at("first_errors").as_array();
  ASSERT_EQ(first.size(), 2u) << json::serialize(v.at("first_errors"));
  // In the order they happened; one per class even though two were 503s.
  EXPECT_EQ(first[0].at("class").as_string(), "http_5xx");
  EXPECT_EQ(first[0].at("status").as_int64(), 503);
  EXPECT_NE(std::string(first[0].at("body").as_string()).find("\"error\""),
            std::string::npos);
  EXPECT_EQ(first[1].at("class").as_string(), "parse");
  EXPECT_NE(std::string(first[1].at("body").as_string()).find("data:"),
            std::string::npos)
      << first[1];

  std::istringstream lines(Read(o.debug_file));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    json::value d = json::parse(line);
    EXPECT_EQ(d.at("method").as_string(), "POST");
    EXPECT_NE(std::string(d.at("request_body").as_string()).find("messages"),
              std::string::npos);
    EXPECT_EQ(d.at("status").as_int64(), 200);
    EXPECT_NE(
        std::string(d.at("response_body").as_string()).find("data: [DONE]"),
        std::string::npos);
    ++n;
  }
  EXPECT_EQ(n, 2);
}

// The live line says how far the run is: elapsed / planned length, and an
// ETA while it runs (plain lines off a terminal).
TEST_F(BenchCommandTest, ProgressShowsElapsedOfPlannedTime) {
  auto server = Server(0, 0, 2);
  BenchCommandOptions o = Options(*server);
  o.requests = -1;
  o.duration = "1s";
  o.warmup = "0s";
  o.quiet = false;
  const std::string err_path = dir_ + "/err.txt";
  std::FILE* err = std::fopen(err_path.c_str(), "w");
  ASSERT_NE(err, nullptr);
  RunBenchCommand(o, nullptr, null_, err);
  std::fclose(err);
  const std::string text = Read(err_path);
  EXPECT_NE(text.find("s / 1s measure]"), std::string::npos) << text;
}

TEST_F(BenchCommandTest, ErrorsFailThroughErrorAdjustedPercentiles) {
  // Every 10th request fails with 503: success-only p99 looks fine, the
  // error-adjusted p99 is +inf, so e2e p(99)<3s must fail.
  FakeServerOptions fo;
  fo.default_plan.tokens = 2;
  fo.record_truth = false;
  fo.plan_fn = [](uint64_t i, const http::ServerRequest&,
                  const testing::FakePlan& base) {
    testing::FakePlan p = base;
    if (i % 10 == 9) p.status = 503;
    return p;
  };
  FakeOpenAiServer server(fo);
  ASSERT_TRUE(server.Start().ok());
  BenchCommandOptions o = Options(server);
  o.requests = 40;
  o.users = 1;
  o.cold_requests = 0;
  o.slo = {"e2e: p(99)<3s"};
  o.json_path = dir_ + "/r.json";
  EXPECT_EQ(Run(o), kExitSloFailed);
  json::value v = json::parse(Read(o.json_path));
  const json::value& t = v.at("thresholds").as_array()[0];
  EXPECT_EQ(t.at("observed").as_string(), "inf");
  EXPECT_TRUE(t.at("success_only").is_double());
  EXPECT_EQ(v.at("phases")
                .at("measure")
                .at("errors")
                .at("http_5xx")
                .at("count")
                .as_int64(),
            4);
}

TEST_F(BenchCommandTest, ClientThatCannotKeepItsScheduleExits100) {
  // 100 req/s offered, but at most one request in flight and each takes
  // ~50 ms: arrivals queue, dispatch delay explodes, the run is invalid.
  auto server = Server(50'000, 1'000, 2);
  BenchCommandOptions o = Options(*server);
  o.users = 0;
  o.rate = "100";
  o.arrival = "constant";
  o.max_in_flight = 1;
  o.requests = 20;
  o.profile = "three-second";
  o.max_dispatch_delay = "10ms";  // the queue makes it hundreds of ms
  o.json_path = dir_ + "/r.json";
  EXPECT_EQ(Run(o), kExitInvalidRun);
  json::value v = json::parse(Read(o.json_path));
  EXPECT_EQ(v.at("verdict").as_string(), "invalid");
  EXPECT_FALSE(v.at("validity").at("valid").as_bool());
}

// k6 abortOnFail: an open-loop run planned for 30 s stops once the error
// rate has failed past its 300 ms delay; slow requests still in flight are
// cancelled and kept out of the statistics (cooldown). The bound on the
// wall time is loose: it only tells "stopped early" from "ran to the end".
TEST_F(BenchCommandTest, AbortOnFailStopsTheRunAndExits99) {
  FakeServerOptions fo;
  fo.record_truth = false;
  fo.plan_fn = [](uint64_t i, const http::ServerRequest&,
                  const testing::FakePlan& base) {
    testing::FakePlan p = base;
    if (i % 2 == 0) {
      p.status = 503;
    } else {
      p.ttft_us = 20'000'000;  // still running when the run aborts
    }
    return p;
  };
  FakeOpenAiServer server(fo);
  ASSERT_TRUE(server.Start().ok());
  BenchCommandOptions o = Options(server);
  o.users = 0;
  o.requests = -1;
  o.rate = "50";
  o.arrival = "constant";
  o.duration = "30s";
  o.cold_requests = 0;
  o.slo = {"errors: rate<1% abort(300ms)", "e2e: p(50)<60s"};
  o.json_path = dir_ + "/abort.json";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Run(o), kExitSloFailed);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));

  const json::value v = json::parse(Read(o.json_path));
  EXPECT_EQ(v.at("verdict").as_string(), "fail");
  EXPECT_EQ(v.at("exit_code").as_int64(), kExitSloFailed);
  EXPECT_NE(v.at("verdict_reason").as_string().find("aborted early"),
            std::string::npos);
  const json::value& a = v.at("abort");
  ASSERT_TRUE(a.is_object());
  EXPECT_EQ(a.at("threshold").as_string(), "errors: rate<1% abort(300ms)");
  // No total known: failing after its delay.
  EXPECT_FALSE(a.at("certain").as_bool());
  EXPECT_GT(a.at("at_s").to_number<double>(), 0.3);
  EXPECT_GE(a.at("cancelled").as_int64(), 1);
  // Only finished requests count: every measured one is a 503.
  const json::value& req = v.at("phases").at("measure").at("requests");
  EXPECT_GT(req.at("attempted").as_int64(), 0);
  EXPECT_LT(req.at("attempted").as_int64(), 750);
  EXPECT_EQ(req.at("failed").as_int64(), req.at("attempted").as_int64());
  EXPECT_EQ(req.at("planned").as_int64(), req.at("attempted").as_int64());
  EXPECT_EQ(v.at("config").at("display").at("abort_on_fail").as_string(),
            "errors: rate<1% abort(300ms) (delay 0.3s)");
}

// A count can only grow: three 5xx decide "count<3" whatever the delay, and
// --abort-on-fail marks every latency and error threshold.
TEST_F(BenchCommandTest, AbortOnFailFlagStopsAtACertainFailure) {
  FakeServerOptions fo;
  fo.record_truth = false;
  fo.default_plan.status = 503;
  FakeOpenAiServer server(fo);
  ASSERT_TRUE(server.Start().ok());
  BenchCommandOptions o = Options(server);
  o.users = 1;
  o.requests = 500;
  o.slo = {"http_5xx: count<3"};
  o.abort_on_fail = true;
  o.abort_delay = "1h";
  o.json_path = dir_ + "/certain.json";
  EXPECT_EQ(Run(o), kExitSloFailed);
  const json::value v = json::parse(Read(o.json_path));
  ASSERT_TRUE(v.at("abort").is_object());
  EXPECT_TRUE(v.at("abort").at("certain").as_bool());
  EXPECT_LT(
      v.at("phases").at("measure").at("requests").at("attempted").as_int64(),
      500);

  // Without a threshold that can abort, the flag is a tool error.
  o.slo = {"good_fraction: value>=99%"};
  EXPECT_EQ(Run(o), kExitToolError);
}

TEST_F(BenchCommandTest, ToolErrorsExit101) {
  auto server = Server(0, 0, 1);
  BenchCommandOptions o = Options(*server);
  o.slo = {"e2e: p(99)<3"};  // no unit
  EXPECT_EQ(Run(o), kExitToolError);
  o.slo.clear();
  o.profile = "four-second";
  EXPECT_EQ(Run(o), kExitToolError);
  o.profile.clear();
  BenchCommandOptions none = o;
  none.url.clear();
  EXPECT_EQ(Run(none), kExitToolError);
  BenchCommandOptions both = o;
  both.rate = "5";
  EXPECT_EQ(Run(both), kExitToolError);  // --users and --rate together
  server->Stop();
  EXPECT_EQ(Run(o), kExitToolError);  // unreachable at start
}

TEST_F(BenchCommandTest, CompareFlagsRegressions) {
  // One chunk per response: no ITL samples, whose tail is mostly machine noise.
  auto fast = Server(10'000, 0, 1);
  auto slow = Server(80'000, 0, 1);
  BenchCommandOptions a = Options(*fast);
  a.json_path = dir_ + "/a.json";
  BenchCommandOptions b = Options(*slow);
  b.json_path = dir_ + "/b.json";
  ASSERT_EQ(Run(a), kExitPass);
  ASSERT_EQ(Run(b), kExitPass);
  EXPECT_EQ(RunCompareCommand(a.json_path, a.json_path, 0.1, null_, null_),
            kExitPass);
  EXPECT_EQ(RunCompareCommand(a.json_path, b.json_path, 0.1, null_, null_),
            kExitSloFailed);
  EXPECT_EQ(RunCompareCommand(b.json_path, a.json_path, 0.1, null_, null_),
            kExitPass);  // faster is fine
  EXPECT_EQ(
      RunCompareCommand(a.json_path, dir_ + "/missing.json", 0.1, null_, null_),
      kExitToolError);
  auto res = CompareResults(Read(a.json_path), Read(b.json_path), {});
  ASSERT_TRUE(res.ok());
  bool ttft_flagged = false;
  for (const CompareRow& row : res->rows)
    ttft_flagged |= row.metric == "ttft p50 (adjusted)" && row.regression;
  EXPECT_TRUE(ttft_flagged);
}

uint16_t FreePort() {
  // Bind port 0, read the port, release it: good enough for a test.
  http::EventLoop loop;
  http::Server probe(
      loop, {},
      [](http::ServerRequest&&, std::shared_ptr<http::ResponseWriter>) {});
  auto port = probe.Start();
  return port.ok() ? *port : 0;
}

// Pointed at the wrong thing, bench says what is wrong before any load: a
// port nobody listens on (101, unreachable), a server that answers HTML or
// a URL that names an endpoint instead of the API base (100, invalid).
TEST_F(BenchCommandTest, PreflightNamesAWrongTargetBeforeTheLoad) {
  auto run = [&](const std::string& url, std::string* message) {
    BenchCommandOptions o;
    o.url = url;
    o.users = 1;
    o.requests = 4;
    o.quiet = true;
    const std::string err_path = dir_ + "/preflight.txt";
    std::FILE* err = std::fopen(err_path.c_str(), "w");
    const int code = RunBenchCommand(o, nullptr, null_, err);
    std::fclose(err);
    *message = Read(err_path);
    return code;
  };
  std::string message;
  const uint16_t down = FreePort();
  EXPECT_EQ(run("http://127.0.0.1:" + std::to_string(down), &message),
            kExitToolError);
  EXPECT_NE(message.find("not reachable"), std::string::npos) << message;

  http::EventLoop loop;
  http::Server html(
      loop, {},
      [](http::ServerRequest&& r, std::shared_ptr<http::ResponseWriter> w) {
        // A web server: a page for /, an HTML 404 for the rest.
        const int status = r.Path() == "/v1/models" ? 200 : 404;
        w->Respond(status, {{"Content-Type", "text/html"}},
                   "<html><body>Welcome to nginx!</body></html>");
      });
  auto port = html.Start();
  ASSERT_TRUE(port.ok());
  std::thread t([&] { loop.Run(); });
  EXPECT_EQ(run("http://127.0.0.1:" + std::to_string(*port), &message),
            kExitInvalidRun);
  EXPECT_NE(message.find("not an OpenAI models list"), std::string::npos)
      << message;
  EXPECT_NE(message.find("text/html"), std::string::npos) << message;
  EXPECT_EQ(run("http://127.0.0.1:" + std::to_string(*port) + "/api", &message),
            kExitInvalidRun);  // its HTML 404 for /api/models
  EXPECT_NE(message.find("404"), std::string::npos) << message;
  loop.Post([&] {
    html.Stop();
    loop.Stop();
  });
  t.join();

  auto fake = Server(1'000, 1'000, 2);
  EXPECT_EQ(run(fake->BaseUrl() + "/chat/completions", &message),
            kExitInvalidRun);
  EXPECT_NE(message.find("give the API base"), std::string::npos) << message;
  EXPECT_EQ(run(fake->BaseUrl(), &message), kExitPass) << message;
}

TEST_F(BenchCommandTest, ColdStartLaunchesTheServerAndMeasuresTimeToReady) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  BenchCommandOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.cold_start = std::string(RL_FAKE_SERVER_BIN) +
                 " --startup-delay-ms 300 --port " + std::to_string(port) +
                 " --plan 'ttft=5ms;gap=1ms;tokens=4'";
  o.users = 2;
  o.requests = 10;
  o.quiet = true;
  o.json_path = dir_ + "/r.json";
  o.server_log = dir_ + "/server.log";
  o.slo = {"ttft{phase:cold}: max<5s"};
  o.max_dispatch_delay = "500ms";
  const std::string err_path = dir_ + "/stderr.txt";
  std::FILE* err = std::fopen(err_path.c_str(), "w");
  const int code = RunBenchCommand(o, nullptr, null_, err);
  std::fclose(err);
  ASSERT_EQ(code, kExitPass) << Read(err_path) << "\nserver log:\n"
                             << Read(o.server_log);
  json::value v = json::parse(Read(o.json_path));
  const json::object& cs = v.at("cold_start").as_object();
  EXPECT_TRUE(cs.at("ready").as_bool());
  EXPECT_GE(cs.at("time_to_ready_s").as_double(), 0.3);
  EXPECT_LT(cs.at("time_to_ready_s").as_double(), 10.0);
  EXPECT_EQ(v.at("phases").at("cold").at("requests").at("ok").as_int64(), 1);
  EXPECT_TRUE(v.at("thresholds").as_array()[0].at("pass").as_bool());
  // The server was stopped: nothing listens any more.
  BenchCommandOptions after = o;
  after.cold_start.clear();
  after.json_path.clear();
  EXPECT_EQ(Run(after), kExitToolError);

  BenchCommandOptions broken = o;
  broken.cold_start = "exit 3";
  broken.ready_timeout = "5s";
  EXPECT_EQ(Run(broken),
            kExitToolError);  // the process died before it was ready
}

TEST_F(BenchCommandTest, ExpectedRatePeakCheckAndStages) {
  auto server = Server(2'000, 500, 2);
  BenchCommandOptions o = Options(*server);
  o.users = 0;
  o.requests = -1;
  o.expected_rate = 50;  // runs open loop at 60/s
  o.arrival = "constant";
  // Not what this test is about (shared CI machines stall).
  o.max_dispatch_delay = "500ms";
  o.rate_tolerance = "50%";
  o.duration = "2s";
  o.json_path = dir_ + "/r.json";
  EXPECT_EQ(Run(o), kExitPass);
  json::value v = json::parse(Read(o.json_path));
  EXPECT_TRUE(v.at("peak_check").at("pass").as_bool());
  EXPECT_NEAR(v.at("peak_check").at("target_rps").as_double(), 60, 1e-9);
  EXPECT_NEAR(
      v.at("phases").at("measure").at("requests").at("planned").as_int64(), 120,
      1);

  BenchCommandOptions st = Options(*server);
  st.users = 0;
  st.requests = -1;
  st.stages = "1s:20rps,1s:40rps";
  st.arrival = "constant";
  st.max_dispatch_delay = "500ms";
  st.rate_tolerance = "50%";
  st.json_path = dir_ + "/s.json";
  EXPECT_EQ(Run(st), kExitPass);
  json::value s = json::parse(Read(st.json_path));
  EXPECT_EQ(
      s.at("phases").at("measure").at("requests").at("planned").as_int64(), 60);
}

TEST_F(BenchCommandTest, FindMaxRateReportsACapacityCurve) {
  // The server takes ~20 ms per request whatever the load, so every probed
  // rate below the ceiling should pass the e2e SLO.
  FakeServerOptions fo;
  fo.default_plan.ttft_us = 20'000;
  fo.default_plan.tokens = 1;
  fo.record_truth = false;
  FakeOpenAiServer server(fo);
  ASSERT_TRUE(server.Start().ok());
  BenchCommandOptions o = Options(server);
  o.users = 0;
  o.requests = -1;
  o.find_max_rate = true;
  o.probe_users = 8;
  o.duration = "1s";
  o.slo = {"e2e: p(99)<60ms"};
  // Shared CI machines stall threads for milliseconds.
  o.max_dispatch_delay = "50ms";
  o.json_path = dir_ + "/r.json";
  const int code = Run(o);
  EXPECT_TRUE(code == kExitPass || code == kExitSloFailed) << code;
  json::value v = json::parse(Read(o.json_path));
  const json::object& cap = v.at("capacity").as_object();
  EXPECT_GT(cap.at("ceiling_rps").as_double(), 100);  // 8 users / ~21 ms
  EXPECT_GE(cap.at("curve").as_array().size(), 1u);
  if (code == kExitPass) {
    EXPECT_GT(cap.at("capacity_rps").as_double(), 0);
  }
}

// Runs a command and returns its stdout; stderr goes to `err_path`.
std::string Capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  *status = ::pclose(p);
  return out;
}

// The part of `html` from the element with `id` to the end of its figure.
std::string Figure(const std::string& html, const std::string& id) {
  const size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end = html.find("</figure>", at);
  return html.substr(at,
                     end == std::string::npos ? std::string::npos : end - at);
}

// A real run against the fake server exporting a vLLM-style /metrics,
// rendered by headless Chromium: the curated server series are in the DOM,
// the constant ones are counted instead, SLO lines are drawn, no console
// message.
TEST_F(BenchCommandTest,
       HtmlReportRendersInHeadlessChromiumWithoutConsoleErrors) {
  const char* chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium))
    GTEST_SKIP() << "chromium not installed";
  FakeServerOptions fo;
  fo.default_plan.ttft_us = 5'000;
  fo.default_plan.gap_us = 1'000;
  fo.default_plan.tokens = 6;
  fo.record_truth = false;
  fo.metrics_prefix = "vllm:";
  fo.plan_fn = [](uint64_t i, const http::ServerRequest&,
                  const testing::FakePlan& base) {
    testing::FakePlan p = base;
    p.ttft_us += static_cast<int64_t>(i % 5) * 3'000;  // TTFT 5-17 ms
    if (i % 13 == 5) p.status = 429;
    if (i % 17 == 3) p.disconnect_after = 2;
    return p;
  };
  FakeOpenAiServer server(fo);
  ASSERT_TRUE(server.Start().ok());
  BenchCommandOptions o = Options(server);
  // Long enough for several scrapes (one per second): rates and histogram
  // deltas need two. The busy middle stage makes the gauges move (about 3
  // requests in flight against 0.3 in the quiet stages), so they are not
  // dropped as constant.
  o.users = 0;
  o.requests = -1;
  o.stages = "1.5s:20rps,1.5s:200rps,1.5s:20rps";
  o.rate_tolerance = "50%";  // the verdict is not what this test is about
  o.profile = "three-second";
  o.slo = {"ttft: p(99)<50ms"};
  o.html_path = dir_ + "/report.html";
  o.json_path = dir_ + "/report.json";
  o.scrape = "http://127.0.0.1:" + std::to_string(server.port()) + "/metrics";
  const int code = Run(o);
  EXPECT_TRUE(code == kExitPass || code == kExitSloFailed) << code;
  const std::string html = Read(o.html_path);
  EXPECT_EQ(html.find("http://"),
            html.find("http://127.0.0.1"));  // no external resources
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // Keep a copy for people looking at the report by hand.
  if (const char* keep = std::getenv("RL_KEEP_REPORT"))
    std::filesystem::copy_file(
        o.html_path, keep, std::filesystem::copy_options::overwrite_existing);

  const std::string profile = dir_ + "/chromium-profile";
  const std::string err = dir_ + "/chromium.log";
  const std::string cmd =
      std::string("timeout 60 ") + chromium +
      " --headless --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-component-update --disable-sync --no-first-run "
      "--user-data-dir=" +
      profile + " --enable-logging=stderr --v=0 --dump-dom file://" +
      o.html_path + " 2>" + err;
  int status = 0;
  const std::string dom = Capture(cmd, &status);
  if (dom.empty())
    GTEST_SKIP() << "chromium did not start here (status " << status << ")";
  // The charts made it into the rendered DOM.
  size_t svgs = 0, pos = 0;
  while ((pos = dom.find("<svg", pos)) != std::string::npos) {
    svgs++;
    pos++;
  }
  EXPECT_GE(svgs, 12u);
  EXPECT_NE(dom.find("class=\"line\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"verdict\""), std::string::npos);
  EXPECT_NE(dom.find("Cold vs warm"), std::string::npos);
  EXPECT_NE(dom.find("Server metrics"), std::string::npos);
  EXPECT_NE(dom.find("http_429"), std::string::npos);
  // The curated server series, each a chart with a drawn line.
  for (const char* id :
       {"server-requests", "server-kv_cache", "server-tokens", "server-ttft",
        "server-e2e", "server-cpu", "server-rss"}) {
    const std::string fig = Figure(dom, id);
    EXPECT_FALSE(fig.empty()) << id;
    EXPECT_NE(fig.find("class=\"line\""), std::string::npos) << id;
  }
  EXPECT_NE(Figure(dom, "server-tokens").find("data-series=\"generation\""),
            std::string::npos);
  EXPECT_NE(Figure(dom, "server-ttft").find("data-series=\"p99\""),
            std::string::npos);
  EXPECT_NE(Figure(dom, "server-rss").find("MiB"), std::string::npos);
  // Constant series (cache_config_info, process_max_fds) are counted, not
  // drawn.
  const size_t count_at = dom.find("id=\"server-omitted-count\"");
  ASSERT_NE(count_at, std::string::npos);
  const size_t value_at = dom.find("data-count=\"", count_at);
  ASSERT_NE(value_at, std::string::npos);
  EXPECT_GE(std::atoi(dom.c_str() + value_at + 12), 2);
  EXPECT_NE(dom.find("vllm:cache_config_info"), std::string::npos);
  EXPECT_EQ(Figure(dom, "server-others").find("cache_config_info"),
            std::string::npos);
  // SLO lines: the ttft threshold on bench's latency chart and on the
  // server-side TTFT chart.
  EXPECT_NE(Figure(dom, "chart-latency").find("data-slo=\"ttft: p(99)"),
            std::string::npos);
  EXPECT_NE(Figure(dom, "server-ttft").find("class=\"slo"), std::string::npos);
  EXPECT_NE(dom.find("id=\"glossary\""), std::string::npos);
  EXPECT_EQ(dom.find("e+0"), std::string::npos);  // human units on the axes
  // No console messages at all (errors would be "CONSOLE" lines).
  const std::string log = Read(err);
  EXPECT_EQ(log.find("CONSOLE"), std::string::npos) << log.substr(0, 2000);
  EXPECT_EQ(log.find("Uncaught"), std::string::npos);

  // The JSON's structured config and the server summary.
  json::value v = json::parse(Read(o.json_path));
  const json::object& c = v.at("config").as_object();
  EXPECT_EQ(c.at("load").at("model").as_string(), "open");
  EXPECT_EQ(c.at("load").at("stages").as_string(), o.stages);
  EXPECT_TRUE(c.at("load").at("rate_rps").is_null());
  EXPECT_EQ(c.at("input").at("source").as_string(), "prompt");
  EXPECT_FALSE(c.at("argv").as_array().empty());
  const json::object& s = v.at("scrape").at("server").as_object();
  EXPECT_TRUE(s.at("ttft_p50_us").is_number());
}

}  // namespace
}  // namespace redline::bench

// End to end over loopback: bench against fake servers built to have one
// known bottleneck each (few slots, a per-prompt-token prefill cost, a
// decode that slows with concurrency, a client held to one connection)
// must name it; the decomposition must agree with the server's own timing;
// every request carries a traceparent whose trace id the reports list.
// Runs are short and closed-loop (bounded by a request count); the checks
// are on which part dominates, never on tight timings.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/command.h"
#include "bench/decomposition.h"
#include "bench/metrics.h"
#include "bench/runner.h"
#include "bench/testing/fake_openai_server.h"
#include "bench/workload.h"
#include "telemetry/trace_context.h"

namespace redline::bench {
namespace {

namespace json = boost::json;
using testing::FakeOpenAiServer;
using testing::FakePlan;
using testing::FakeServerOptions;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class BottleneckScenarioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/redline_bottleneck_" +
           std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    null_ = std::fopen("/dev/null", "w");
  }
  void TearDown() override {
    std::fclose(null_);
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<FakeOpenAiServer> Server(FakeServerOptions o) {
    auto s = std::make_unique<FakeOpenAiServer>(std::move(o));
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  BenchCommandOptions Options(const FakeOpenAiServer& s, int users,
                              int64_t requests, int64_t max_tokens) {
    BenchCommandOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(s.port());
    o.quiet = true;
    o.users = users;
    o.requests = requests;
    o.max_tokens = max_tokens;
    o.json_path = dir_ + "/r.json";
    o.html_path = dir_ + "/r.html";
    return o;
  }

  // Runs bench; returns the JSON result and keeps the text report.
  json::object Run(const BenchCommandOptions& o) {
    const std::string text_path = dir_ + "/r.txt";
    std::FILE* out = std::fopen(text_path.c_str(), "w");
    RunBenchCommand(o, nullptr, out, null_);
    std::fclose(out);
    text_ = ReadAll(text_path);
    html_ = ReadAll(o.html_path);
    return json::parse(ReadAll(o.json_path)).as_object();
  }

  static std::string Cause(const json::object& r) {
    if (!r.at("bottleneck").is_object()) return "(none)";
    return std::string(r.at("bottleneck").at("cause").as_string());
  }
  // The p99 row's share of one part.
  static double P99Share(const json::object& r, const char* part) {
    const json::array& at = r.at("decomposition").at("at").as_array();
    return at.back().at("shares").at(part).to_number<double>();
  }
  static std::string Explain(const json::object& r) {
    return json::serialize(r.at("bottleneck")) + "\n" +
           json::serialize(r.at("decomposition").at("at"));
  }

  std::string dir_;
  std::FILE* null_ = nullptr;
  std::string text_, html_;
};

TEST_F(BottleneckScenarioTest, FewSlotsIsQueueing) {
  // Two slots, 8 users, 55 ms of service: each request waits for about
  // three others.
  FakeServerOptions so;
  so.slots = 2;
  so.default_plan.ttft_us = 20'000;
  so.default_plan.gap_us = 5'000;
  so.default_plan.tokens = 8;
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 8, 80, 8);
  o.scrape = "http://127.0.0.1:" + std::to_string(s->port()) + "/metrics";
  const json::object r = Run(o);
  EXPECT_EQ(Cause(r), "queueing") << Explain(r);
  EXPECT_GT(P99Share(r, "queue"), 0.4) << Explain(r);
  // The scrape confirmed it: the evidence names the slot limit.
  const std::string evidence =
      json::serialize(r.at("bottleneck").at("evidence"));
  EXPECT_NE(evidence.find("limit"), std::string::npos) << evidence;
  // Shown at the top of the text and in the HTML.
  ASSERT_NE(text_.find("bottleneck ("), std::string::npos) << text_;
  EXPECT_LT(text_.find("bottleneck ("), text_.find("measurement:")) << text_;
  EXPECT_NE(text_.find("where the time goes"), std::string::npos) << text_;
  EXPECT_NE(html_.find("data-cause=\"queueing\""), std::string::npos);
  EXPECT_NE(html_.find("id=\"decomposition-chart\""), std::string::npos);
}

TEST_F(BottleneckScenarioTest, PerPromptTokenCostIsPrefillBound) {
  FakeServerOptions so;
  so.default_plan.ttft_us = 2'000;
  so.default_plan.prefill_ns_per_token = 100'000;  // 0.1 ms a prompt token
  so.default_plan.gap_us = 2'000;
  so.default_plan.tokens = 4;
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 4, 32, 4);
  o.input_tokens = "100..2000";
  const json::object r = Run(o);
  EXPECT_EQ(Cause(r), "prefill") << Explain(r);
  EXPECT_GT(P99Share(r, "prefill"), 0.6) << Explain(r);
  // TTFT follows the prompt length.
  const std::string evidence =
      json::serialize(r.at("bottleneck").at("evidence"));
  EXPECT_NE(evidence.find("prompt length"), std::string::npos) << evidence;
}

TEST_F(BottleneckScenarioTest, DecodeSlowingWithConcurrencyIsDecodeBound) {
  FakeServerOptions so;
  so.default_plan.ttft_us = 2'000;
  so.default_plan.gap_us = 4'000;
  so.default_plan.tokens = 24;
  so.default_plan.gap_growth = 0.5;
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 6, 30, 24);
  const json::object r = Run(o);
  EXPECT_EQ(Cause(r), "decode") << Explain(r);
  EXPECT_GT(P99Share(r, "decode"), 0.6) << Explain(r);
}

TEST_F(BottleneckScenarioTest, OneConnectionForManyUsersIsTheClient) {
  FakeServerOptions so;
  so.default_plan.ttft_us = 10'000;
  so.default_plan.gap_us = 2'000;
  so.default_plan.tokens = 4;
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 8, 40, 4);
  o.max_connections = 1;
  const json::object r = Run(o);
  EXPECT_EQ(Cause(r), "client") << Explain(r);
  EXPECT_GT(P99Share(r, "client"), 0.4) << Explain(r);
}

TEST_F(BottleneckScenarioTest, TimeTheServerDoesNotAccountForIsNetwork) {
  // 40 ms before each answer starts that the server leaves out of its
  // timing (as a slow proxy in front of it would add).
  FakeServerOptions so;
  so.default_plan.unaccounted_us = 40'000;
  so.default_plan.ttft_us = 4'000;
  so.default_plan.gap_us = 2'000;
  so.default_plan.tokens = 4;
  auto s = Server(so);
  const json::object r = Run(Options(*s, 2, 24, 4));
  EXPECT_EQ(Cause(r), "network") << Explain(r);
  EXPECT_GT(P99Share(r, "network"), 0.5) << Explain(r);
}

TEST_F(BottleneckScenarioTest, GatewayShareFromServerTiming) {
  // Non-streaming, so the gateway's share rides in Server-Timing.
  FakeServerOptions so;
  so.default_plan.gateway_us = 30'000;
  so.default_plan.ttft_us = 4'000;
  so.default_plan.gap_us = 1'000;
  so.default_plan.tokens = 4;
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 2, 20, 4);
  o.no_stream = true;
  const json::object r = Run(o);
  EXPECT_EQ(Cause(r), "gateway") << Explain(r);
  EXPECT_TRUE(r.at("decomposition").at("has_gateway").as_bool());
  const json::object& mean = r.at("decomposition").at("mean_ms").as_object();
  EXPECT_NEAR(mean.at("gateway").to_number<double>(), 30, 0.01);
  EXPECT_LT(mean.at("network").to_number<double>(), 15) << Explain(r);
  EXPECT_NE(text_.find("gateway"), std::string::npos);
}

TEST_F(BottleneckScenarioTest, FullKvCacheThatRefusesIsKvBound) {
  // Four requests of ~100 prompt tokens fill a 300-token cache; one in four
  // is refused with 429. Decode dominates every request's time, but the
  // cache is the limit.
  FakeServerOptions so;
  so.kv_capacity_tokens = 300;
  so.plan_fn = [](uint64_t i, const http::ServerRequest&, const FakePlan& b) {
    FakePlan p = b;
    p.ttft_us = 5'000;
    p.gap_us = 10'000;
    p.tokens = 16;
    if (i % 4 == 1) p.status = 429;
    return p;
  };
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 4, 48, 16);
  o.input_tokens = "100";
  o.scrape = "http://127.0.0.1:" + std::to_string(s->port()) + "/metrics";
  const json::object r = Run(o);
  EXPECT_EQ(Cause(r), "kv_cache") << Explain(r);
}

TEST_F(BottleneckScenarioTest, TraceIdsOfTheSlowestRequestsAreListed) {
  FakeServerOptions so;
  so.plan_fn = [](uint64_t i, const http::ServerRequest&, const FakePlan& b) {
    FakePlan p = b;
    p.ttft_us = static_cast<int64_t>(1 + i % 7) * 3'000;
    p.tokens = 3;
    p.gap_us = 1'000;
    return p;
  };
  auto s = Server(so);
  const json::object r = Run(Options(*s, 2, 30, 3));
  const json::object& traces = r.at("traces").as_object();
  EXPECT_TRUE(traces.at("traceparent_sent").as_bool());
  const json::array& slowest = traces.at("slowest").as_array();
  ASSERT_EQ(slowest.size(), 10u);
  // The server saw exactly these trace ids, sampled, one per request.
  std::set<std::string> seen;
  for (const auto& t : s->Truths()) {
    auto ctx = telemetry::ParseTraceparent(t.traceparent);
    ASSERT_TRUE(ctx) << t.traceparent;
    EXPECT_TRUE(ctx->sampled);
    EXPECT_TRUE(seen.insert(ctx->trace_id.Hex()).second);
  }
  for (size_t i = 0; i < slowest.size(); ++i) {
    const std::string id(slowest[i].at("trace_id").as_string());
    EXPECT_TRUE(seen.count(id)) << id;
    // The text lists the five slowest, the HTML all ten.
    if (i < 5) {
      EXPECT_NE(text_.find(id), std::string::npos) << text_;
    }
    EXPECT_NE(html_.find(id), std::string::npos);
  }
  const json::array& pct = traces.at("percentile").as_array();
  ASSERT_EQ(pct.size(), 3u);
  EXPECT_EQ(pct[2].at("label").as_string(), "p99");
  const std::string p99(pct[2].at("trace_id").as_string());
  EXPECT_TRUE(seen.count(p99));
  EXPECT_NE(html_.find(p99), std::string::npos);
}

TEST_F(BottleneckScenarioTest, NoTraceparentSendsNone) {
  auto s = Server(FakeServerOptions{});
  BenchCommandOptions o = Options(*s, 1, 3, 2);
  o.no_traceparent = true;
  const json::object r = Run(o);
  for (const auto& t : s->Truths()) EXPECT_EQ(t.traceparent, "");
  EXPECT_FALSE(r.at("traces").at("traceparent_sent").as_bool());
}

TEST_F(BottleneckScenarioTest, SearchNamesTheKneeOfEachSlo) {
  // Two slots of 20 ms: about 100 req/s flat out.
  FakeServerOptions so;
  so.slots = 2;
  so.default_plan.ttft_us = 20'000;
  so.default_plan.tokens = 1;
  auto s = Server(so);
  BenchCommandOptions o = Options(*s, 0, -1, 1);
  o.users = 0;
  o.requests = -1;
  o.find_max_rate = true;
  o.probe_users = 16;
  o.duration = "300ms";
  o.warmup = "300ms";
  o.max_dispatch_delay = "200ms";
  o.rate_tolerance = "50%";
  o.slo = {"e2e: p(99)<100ms"};
  o.min_samples = 30;
  const json::object r = Run(o);
  ASSERT_TRUE(r.at("bottleneck").is_object());
  const json::array& knees = r.at("bottleneck").at("knees").as_array();
  ASSERT_EQ(knees.size(), 1u) << Explain(r);
  EXPECT_EQ(knees[0].at("threshold").as_string(), "e2e: p(99)<100ms");
  if (knees[0].at("breaks_rps").is_number()) {
    // What breaks first above capacity is the queue for the two slots.
    EXPECT_EQ(Cause(r), "queueing") << Explain(r);
    EXPECT_NE(text_.find("knee:"), std::string::npos);
  }
}

// The decomposition against the fake server's true timing, streamed and
// not: one slot and two users, so about half of each request is queueing.
void CheckAgainstTruth(bool stream) {
  FakeServerOptions so;
  so.slots = 1;
  so.default_plan.ttft_us = 30'000;
  so.default_plan.gap_us = 10'000;
  so.default_plan.tokens = 5;
  FakeOpenAiServer server(so);
  ASSERT_TRUE(server.Start().ok());
  TaskSpec task;
  task.messages = {{"user", "hello"}};
  task.sampling.max_tokens = 5;
  task.stream = stream;
  auto w = Workload::Create({task}, "fake",
                            http::ParseUrl(server.BaseUrl())->target, 1);
  ASSERT_TRUE(w.ok());
  RunConfig cfg;
  cfg.base_url = server.BaseUrl();
  cfg.mode = RunConfig::Mode::kClosed;
  cfg.users = 2;
  cfg.max_requests = 16;
  cfg.cold_requests = 0;
  auto run = RunLoad(cfg, **w);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  std::map<std::string, testing::FakeTruth> truth;
  for (const auto& t : server.Truths())
    truth[telemetry::ParseTraceparent(t.traceparent)->trace_id.Hex()] = t;
  int checked = 0;
  std::map<Part, std::vector<double>> parts;
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.ok()) << r.error_detail;
    ASSERT_TRUE(truth.count(r.trace_id)) << r.trace_id;
    const testing::FakeTruth& t = truth[r.trace_id];
    // What bench read is what the server sent (3 decimals on the wire).
    EXPECT_NEAR(r.server_queue_ms, t.queue_ms, 0.001);
    EXPECT_NEAR(r.server_prefill_ms, t.prefill_ms, 0.001);
    EXPECT_NEAR(r.server_decode_ms, t.decode_ms, 0.001);
    auto d = Decompose(r);
    ASSERT_TRUE(d);
    // The parts add up to bench's own e2e_sched.
    double sum = 0;
    for (double v : d->part_ms) sum += v;
    const RequestLatencies lat = ComputeLatencies(r);
    EXPECT_NEAR(sum * 1000, static_cast<double>(*lat.e2e_sched_us), 1.5);
    // The server's parts are the plan's, give or take a late timer (never
    // early: a late first chunk shortens decode, whose chunks keep their
    // absolute schedule, but not the two together), and what is left for
    // the network is never negative beyond rounding on loopback.
    const auto part = [&](Part p) { return d->part_ms[static_cast<int>(p)]; };
    EXPECT_GE(part(Part::kPrefill), 29);
    EXPECT_GE(part(Part::kPrefill) + part(Part::kDecode), 69);
    EXPECT_GT(part(Part::kNetwork), -1);
    for (Part p : kAllParts) parts[p].push_back(part(p));
    checked++;
  }
  EXPECT_EQ(checked, 16);
  // Upper bounds on the median: a stalled timer on a busy machine can make
  // one request late, but not half of them; counting the queue in a server
  // part would add a whole service time (70 ms).
  auto median = [&](Part p) {
    std::vector<double> v = parts[p];
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  EXPECT_LT(median(Part::kPrefill), 30 + 25);
  EXPECT_LT(median(Part::kDecode), 40 + 25);
  EXPECT_LT(median(Part::kNetwork), 25);
  EXPECT_LT(median(Part::kClient), 25);
  // The second user waits for the first one's service: most requests queue
  // for close to a whole service time (70 ms).
  const Decomposition d = BuildDecomposition(run->records, run->start_ns, 1);
  EXPECT_EQ(d.decomposed, 16);
  EXPECT_GT(d.mean_ms[static_cast<int>(Part::kQueue)], 30);
  EXPECT_LT(d.mean_ms[static_cast<int>(Part::kQueue)], 100);
}

TEST(DecompositionTruthTest, StreamedAgreesWithTheServer) {
  CheckAgainstTruth(true);
}

TEST(DecompositionTruthTest, NonStreamedAgreesWithTheServer) {
  CheckAgainstTruth(false);
}

}  // namespace
}  // namespace redline::bench

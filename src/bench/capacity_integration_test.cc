// The capacity search against the fake server's slot model (c slots, a
// fixed service time, first come first served): with Poisson arrivals the
// server is an M/D/c queue whose capacity at a latency SLO is computed
// here by simulating that queue, independently of the search. Steps are
// short (fast service, a few hundred samples), so each test takes seconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/command.h"
#include "bench/report.h"
#include "bench/testing/fake_openai_server.h"

namespace redline::bench {
namespace {

namespace json = boost::json;
using testing::FakeOpenAiServer;
using testing::FakeServerOptions;

// q-quantile of the response time (wait + service) of an M/D/c queue at
// arrival rate `rate` (per second), service `service_s`, by simulation.
double MdcQuantile(double rate, int c, double service_s, double q,
                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::priority_queue<double, std::vector<double>, std::greater<>> free;
  for (int i = 0; i < c; ++i) free.push(0);
  constexpr int kCustomers = 200'000;
  std::vector<double> t(kCustomers);
  double now = 0;
  for (int i = 0; i < kCustomers; ++i) {
    now += gap(rng);
    const double start = std::max(now, free.top());
    free.pop();
    free.push(start + service_s);
    t[static_cast<size_t>(i)] = start + service_s - now;
  }
  // Drop the first 10 % (the empty start).
  std::vector<double> tail(t.begin() + kCustomers / 10, t.end());
  const auto k = static_cast<size_t>(q * static_cast<double>(tail.size()));
  std::nth_element(tail.begin(), tail.begin() + static_cast<long>(k),
                   tail.end());
  return tail[k];
}

// The highest rate whose q-quantile response time stays below `limit_s`.
double MdcCapacity(int c, double service_s, double q, double limit_s) {
  double lo = 0, hi = c / service_s;
  for (int i = 0; i < 30; ++i) {
    const double mid = (lo + hi) / 2;
    (MdcQuantile(mid, c, service_s, q, 99) < limit_s ? lo : hi) = mid;
  }
  return lo;
}

class CapacitySearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/redline_capacity_" +
           std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    null_ = std::fopen("/dev/null", "w");
  }
  void TearDown() override {
    std::fclose(null_);
    std::filesystem::remove_all(dir_);
  }

  static std::unique_ptr<FakeOpenAiServer> SlotServer(int slots,
                                                      int64_t service_us) {
    FakeServerOptions o;
    o.slots = slots;
    o.default_plan.ttft_us = service_us;
    o.default_plan.tokens = 1;
    auto s = std::make_unique<FakeOpenAiServer>(o);
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  BenchCommandOptions Options(const FakeOpenAiServer& s) {
    BenchCommandOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(s.port());
    o.quiet = true;
    o.find_max_rate = true;
    o.probe_users = 32;
    o.duration = "300ms";
    o.warmup = "500ms";
    o.max_tokens = 1;
    // A loaded CI machine stalls threads for milliseconds; that must not
    // turn steps invalid.
    o.max_dispatch_delay = "200ms";
    o.rate_tolerance = "50%";
    o.json_path = dir_ + "/r.json";
    return o;
  }

  json::object RunJson(const BenchCommandOptions& o, int* code) {
    *code = RunBenchCommand(o, nullptr, null_, null_);
    std::ifstream f(o.json_path);
    std::stringstream ss;
    ss << f.rdbuf();
    json::value v = json::parse(ss.str());
    return v.at("capacity").as_object();
  }

  // One line per step, for failure messages.
  static std::string Steps(const json::object& cap) {
    std::string out;
    for (const json::value& step : cap.at("curve").as_array()) {
      const json::object& p = step.as_object();
      out +=
          std::to_string(p.at("offered_rps").as_double()) + "/s sent " +
          std::to_string(p.at("sent").as_int64()) + " p95check " +
          (p.at("checks").as_array().empty()
               ? std::string()
               : json::serialize(p.at("checks").as_array()[0].at("estimate"))) +
          " " + std::string(p.at("verdict").as_string()) + " " +
          std::string(p.at("reason").as_string()) + "\n";
    }
    return out;
  }

  static void ExpectIsolatedSteps(const json::object& cap,
                                  int64_t min_samples) {
    for (const json::value& step : cap.at("curve").as_array()) {
      const json::object& p = step.as_object();
      EXPECT_LE(p.at("completed").as_int64(), p.at("sent").as_int64());
      EXPECT_LE(p.at("completed_rps").as_double(),
                p.at("sent_rps").as_double() + 1e-9);
      EXPECT_GE(p.at("tail_s").as_double(), 0);
      // No percentile verdict below the sample floor.
      for (const json::value& c : p.at("checks").as_array()) {
        const json::object& k = c.as_object();
        const std::string kv(k.at("verdict").as_string());
        if (kv == "pass" || kv == "fail") {
          EXPECT_GE(k.at("estimate").at("n").as_int64(), min_samples);
        }
      }
    }
  }

  std::string dir_;
  std::FILE* null_ = nullptr;
};

TEST_F(CapacitySearchTest, RangeContainsTheKnownCapacityOfAnMdcServer) {
  // 16 slots of 20 ms: ceiling 800/s. SLO e2e p(95) < 40 ms, a p95 wait
  // below one service time; the truth is near 92 % utilisation, where the
  // latency curve is steep, so a few ms of client-side noise moves it
  // little.
  constexpr int kSlots = 16;
  constexpr double kServiceS = 0.020;
  const double truth = MdcCapacity(kSlots, kServiceS, 0.95, 0.040);
  // The client, the loopback and a loaded machine add latency of their own
  // (a few ms at p95 on a busy CI host): the truth for a 6 ms tighter limit
  // bounds how far that can move the answer down.
  const double truth_tight = MdcCapacity(kSlots, kServiceS, 0.95, 0.034);
  // A loaded CI machine can stall the loop threads for tens of
  // milliseconds, which reads as latency; a search whose range misses is
  // run once more with another seed, and two misses in a row fail.
  for (uint64_t seed : {3, 11}) {
    std::string miss;
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto server = SlotServer(kSlots, 20'000);
      BenchCommandOptions o = Options(*server);
      o.slo = {"e2e: p(95)<40ms"};
      o.min_samples = 200;
      // Near 92 % utilisation the queue takes about a second to settle
      // from empty; a shorter warm-up would read a lower latency.
      o.warmup = "1s";
      o.seed = seed + 1000 * static_cast<uint64_t>(attempt);
      int code = 0;
      const json::object cap = RunJson(o, &code);
      const double low = cap.at("capacity_rps").as_double();
      const double high = cap.at("capacity_high_rps").as_double();
      ExpectIsolatedSteps(cap, o.min_samples);
      const std::string range(cap.at("range").as_string());
      // A range, with its confidence, that holds the truth; a miss (no
      // rate passed on a stalled machine, say) is what the retry is for.
      const bool contains = low > 0 && low <= truth * 1.02 &&
                            (high == 0 || high >= truth_tight * 0.98) &&
                            range.find("at 95 %") != std::string::npos;
      miss = contains ? std::string()
                      : "seed " + std::to_string(o.seed) + " truth " +
                            std::to_string(truth) + " (" +
                            std::to_string(truth_tight) + " for 34 ms) range " +
                            std::to_string(low) + "-" + std::to_string(high) +
                            " (" + range + ")\n" + Steps(cap);
      if (contains) break;
    }
    EXPECT_TRUE(miss.empty()) << miss;
  }
}

TEST_F(CapacitySearchTest, RepeatedSearchesReportTheirSpreadAndPlanning) {
  auto server = SlotServer(4, 5'000);  // ceiling 800/s
  BenchCommandOptions o = Options(*server);
  o.slo = {"e2e: p(50)<20ms"};
  o.min_samples = 100;
  o.resolution = "10%";
  o.repeat = 2;
  o.expected_rate = 100;
  o.scrape = "http://127.0.0.1:" + std::to_string(server->port()) + "/metrics";
  o.html_path = dir_ + "/r.html";
  int code = 0;
  const json::object cap = RunJson(o, &code);
  ExpectIsolatedSteps(cap, o.min_samples);
  EXPECT_EQ(cap.at("searches").as_array().size(), 2u);
  EXPECT_GE(cap.at("spread").as_double(), 0);
  // Every request the server received belongs to exactly one step (or a
  // saturation probe): none is counted twice, none is lost between steps.
  int64_t accounted = 0;
  for (const json::value& search : cap.at("searches").as_array())
    accounted += search.at("probe_requests").as_int64();
  for (const json::value& step : cap.at("curve").as_array())
    accounted += step.at("requests").as_int64();
  EXPECT_EQ(static_cast<int64_t>(server->requests()), accounted);
  // Drained between steps: the slot gauges were idle each time.
  for (const json::value& step : cap.at("curve").as_array())
    EXPECT_TRUE(step.at("drained").as_bool());
  const json::object& plan = cap.at("planning").as_object();
  EXPECT_DOUBLE_EQ(plan.at("peak_rps").as_double(), 120);
  if (cap.at("capacity_rps").as_double() >= 120) {
    EXPECT_EQ(plan.at("peak_sustained").as_string(), "yes");
    EXPECT_EQ(plan.at("replicas").as_int64(), 1);
  }
  std::ifstream f(o.html_path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("id=\"capacity-steps\""), std::string::npos);
  EXPECT_NE(ss.str().find("id=\"planning\""), std::string::npos);
}

TEST_F(CapacitySearchTest, StepsShortOfSamplesAreNeitherPassNorFail) {
  auto server = SlotServer(8, 2'000);
  BenchCommandOptions o = Options(*server);
  o.slo = {"e2e: p(99)<1s"};
  o.min_samples = 100'000;  // no step can gather that many
  o.max_step = "200ms";
  o.warmup = "100ms";
  int code = 0;
  const json::object cap = RunJson(o, &code);
  // No capacity: the SLO code, or the invalid-run code when a loaded
  // machine could not send a 200 ms step's rate on time (the send-rate
  // check); never a pass.
  EXPECT_TRUE(code == kExitSloFailed || code == kExitInvalidRun) << code;
  EXPECT_EQ(cap.at("capacity_rps").as_double(), 0);
  for (const json::value& step : cap.at("curve").as_array()) {
    // No percentile verdict; a step can still fail on something that needs
    // no sample size (here: an overloaded ceiling step's growing backlog).
    EXPECT_NE(step.at("verdict").as_string(), "pass") << json::serialize(step);
    for (const json::value& c : step.at("checks").as_array())
      EXPECT_EQ(c.at("verdict").as_string(), "insufficient samples");
    if (step.at("verdict").as_string() == "fail") {
      EXPECT_FALSE(step.at("kept_up").as_bool()) << json::serialize(step);
    }
    EXPECT_LE(step.at("step_s").as_double(), 0.2 + 1e-9);
  }
  bool noted = false;
  for (const json::value& n : cap.at("notes").as_array())
    noted |= std::string(n.as_string()).find("--max-step") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace redline::bench

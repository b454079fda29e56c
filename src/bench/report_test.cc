// Unit tests of the report pieces: human units, the curated server view
// (series choice, constant series, histogram quantiles), SLO lines in the
// HTML, the structured JSON config, compare's config warnings and relative
// floors, and the glossary.
#include "bench/report.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <string>

#include "bench/config_echo.h"
#include "bench/glossary.h"
#include "bench/server_series.h"
#include "bench/units.h"

namespace redline::bench {
namespace {

namespace json = boost::json;

TEST(UnitsTest, FormatsHumanUnitsWithoutExponents) {
  EXPECT_EQ(FormatCompact(2e7), "20M");
  EXPECT_EQ(FormatCompact(1234), "1.23k");
  EXPECT_EQ(FormatCompact(999.6), "1k");  // rounding carries into the unit
  EXPECT_EQ(FormatCompact(0), "0");
  EXPECT_EQ(FormatCompact(0.5), "0.5");
  EXPECT_EQ(FormatCompact(-2500), "-2.5k");
  EXPECT_EQ(FormatCompact(3.2e9), "3.2G");
  EXPECT_EQ(FormatBytes(20.0 * 1024 * 1024), "20MiB");
  EXPECT_EQ(FormatBytes(1536), "1.5KiB");
  EXPECT_EQ(FormatBytes(3.0 * 1024 * 1024 * 1024), "3GiB");
  EXPECT_EQ(FormatBytes(512), "512B");
  EXPECT_EQ(FormatSeconds(0), "0s");
  EXPECT_EQ(FormatSeconds(0.25), "250ms");
  EXPECT_EQ(FormatSeconds(12), "12s");
  EXPECT_EQ(FormatSeconds(150), "2.5m");
  EXPECT_EQ(FormatTokensPerSecond(1200), "1.2k tok/s");
  EXPECT_EQ(FormatPercent(0.253), "25.3%");
  EXPECT_EQ(FormatPercent(1), "100%");
  for (double v : {1e-7, 3e-4, 1.0, 7.5e5, 2e7, 4.4e12, 9.9e15}) {
    for (const std::string& s :
         {FormatCompact(v), FormatBytes(v), FormatSeconds(v)}) {
      EXPECT_EQ(s.find("e+"), std::string::npos) << s;
      EXPECT_EQ(s.find("e-"), std::string::npos) << s;
    }
  }
}

TEST(ServerSeriesTest, HistogramQuantileInterpolatesInTheBucket) {
  const std::vector<std::pair<double, double>> b = {
      {0.1, 10}, {0.2, 20}, {INFINITY, 20}};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, b), 0.1);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, b), 0.15);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.25, b), 0.05);
  // A rank in the +Inf bucket: the highest finite bound.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, {{0.1, 10}, {INFINITY, 20}}), 0.1);
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {})));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{0.1, 0}, {INFINITY, 0}})));
  // A bucket read mid-update (not monotonic) is clamped, not negative.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, {{0.1, 10}, {0.2, 8}, {0.4, 20}}),
                   0.1);
}

TEST(ServerSeriesTest, RecognisesRedlineVllmAndLlamaCppNames) {
  for (const char* n :
       {"redline_num_requests_running", "redline:num_requests_waiting",
        "vllm:num_requests_running", "vllm:gpu_cache_usage_perc",
        "llamacpp:requests_processing", "llamacpp:requests_deferred",
        "llamacpp:kv_cache_usage_ratio", "llamacpp:tokens_predicted_total",
        "llamacpp:prompt_tokens_total", "vllm:generation_tokens_total",
        "process_cpu_seconds_total", "process_resident_memory_bytes"}) {
    EXPECT_TRUE(IsCuratedSeries(n)) << n;
  }
  for (const char* n : {"xnum_requests_running", "redline_http_requests_total",
                        "process_virtual_memory_bytes", "num_requests"}) {
    EXPECT_FALSE(IsCuratedSeries(n)) << n;
  }
  EXPECT_EQ(
      CuratedHistogramFamily("redline_time_to_first_token_seconds_bucket"),
      "redline_time_to_first_token_seconds");
  EXPECT_EQ(CuratedHistogramFamily("vllm:e2e_request_latency_seconds_bucket"),
            "vllm:e2e_request_latency_seconds");
  EXPECT_EQ(CuratedHistogramFamily("vllm:e2e_request_latency_seconds_sum"), "");
  EXPECT_EQ(CuratedHistogramFamily("xtime_to_first_token_seconds_bucket"), "");
}

ScrapeSeries Make(std::string name, std::vector<double> v,
                  std::string labels = "") {
  ScrapeSeries s;
  s.name = std::move(name);
  s.labels = std::move(labels);
  s.counter = s.name.ends_with("_total");
  for (size_t i = 0; i < v.size(); ++i) s.t_s.push_back(static_cast<double>(i));
  s.value = std::move(v);
  return s;
}

const ServerPanel* Panel(const ServerMetricsView& v, std::string_view id) {
  for (const ServerPanel& p : v.panels)
    if (p.id == id) return &p;
  return nullptr;
}

TEST(ServerSeriesTest, CuratesTheServerViewAndDropsConstantSeries) {
  std::vector<ScrapeSeries> series = {
      Make("foo_queue_depth", {1, 3, 2, 5}),
      Make("process_cpu_seconds_total", {10, 10.5, 11.5, 12}),
      Make("process_max_fds", {1024, 1024, 1024, 1024}),
      Make("process_resident_memory_bytes", {1e8, 1.1e8, 1.2e8, 1.2e8}),
      Make("vllm:generation_tokens_total", {0, 100, 300, 600}),
      Make("vllm:kv_cache_usage_perc", {0, 0.2, 0.5, 0.1}),
      Make("vllm:num_requests_running", {0, 2, 4, 1}, "model_name=\"a\""),
      Make("vllm:num_requests_running", {0, 1, 1, 1}, "model_name=\"b\""),
      Make("vllm:num_requests_waiting", {0, 0, 0, 0}),
      Make("vllm:prompt_tokens_total", {0, 50, 50, 80}),
      Make("vllm:time_to_first_token_seconds_count", {0, 10, 20, 20}),
  };
  ScrapeHistogram ttft;
  ttft.name = "vllm:time_to_first_token_seconds";
  ttft.t_s = {0, 1, 2, 3};
  ttft.buckets = {{{0.1, 0}, {0.2, 0}, {INFINITY, 0}},
                  {{0.1, 10}, {0.2, 10}, {INFINITY, 10}},   // 10 under 0.1 s
                  {{0.1, 10}, {0.2, 20}, {INFINITY, 20}},   // 10 in (0.1, 0.2]
                  {{0.1, 10}, {0.2, 20}, {INFINITY, 20}}};  // none
  const ServerMetricsView v = CurateServerMetrics(series, {ttft});

  std::vector<std::string> ids;
  for (const ServerPanel& p : v.panels) ids.push_back(p.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"requests", "kv_cache", "tokens",
                                           "ttft", "cpu", "rss"}));
  const ServerPanel* req = Panel(v, "requests");
  ASSERT_NE(req, nullptr);
  ASSERT_EQ(req->lines.size(), 1u);  // waiting never changed
  EXPECT_EQ(req->lines[0].name, "running");
  // Two models add up.
  EXPECT_EQ(req->lines[0].y, (std::vector<double>{0, 3, 5, 2}));
  ASSERT_EQ(req->constant.size(), 1u);
  EXPECT_EQ(req->constant[0], "waiting constant at 0");

  const ServerPanel* tok = Panel(v, "tokens");
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->lines.size(), 2u);
  EXPECT_EQ(tok->lines[0].name, "prompt");
  EXPECT_EQ(tok->lines[0].y, (std::vector<double>{50, 0, 30}));
  EXPECT_EQ(tok->lines[1].y, (std::vector<double>{100, 200, 300}));

  const ServerPanel* cpu = Panel(v, "cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->lines[0].y, (std::vector<double>{50, 100, 50}));

  const ServerPanel* t = Panel(v, "ttft");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->lines.size(), 2u);
  ASSERT_EQ(t->lines[0].y.size(), 3u);
  EXPECT_DOUBLE_EQ(t->lines[0].y[0], 0.05e6);  // p50 of 10 in [0, 0.1]
  EXPECT_DOUBLE_EQ(t->lines[0].y[1], 0.15e6);  // p50 of 10 in (0.1, 0.2]
  EXPECT_TRUE(std::isnan(t->lines[0].y[2]));   // no request in the interval
  EXPECT_EQ(t->slo_metric, "ttft");
  // Whole run: 20 requests, half under 0.1 s.
  EXPECT_DOUBLE_EQ(v.ttft_p50_us, 0.1e6);
  EXPECT_TRUE(std::isnan(v.e2e_p50_us));

  // Constant series are counted, curated or not.
  EXPECT_EQ(v.constant,
            (std::vector<std::string>{"process_max_fds{}",
                                      "vllm:num_requests_waiting{}"}));
  // Others: the non-curated varying series, without the histogram's _count.
  ASSERT_EQ(v.others.size(), 1u);
  EXPECT_EQ(v.others[0].series->name, "foo_queue_depth");
  EXPECT_EQ(v.others[0].max, 5);
  bool e2e_missing = false;
  for (const std::string& m : v.missing)
    e2e_missing |= m.find("E2E") != std::string::npos;
  EXPECT_TRUE(e2e_missing);
}

TEST(ServerSeriesTest, LlamaCppNamesFillThePanels) {
  std::vector<ScrapeSeries> series = {
      Make("llamacpp:requests_processing", {0, 1, 2}),
      Make("llamacpp:requests_deferred", {0, 3, 0}),
      Make("llamacpp:kv_cache_usage_ratio", {0, 0.3, 0.6}),
      Make("llamacpp:tokens_predicted_total", {0, 10, 40}),
  };
  const ServerMetricsView v = CurateServerMetrics(series, {});
  ASSERT_NE(Panel(v, "requests"), nullptr);
  EXPECT_EQ(Panel(v, "requests")->lines.size(), 2u);
  ASSERT_NE(Panel(v, "kv_cache"), nullptr);
  ASSERT_NE(Panel(v, "tokens"), nullptr);
  EXPECT_EQ(Panel(v, "tokens")->lines[0].name, "generation");
  EXPECT_TRUE(v.others.empty());
}

TEST(ServerSeriesTest, APanelOfConstantSeriesIsLeftOutAndCounted) {
  std::vector<ScrapeSeries> series = {
      Make("redline_kv_cache_usage_perc", {0.1, 0.1, 0.1}),
      Make("redline_num_requests_running", {0, 0, 0}),
      Make("redline_num_requests_waiting", {0, 0, 0}),
  };
  const ServerMetricsView v = CurateServerMetrics(series, {});
  EXPECT_TRUE(v.panels.empty());
  EXPECT_EQ(v.constant.size(), 3u);
  EXPECT_EQ(v.constant_curated.size(), 3u);
}

TEST(CompareTest, PerTokenMetricsUseARelativeFloor) {
  CompareOptions o;
  // +280 % on a sub-millisecond tpot p95 is a regression...
  EXPECT_TRUE(IsLatencyRegression("tpot", 350, 1330, o));
  // ... that the request-level absolute 1 ms floor would have hidden.
  EXPECT_FALSE(IsLatencyRegression("e2e", 350, 1330, o));
  EXPECT_FALSE(IsLatencyRegression("tpot", 350, 370, o));  // within 10 %
  EXPECT_TRUE(IsLatencyRegression("itl", 100, 125, o));
  EXPECT_FALSE(IsLatencyRegression("itl", 100, 115, o));  // under 20 us
  EXPECT_TRUE(IsLatencyRegression("ntpot", 2000, 2400, o));
  EXPECT_FALSE(IsLatencyRegression("e2e", 2000, 2800, o));  // under 1 ms
  EXPECT_TRUE(IsLatencyRegression("e2e", 2000, 3500, o));
  EXPECT_TRUE(IsLatencyRegression("ttft", 2000, INFINITY, o));
  EXPECT_FALSE(IsLatencyRegression("ttft", INFINITY, INFINITY, o));
  EXPECT_DOUBLE_EQ(LatencyFloorUs("tpot", 10'000, o), 500);
  EXPECT_DOUBLE_EQ(LatencyFloorUs("tpot", 100, o), 20);
  EXPECT_DOUBLE_EQ(LatencyFloorUs("ttft", 100, o), 1000);
}

std::string ResultJson(const std::string& config_json,
                       const std::string& schema = "redline.bench.result/2") {
  return "{\"schema\":\"" + schema +
         "\",\"verdict\":\"pass\",\"config\":" + config_json +
         ",\"phases\":{\"measure\":{\"rates\":{\"completed_rps\":1}}}}";
}

TEST(CompareTest, WarnsWhenTheRunsWereNotSetUpAlike) {
  const std::string a = ResultJson(
      R"({"url":"http://h/v1","model":"m1","load":{"model":"open","rate_rps":5.0},
          "max_tokens":128,"display":{}})");
  const std::string b = ResultJson(
      R"({"url":"http://h/v1","model":"m2","load":{"model":"open","rate_rps":8.5},
          "max_tokens":128,"display":{}})");
  auto same = CompareResults(a, a, {});
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->warnings.empty());
  auto diff = CompareResults(a, b, {});
  ASSERT_TRUE(diff.ok());
  ASSERT_EQ(diff->warnings.size(), 2u);
  EXPECT_EQ(diff->warnings[0], "model: 'm1' vs 'm2'");
  EXPECT_EQ(diff->warnings[1], "rate: '5' vs '8.5'");
  const std::string text = RenderCompare(*diff, "a.json", "b.json");
  EXPECT_NE(text.find("not set up alike"), std::string::npos);
  EXPECT_NE(text.find("model: 'm1' vs 'm2'"), std::string::npos);
  // Schema /1 results hold display strings: those are compared.
  const std::string old_a =
      ResultJson(R"({"url":"http://a/v1","load":"closed loop 4 users"})",
                 "redline.bench.result/1");
  const std::string old_b =
      ResultJson(R"({"url":"http://b/v1","load":"closed loop 4 users"})",
                 "redline.bench.result/1");
  auto old = CompareResults(old_a, old_b, {});
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(old->warnings.size(), 1u);
  EXPECT_EQ(old->warnings[0], "url: 'http://a/v1' vs 'http://b/v1'");
}

TEST(ConfigEchoTest, RedactsSecretsFromTheCommandLine) {
  const auto argv = RedactArgv({"redline", "bench", "--api-key", "sk-1", "-H",
                                "Authorization: Bearer x", "-H", "X-Trace: 1",
                                "--api-key=sk-2"});
  EXPECT_EQ(argv,
            (std::vector<std::string>{"redline", "bench", "--api-key", "***",
                                      "-H", "Authorization: ***", "-H",
                                      "X-Trace: 1", "--api-key=***"}));
}

BenchReport SampleReport() {
  BenchReport r;
  r.config = {{"url", "http://127.0.0.1:1/v1"}, {"load", "open loop 5/s"}};
  ConfigEcho& e = r.config_echo;
  e.url = "http://127.0.0.1:1/v1";
  e.api = "chat";
  e.model = "tiny";
  e.load_model = "open";
  e.rate_rps = 5;
  e.arrival = "poisson";
  e.duration_s = 30;
  e.max_tokens = 64;
  e.input_source = "synthetic";
  e.input_tokens_spec = "normal(256,64)";
  e.input_tokens = *LengthDist::Parse("normal(256,64)");
  e.argv = {"redline", "bench", "--rate", "5"};
  e.tool_version = std::string(ToolVersion());
  auto th = ParseThresholds("e2e: p(99)<300ms");
  EXPECT_TRUE(th.ok());
  ThresholdResult t;
  t.threshold = (*th)[0];
  t.pass = false;
  t.observed = 400'000;
  r.thresholds = {t};
  r.failed_checks = {"12.0% of requests failed", "e2e: p(99)<300ms"};
  r.verdict = Verdict::kFail;
  r.series.t_s = {0, 1, 2};
  r.series.e2e_p50_us = {100'000, 120'000, 110'000};
  r.series.e2e_p99_us = {200'000, 260'000, 250'000};
  r.series.ttft_p50_us = {20'000, 25'000, 30'000};
  r.series.ttft_p99_us = {40'000, 45'000, 50'000};
  r.series.sent = {5, 5, 5};
  r.series.ok = {4, 5, 5};
  r.series.failed = {1, 0, 0};
  r.series.output_tps = {300, 320, 310};
  r.series.in_flight = {2, 3, 2};
  r.series.e2e_p90_us = r.series.e2e_p99_us;
  r.series.itl_p50_us = {1'000, 1'100, 1'000};
  r.series.itl_p99_us = {2'000, 2'100, 2'000};
  r.scrape_url = "http://127.0.0.1:1/metrics";
  r.scrape = {Make("redline_num_requests_running", {0, 2, 1}),
              Make("redline_num_requests_waiting", {0, 0, 0}),
              Make("process_resident_memory_bytes", {2e7, 2.2e7, 2.1e7})};
  return r;
}

TEST(ReportJsonTest, ConfigIsStructured) {
  const json::value v = json::parse(RenderJson(SampleReport()));
  EXPECT_EQ(v.at("schema").as_string(), "redline.bench.result/2");
  const json::object& c = v.at("config").as_object();
  EXPECT_EQ(c.at("url").as_string(), "http://127.0.0.1:1/v1");
  EXPECT_EQ(c.at("api").as_string(), "chat");
  EXPECT_EQ(c.at("model").as_string(), "tiny");
  EXPECT_EQ(c.at("load").at("model").as_string(), "open");
  EXPECT_DOUBLE_EQ(c.at("load").at("rate_rps").as_double(), 5);
  EXPECT_EQ(c.at("load").at("arrival").as_string(), "poisson");
  EXPECT_EQ(c.at("max_tokens").as_int64(), 64);
  EXPECT_DOUBLE_EQ(c.at("length").at("duration_s").as_double(), 30);
  const json::object& in = c.at("input").as_object();
  EXPECT_EQ(in.at("source").as_string(), "synthetic");
  EXPECT_EQ(in.at("tokens").at("kind").as_string(), "normal");
  EXPECT_DOUBLE_EQ(in.at("tokens").at("mean").as_double(), 256);
  EXPECT_TRUE(c.at("dataset").is_null());
  EXPECT_EQ(c.at("argv").as_array().size(), 4u);
  EXPECT_FALSE(c.at("tool_version").as_string().empty());
  EXPECT_EQ(c.at("display").at("load").as_string(), "open loop 5/s");
  EXPECT_EQ(v.at("failed_checks").as_array().size(), 2u);
  const json::object& server = v.at("scrape").at("server").as_object();
  EXPECT_EQ(server.at("constant").as_array().size(), 1u);
}

TEST(ReportHtmlTest, DrawsSloLinesHumanUnitsAndTheCuratedServerSection) {
  const std::string h = RenderHtml(SampleReport());
  // The e2e threshold is drawn on the latency-over-time chart, red (failed).
  EXPECT_NE(h.find("class=\"slo failed\" data-slo=\"e2e: p(99)&lt;300ms\""),
            std::string::npos);
  EXPECT_NE(h.find("id=\"server-requests\""), std::string::npos);
  EXPECT_NE(h.find("id=\"server-rss\""), std::string::npos);
  EXPECT_NE(h.find("MiB"), std::string::npos);
  EXPECT_NE(h.find("data-count=\"1\""), std::string::npos);
  EXPECT_NE(h.find("waiting constant at 0"), std::string::npos);
  EXPECT_EQ(h.find("e+0"), std::string::npos);
  EXPECT_NE(h.find("id=\"failed-checks\""), std::string::npos);
  EXPECT_NE(h.find("12.0% of requests failed"), std::string::npos);
  EXPECT_NE(h.find("<dt>e2e</dt>"), std::string::npos);
  EXPECT_NE(h.find("<dt>running</dt>"), std::string::npos);
  EXPECT_NE(h.find("normal(256,64)"), std::string::npos);
  EXPECT_EQ(h.find("<script"), std::string::npos);
}

TEST(ReportTextTest, ListsEveryFailedCheck) {
  const std::string t = RenderText(SampleReport());
  EXPECT_NE(t.find("failed (2):"), std::string::npos);
  EXPECT_NE(t.find("✗ 12.0% of requests failed"), std::string::npos);
  EXPECT_NE(t.find("✗ e2e: p(99)<300ms"), std::string::npos);
}

TEST(GlossaryTest, EveryMetricHasADefinition) {
  for (Metric m : kAllMetrics)
    EXPECT_FALSE(GlossaryDefinition(MetricKey(m)).empty()) << MetricKey(m);
  for (int c = 1; c < kNumErrorClasses; ++c) {
    const std::string_view key = ErrorClassKey(static_cast<ErrorClass>(c));
    EXPECT_FALSE(GlossaryDefinition(key).empty()) << key;
  }
  for (const char* t : {"running", "waiting", "kv_cache", "cpu", "rss",
                        "goodput", "errors", "server ttft/e2e"})
    EXPECT_FALSE(GlossaryDefinition(t).empty()) << t;
}

}  // namespace
}  // namespace redline::bench

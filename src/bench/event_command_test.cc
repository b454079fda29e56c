// `redline bench --event` end to end: the whole command in-process against
// the fake OpenAI server on loopback, and the flag errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/command.h"
#include "bench/report.h"
#include "bench/testing/fake_openai_server.h"

namespace redline::bench {
namespace {

namespace json = boost::json;

class BenchEventCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/redline_bench_event_" +
           std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    null_ = std::fopen("/dev/null", "w");
    err_path_ = dir_ + "/stderr.txt";
    err_ = std::fopen(err_path_.c_str(), "w");
  }
  void TearDown() override {
    std::fclose(null_);
    if (err_ != nullptr) std::fclose(err_);
    std::filesystem::remove_all(dir_);
  }

  static std::string Read(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // Runs the command; returns the exit code, stderr in *err_text, stdout in
  // *out_text when given.
  int Run(const BenchCommandOptions& o, std::string* err_text,
          std::string* out_text = nullptr) {
    const std::string out_path = dir_ + "/stdout.txt";
    std::FILE* out = std::fopen(out_path.c_str(), "w");
    const int code = RunBenchCommand(o, nullptr, out, err_);
    std::fclose(out);
    if (out_text != nullptr) *out_text = Read(out_path);
    std::fclose(err_);
    err_ = nullptr;
    *err_text = Read(err_path_);
    return code;
  }

  std::string dir_, err_path_;
  std::FILE* null_ = nullptr;
  std::FILE* err_ = nullptr;
};

TEST_F(BenchEventCommandTest, RunsTheCommandAtItsOffsetAndReportsIt) {
  testing::FakeServerOptions so;
  so.default_plan.ttft_us = 5'000;
  so.default_plan.gap_us = 1'000;
  so.default_plan.tokens = 4;
  so.record_truth = false;
  testing::FakeOpenAiServer server(so);
  ASSERT_TRUE(server.Start().ok());

  BenchCommandOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.users = 2;
  o.duration = "2s";
  o.quiet = true;
  o.max_dispatch_delay = "500ms";
  const std::string marker = dir_ + "/touched";
  // Given out of order; the second is still running when the run ends.
  o.events = {"1500ms:sleep 100", "1s:touch '" + marker + "'; echo done"};
  o.json_path = dir_ + "/r.json";
  o.html_path = dir_ + "/r.html";
  std::string err, text;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Run(o, &err, &text), kExitPass) << err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(std::filesystem::exists(marker));

  json::value v = json::parse(Read(o.json_path));
  const json::array& events = v.at("events").as_array();
  ASSERT_EQ(events.size(), 2u);
  const json::object& killed = events[1].as_object();
  EXPECT_EQ(killed.at("command").as_string(), "sleep 100");
  EXPECT_TRUE(killed.at("killed_at_end").as_bool());
  EXPECT_EQ(killed.at("signal").as_string(), "SIGTERM");
  EXPECT_TRUE(killed.at("exit_code").is_null());
  const json::object& e = events[0].as_object();
  EXPECT_DOUBLE_EQ(e.at("offset_s").as_double(), 1.0);
  EXPECT_TRUE(e.at("started").as_bool());
  EXPECT_TRUE(e.at("finished").as_bool());
  const double start_s = e.at("start_s").as_double();
  EXPECT_GE(start_s, 1.0);
  EXPECT_LT(start_s, 1.5);
  EXPECT_GE(e.at("end_s").as_double(), start_s);
  EXPECT_EQ(e.at("exit_code").as_int64(), 0);
  EXPECT_TRUE(e.at("signal").is_null());
  EXPECT_FALSE(e.at("timed_out").as_bool());
  EXPECT_EQ(e.at("stdout_tail").as_string(), "done\n");
  EXPECT_EQ(e.at("command").as_string(), "touch '" + marker + "'; echo done");

  // The text summary has a line per event, the failed one also warns.
  EXPECT_NE(text.find("events (seconds from the load start)"),
            std::string::npos);
  EXPECT_NE(text.find("killed by SIGTERM at the end of the run"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("stdout (5 B, last line): done"), std::string::npos);
  EXPECT_NE(text.find("warning: event @1.5s 'sleep 100'"), std::string::npos)
      << text;

  // The HTML marks it on the time-axis charts and lists it.
  const std::string html = Read(o.html_path);
  EXPECT_NE(html.find("id=\"events\""), std::string::npos);
  const size_t latency = html.find("id=\"chart-latency\"");
  ASSERT_NE(latency, std::string::npos);
  EXPECT_NE(html.find("<line class=\"event\" data-event=\"@1s touch", latency),
            std::string::npos);
}

TEST_F(BenchEventCommandTest, BadSpecsAreToolErrorsNamingTheFlag) {
  BenchCommandOptions o;
  o.url = "http://127.0.0.1:1";  // never reached
  o.duration = "2s";
  o.quiet = true;
  struct Case {
    std::vector<std::string> events;
    std::string timeout;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{"soon:true"}, "30s", "--event 'soon:true': bad offset"},
           {{"1s"}, "30s", "--event '1s': expected OFFSET:COMMAND"},
           {{"1s:true", "2s:true"},
            "30s",
            "--event '2s:true': offset 2s is not before the end of the run"},
           {{"1s:true"}, "forever", "--event-timeout: bad duration"},
       }) {
    o.events = c.events;
    o.event_timeout = c.timeout;
    if (err_ == nullptr) err_ = std::fopen(err_path_.c_str(), "w");
    std::string err;
    EXPECT_EQ(Run(o, &err), kExitToolError);
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace redline::bench

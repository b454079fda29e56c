// ConfigEcho: the settings of a bench run as structured values, for the
// JSON result's `config` object (docs/BENCH_JSON.md#config) and for
// `bench compare`, which warns when two runs were not set up alike. The
// display strings of the text and HTML reports are built next to it
// (BenchReport::config).
//
// Thread-safety: plain values.
#ifndef REDLINE_BENCH_CONFIG_ECHO_H_
#define REDLINE_BENCH_CONFIG_ECHO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/workload.h"

namespace redline::bench {

struct ConfigEcho {
  std::string url;       // normalized base URL
  std::string api;       // "chat", "completions" or "scenario"
  std::string scenario;  // scenario file, "" without one
  bool stream = true;
  std::string model;  // "" lets the server choose
  // Load model.
  std::string load_model;  // "open" or "closed"
  double rate_rps = 0;     // open loop without stages
  std::string stages;      // open loop "30s:5rps,60s:20rps"
  std::string arrival;     // open loop: poisson, constant, gamma
  double burstiness = 1;
  int64_t max_in_flight = 0;
  int users = 0;  // closed loop
  std::string think;
  double ramp_up_s = 0;
  // Length.
  double duration_s = 0;  // 0: bounded by the request count
  int64_t requests = -1;  // -1: bounded by the duration
  double warmup_s = 0;
  int64_t warmup_requests = 0;
  int cold_requests = 0;
  // Requests.
  int64_t max_tokens = 0;          // 0: not sent
  std::string output_tokens_spec;  // --output-tokens as given, "" none
  std::optional<LengthDist> output_tokens;
  bool pin_output_length = false;
  // Input: "prompt" (one fixed prompt), "synthetic", "dataset", "scenario".
  std::string input_source;
  std::string input_tokens_spec;  // synthetic: --input-tokens as given
  std::optional<LengthDist> input_tokens;
  int64_t prompt_chars = 0;  // fixed prompt: its length in characters
  std::string dataset;       // path, "" none
  std::string dataset_format;
  double temperature = -1;  // < 0: not sent
  uint64_t seed = 0;
  double request_timeout_s = 0, idle_timeout_s = 0, connect_timeout_s = 0;
  std::string profile;
  std::vector<std::string> thresholds;  // as written
  std::vector<std::string> argv;        // the command line
  std::string tool_version;
};

// "fixed", "uniform", "normal" or "lognormal".
std::string_view LengthDistKindName(LengthDist::Kind kind);

// The running process's command line (/proc/self/cmdline), empty when it
// cannot be read.
std::vector<std::string> ProcessArgv();

// `argv` with secrets masked: the value of --api-key, and the value of an
// Authorization, api-key or x-api-key header given with -H/--header.
std::vector<std::string> RedactArgv(std::vector<std::string> argv);

// The version the tool was built as ("0.1.0").
std::string_view ToolVersion();

}  // namespace redline::bench

#endif  // REDLINE_BENCH_CONFIG_ECHO_H_

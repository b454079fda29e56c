// The `redline bench` command as a library function: flag values in, exit
// code out (docs/METRICS.md#exit-codes). src/cli/bench_command.cc only maps
// CLI11 flags onto BenchCommandOptions, so tests drive the whole command
// in-process.
//
// Output: progress on stderr (one live line on a terminal, plain periodic
// lines otherwise), the final table on stdout, files as requested.
#ifndef REDLINE_BENCH_COMMAND_H_
#define REDLINE_BENCH_COMMAND_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace redline::bench {

struct BenchCommandOptions {
  // Target.
  std::string url;           // base URL; "/v1" is added when it has no path
  std::string api = "chat";  // chat | completions
  std::string model;
  std::string api_key;               // default: $OPENAI_API_KEY
  std::vector<std::string> headers;  // "Name: value"
  std::string timeout = "60s";
  std::string idle_timeout = "30s";
  std::string connect_timeout = "10s";
  bool insecure = false;
  std::string ca_file;
  int max_connections = 0;

  // Load model.
  int users = 0;        // closed loop when > 0
  std::string think;    // "0.5s..2s", "1s", "exponential(1s)"
  std::string ramp_up;  // closed loop: spread user starts over this
  std::string rate;     // open loop when set ("20", "20rps", "1200/m")
  std::string arrival = "poisson";
  double burstiness = 1;
  std::string stages;  // "30s:5rps,60s:20rps" (open loop)
  int64_t max_in_flight = 0;
  std::string duration;  // default 60s when neither duration nor requests
  int64_t requests = -1;
  std::string warmup;  // "5s" or a request count "20"
  int cold_requests = 1;
  uint64_t seed = 1;
  bool realtime = false;  // SCHED_FIFO for the load thread (see RunConfig)
  // Do not send a W3C traceparent per request (RunConfig::send_traceparent).
  bool no_traceparent = false;

  // Workload (ignored with --scenario, which defines tasks).
  std::string prompt =
      "Write a short story about a lighthouse keeper who finds a message in a "
      "bottle.";
  std::string system_prompt;
  std::string input_tokens;   // synthetic prompt length distribution
  std::string output_tokens;  // max_tokens distribution
  int64_t max_tokens = 128;
  bool pin_output_length = false;
  bool no_stream = false;
  bool no_usage = false;
  double temperature = -1;  // < 0: not sent
  std::string scenario;
  std::string dataset;         // JSONL or ShareGPT file
  std::string dataset_format;  // jsonl | sharegpt (default by content)
  int turns = 1;

  // Verdict.
  std::vector<std::string> slo;
  std::string profile;
  std::string goodput;  // "ttft:500ms,tpot:50ms,e2e:3s"
  std::string max_dispatch_delay;
  std::string rate_tolerance = "5%";
  // A run whose measured error rate is above this fails even without a
  // threshold: a wrong URL or a server that answers every request with an
  // error is never a pass.
  std::string max_error_rate = "1%";
  // Skip the look at GET {url}/models before the load (preflight.h).
  bool no_preflight = false;
  // k6 abortOnFail for every latency and error threshold of the measurement
  // phase (a single assertion takes an `abort` suffix instead), with
  // `abort_delay` as its delayAbortEval.
  bool abort_on_fail = false;
  std::string abort_delay = "10s";
  double expected_rate = 0;
  bool find_max_rate = false;
  int probe_users = 64;
  // Capacity search (bench/capacity.h).
  int64_t min_samples = 100;
  std::string confidence = "95%";
  std::string resolution = "5%";
  std::string max_step;  // default: 5 x duration, at least 10 s
  int repeat = 1;
  std::string drain_timeout = "30s";

  // Cold start.
  std::string cold_start;
  std::string ready_url;
  std::string ready_timeout = "600s";
  std::string server_log;

  // Events: "OFFSET:COMMAND", run with /bin/sh -c at OFFSET from the load
  // start (bench/event.h); each killed after event_timeout.
  std::vector<std::string> events;
  std::string event_timeout = "30s";

  // Output.
  std::string json_path;
  std::string html_path;
  std::string requests_out;
  // The first N request/response exchanges, as JSONL, to debug_file.
  int64_t debug_requests = 0;
  std::string debug_file = "bench-debug.jsonl";
  std::string scrape;
  std::string scrape_filter;  // comma-separated substrings
  bool quiet = false;
  // The command line echoed in the JSON `config.argv` (secrets masked);
  // empty: this process's own (/proc/self/cmdline).
  std::vector<std::string> argv;
};

// Runs the command; returns the process exit code (0, 99, 100 or 101).
int RunBenchCommand(const BenchCommandOptions& options,
                    const std::atomic<bool>* stop_flag, std::FILE* out,
                    std::FILE* err);

// `redline bench compare A.json B.json`: 0 no regression, 99 regression,
// 101 unreadable input.
int RunCompareCommand(const std::string& path_a, const std::string& path_b,
                      double tolerance, std::FILE* out, std::FILE* err);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_COMMAND_H_

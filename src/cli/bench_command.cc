// `redline bench`: load-tests an OpenAI-compatible endpoint and gives an SLO
// verdict (exit 0 pass, 99 SLO failed, 100 invalid run, 101 tool error).
// `redline bench compare A.json B.json` flags regressions between results.
// Flags map onto bench::BenchCommandOptions; the work is in src/bench.
#include <csignal>
#include <cstdio>
#include <memory>

#include "bench/command.h"
#include "bench/units.h"
#include "cli/command_registry.h"

namespace redline::cli {
namespace {

std::atomic<bool> g_stop{false};

void OnSigint(int) { g_stop.store(true); }

void SetupBench(CLI::App& sub, int* exit_code) {
  auto o = std::make_shared<bench::BenchCommandOptions>();
  sub.fallthrough(false);
  // Target.
  sub.add_option(
      "--url", o->url,
      "Base URL of the OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1)");
  sub.add_option("--api", o->api, "chat or completions")->capture_default_str();
  sub.add_option("-m,--model", o->model, "Model name sent in requests");
  sub.add_option("--api-key", o->api_key,
                 "Bearer token (default: $OPENAI_API_KEY)");
  sub.add_option("-H,--header", o->headers,
                 "Extra header 'Name: value' (repeatable)");
  sub.add_option("--timeout", o->timeout, "Total per-request timeout")
      ->capture_default_str();
  sub.add_option("--idle-timeout", o->idle_timeout,
                 "Stream idle timeout (no byte received)")
      ->capture_default_str();
  sub.add_option("--connect-timeout", o->connect_timeout,
                 "Connect + TLS handshake timeout")
      ->capture_default_str();
  sub.add_flag("--insecure", o->insecure, "Do not verify TLS certificates");
  sub.add_option("--ca-file", o->ca_file,
                 "CA bundle (PEM) for TLS verification");
  sub.add_option("--max-connections", o->max_connections,
                 "Connection cap (0: one per in-flight request)");
  // Load model.
  sub.add_option("--users", o->users, "Closed loop: number of virtual users");
  sub.add_option(
      "--think", o->think,
      "Think time after each response: 0.5s..2s, 1s, exponential(1s)");
  sub.add_option("--ramp-up", o->ramp_up,
                 "Closed loop: spread user starts over this duration");
  sub.add_option("--rate", o->rate, "Open loop: offered rate (req/s)");
  sub.add_option("--arrival", o->arrival,
                 "Open loop arrivals: constant, poisson or gamma")
      ->capture_default_str();
  sub.add_option("--burstiness", o->burstiness,
                 "Gamma shape (1 = Poisson, < 1 burstier)")
      ->capture_default_str();
  sub.add_option("--stages", o->stages,
                 "Open loop stages: 30s:5rps,60s:20rps or ramps 60s:5-20rps");
  sub.add_option("--max-in-flight", o->max_in_flight,
                 "Open loop cap on requests in flight (wait = dispatch delay)");
  sub.add_option("--duration", o->duration,
                 "Measurement duration (default 60s)");
  sub.add_option("--requests", o->requests, "Number of measured requests");
  sub.add_option(
      "--warmup", o->warmup,
      "Warm-up excluded from statistics: a duration (5s) or a request count");
  sub.add_option("--cold-requests", o->cold_requests,
                 "First requests sent alone and reported as cold")
      ->capture_default_str();
  sub.add_option("-s,--seed", o->seed, "Seed of every random choice")
      ->capture_default_str();
  sub.add_flag("--realtime", o->realtime,
               "Run the load thread under SCHED_FIFO (needs CAP_SYS_NICE): "
               "on-time dispatch on busy machines");
  sub.add_flag("--no-traceparent", o->no_traceparent,
               "Do not send a W3C traceparent with each request (sent by "
               "default; the reports list the trace ids of the slowest)");
  // Workload.
  sub.add_option("-p,--prompt", o->prompt, "Fixed prompt (default workload)");
  sub.add_option("-y,--system", o->system_prompt, "System prompt");
  sub.add_option(
      "--input-tokens", o->input_tokens,
      "Synthetic prompts of this length: 256, 64..512, normal(256,64)");
  sub.add_option("--output-tokens", o->output_tokens,
                 "max_tokens per request from a distribution");
  sub.add_option("-n,--max-tokens,--n-predict", o->max_tokens,
                 "max_tokens of each request")
      ->capture_default_str();
  sub.add_flag("--pin-output-length", o->pin_output_length,
               "Also send ignore_eos and min_tokens = max_tokens");
  sub.add_option("--temp,--temperature", o->temperature,
                 "Sampling temperature (not sent when unset)");
  sub.add_flag("--no-stream", o->no_stream,
               "Non-streaming requests (only E2E is measured)");
  sub.add_flag("--no-usage", o->no_usage,
               "Do not ask for stream_options.include_usage");
  sub.add_option("--scenario", o->scenario,
                 "Scenario YAML with weighted tasks (docs/BENCH_SCENARIO.md)");
  sub.add_option("--dataset", o->dataset,
                 "Prompts from a JSONL or ShareGPT file");
  sub.add_option("--dataset-format", o->dataset_format, "jsonl or sharegpt");
  sub.add_option("--turns", o->turns, "Multi-turn sessions of this many turns");
  // Verdict.
  sub.add_option("--slo", o->slo,
                 "Threshold, k6 style: 'e2e:p(99)<3s' (repeatable)");
  sub.add_option("--profile", o->profile, "Built-in thresholds: three-second");
  sub.add_option("--goodput", o->goodput,
                 "Per-request SLO for goodput: 'ttft:500ms,tpot:50ms,e2e:3s'");
  sub.add_option("--max-dispatch-delay", o->max_dispatch_delay,
                 "Run invalid above this dispatch-delay p99 (default 1% of the "
                 "tightest time threshold, 1..10 ms)");
  sub.add_option("--max-error-rate", o->max_error_rate,
                 "Fail the run (exit 99) when more requests than this fail, "
                 "thresholds or not")
      ->capture_default_str();
  sub.add_flag("--no-preflight", o->no_preflight,
               "Do not check GET {url}/models before the load (a wrong URL, a "
               "down or non-OpenAI target is exit 100 otherwise)");
  sub.add_option("--rate-tolerance", o->rate_tolerance,
                 "Open loop: allowed send-rate shortfall")
      ->capture_default_str();
  sub.add_flag("--abort-on-fail", o->abort_on_fail,
               "Stop the run (exit 99) once a latency or error threshold fails "
               "(per assertion: 'rate<1% abort(10s)')");
  sub.add_option(
         "--abort-delay", o->abort_delay,
         "With --abort-on-fail: no abort on a failing value before this much "
         "of the measurement phase (k6 delayAbortEval)")
      ->capture_default_str();
  sub.add_option(
      "--expected-rate", o->expected_rate,
      "Expected traffic E: run open loop at 1.2 E and check it holds");
  sub.add_flag("--find-max-rate", o->find_max_rate,
               "Search the highest offered rate that meets every threshold");
  sub.add_option("--probe-users", o->probe_users,
                 "Concurrency of the saturation probe")
      ->capture_default_str();
  sub.add_option("--min-samples", o->min_samples,
                 "--find-max-rate: requests a step needs for any percentile "
                 "verdict (a pass may need more: p99 at 95% needs 368)")
      ->capture_default_str();
  sub.add_option("--confidence", o->confidence,
                 "--find-max-rate: confidence of the percentile intervals and "
                 "of the capacity range")
      ->capture_default_str();
  sub.add_option("--resolution", o->resolution,
                 "--find-max-rate: stop bisecting when the bracket is this "
                 "narrow, relative to the rate")
      ->capture_default_str();
  sub.add_option("--max-step", o->max_step,
                 "--find-max-rate: longest measurement window of one step "
                 "(default 5x --duration, at least 10s)");
  sub.add_option("--repeat", o->repeat,
                 "--find-max-rate: run the whole search this many times and "
                 "report the spread")
      ->capture_default_str();
  sub.add_option("--drain-timeout", o->drain_timeout,
                 "--find-max-rate with --scrape: longest wait before a step "
                 "for the server's waiting/running gauges to be idle")
      ->capture_default_str();
  // Cold start.
  sub.add_option("--cold-start", o->cold_start,
                 "Launch this server command first and measure time to ready");
  sub.add_option(
      "--ready-url", o->ready_url,
      "Readiness URL to poll (default <origin>/readyz, then /health)");
  sub.add_option("--ready-timeout", o->ready_timeout,
                 "Give up waiting for readiness after this")
      ->capture_default_str();
  sub.add_option("--server-log", o->server_log,
                 "Write the launched server's output here");
  // Events.
  sub.add_option("--event", o->events,
                 "Run a shell command at an offset of the load: "
                 "20s:'kill $(cat replica.pid)' (repeatable; marked in the "
                 "reports)");
  sub.add_option("--event-timeout", o->event_timeout,
                 "Kill an --event command's process group after this")
      ->capture_default_str();
  // Output.
  sub.add_option("--json", o->json_path,
                 "Write the JSON result (docs/BENCH_JSON.md)");
  sub.add_option("--html", o->html_path,
                 "Write the self-contained HTML report");
  sub.add_option("--requests-out", o->requests_out,
                 "Write every request's timestamps as JSONL");
  sub.add_option("--debug-requests", o->debug_requests,
                 "Write the first N request/response exchanges (bodies "
                 "included) to --debug-file as JSONL");
  sub.add_option("--debug-file", o->debug_file, "File for --debug-requests")
      ->capture_default_str();
  sub.add_option("--scrape", o->scrape,
                 "Sample this Prometheus /metrics URL during the run");
  sub.add_option("--scrape-filter", o->scrape_filter,
                 "Comma-separated substrings of series names to keep");
  sub.add_flag("-q,--quiet", o->quiet, "No progress output");

  CLI::App* compare = sub.add_subcommand(
      "compare", "Compare two JSON results and flag regressions (exit 99)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto tolerance = std::make_shared<std::string>("10%");
  compare->add_option("files", *files, "A.json B.json")
      ->expected(2)
      ->required();
  compare
      ->add_option("--tolerance", *tolerance,
                   "Relative change flagged as a regression")
      ->capture_default_str();
  compare->callback([files, tolerance, exit_code] {
    auto tol = bench::ParsePercentOrFraction(*tolerance);
    if (!tol.ok()) {
      std::fprintf(stderr, "redline bench compare: bad --tolerance\n");
      *exit_code = 101;
      return;
    }
    *exit_code = bench::RunCompareCommand((*files)[0], (*files)[1], *tol,
                                          stdout, stderr);
  });

  sub.callback([o, compare, exit_code, &sub] {
    if (compare->parsed()) return;
    (void)sub;
    std::signal(SIGINT, OnSigint);
    std::signal(SIGPIPE, SIG_IGN);
    *exit_code = bench::RunBenchCommand(*o, &g_stop, stdout, stderr);
  });
}

}  // namespace
}  // namespace redline::cli

RL_REGISTER_COMMAND(
    bench, "Load-test an OpenAI-compatible endpoint and give an SLO verdict",
    redline::cli::SetupBench);

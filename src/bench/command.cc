#include "bench/command.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench/capacity.h"
#include "bench/cold_start.h"
#include "bench/config_echo.h"
#include "bench/event_runner.h"
#include "bench/preflight.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/scrape.h"
#include "bench/threshold.h"
#include "bench/units.h"
#include "bench/workload.h"
#include "http/url.h"

namespace redline::bench {

namespace {

// Everything parsed and validated from the flags.
struct Plan {
  RunConfig run;
  std::vector<TaskSpec> tasks;
  std::vector<Threshold> thresholds;
  std::optional<GoodputSlo> goodput;
  ValidityOptions validity;
  double max_error_rate = 0.01;
  std::vector<std::pair<std::string, std::string>> config;
  ConfigEcho echo;
  std::string base_path;
  // --event, sorted by offset.
  std::vector<EventSpec> events;
  EventRunnerOptions event_options;
};

// The settings as values (JSON `config`, docs/BENCH_JSON.md#config).
ConfigEcho BuildEcho(const BenchCommandOptions& o, const Plan& p) {
  const RunConfig& rc = p.run;
  ConfigEcho e;
  e.url = rc.base_url;
  e.api = o.scenario.empty() ? o.api : "scenario";
  e.scenario = o.scenario;
  e.stream = !o.no_stream;
  e.model = o.model;
  const bool open = rc.mode == RunConfig::Mode::kOpen;
  e.load_model = open ? "open" : "closed";
  if (open) {
    e.rate_rps = rc.stages.empty() ? rc.rate_rps : 0;
    e.stages = o.stages;
    e.arrival = std::string(ArrivalKindName(rc.arrival));
    e.burstiness = rc.burstiness;
    e.max_in_flight = rc.max_in_flight;
  } else {
    e.users = rc.users;
    e.think = rc.think.ToString();
    e.ramp_up_s = static_cast<double>(rc.ramp_up_ns) / 1e9;
  }
  e.duration_s = static_cast<double>(rc.duration_ns) / 1e9;
  e.requests = rc.max_requests;
  e.warmup_s = static_cast<double>(rc.warmup_ns) / 1e9;
  e.warmup_requests = rc.warmup_requests;
  e.cold_requests = rc.cold_requests;
  if (o.scenario.empty() && !p.tasks.empty()) {
    const TaskSpec& t = p.tasks.front();
    e.max_tokens = o.max_tokens > 0 ? o.max_tokens : 0;
    e.output_tokens_spec = o.output_tokens;
    e.output_tokens = t.output_tokens;
    e.pin_output_length = o.pin_output_length;
    switch (t.source) {
      case TaskSpec::Source::kFixed:
        e.input_source = "prompt";
        e.prompt_chars = static_cast<int64_t>(o.prompt.size());
        break;
      case TaskSpec::Source::kSynthetic:
        e.input_source = "synthetic";
        e.input_tokens_spec = o.input_tokens;
        e.input_tokens = t.input_tokens;
        break;
      case TaskSpec::Source::kJsonl:
      case TaskSpec::Source::kShareGpt:
        e.input_source = "dataset";
        e.dataset = o.dataset;
        e.dataset_format =
            t.source == TaskSpec::Source::kJsonl ? "jsonl" : "sharegpt";
        break;
    }
  } else {
    e.input_source = "scenario";
  }
  e.temperature = o.temperature;
  e.seed = rc.seed;
  e.request_timeout_s = static_cast<double>(rc.request_timeout_ms) / 1e3;
  e.idle_timeout_s = static_cast<double>(rc.idle_timeout_ms) / 1e3;
  e.connect_timeout_s = static_cast<double>(rc.connect_timeout_ms) / 1e3;
  e.profile = o.profile;
  for (const Threshold& t : p.thresholds) e.thresholds.push_back(t.source);
  e.argv = RedactArgv(o.argv.empty() ? ProcessArgv() : o.argv);
  e.tool_version = std::string(ToolVersion());
  return e;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return Status::IoError("cannot write " + path);
  f << text;
  return f ? Status::Ok() : Status::IoError("write failed: " + path);
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

Result<GoodputSlo> ParseGoodput(std::string_view text) {
  GoodputSlo g;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view()
                                           : text.substr(comma + 1);
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return Status::InvalidArgument("goodput items look like ttft:500ms");
    std::string_view key = Trim(item.substr(0, colon));
    RL_ASSIGN_OR_RETURN(int64_t ns, ParseDurationNs(item.substr(colon + 1)));
    const int64_t us = ns / 1000;
    if (key == "ttft") {
      g.ttft_us = us;
    } else if (key == "tpot") {
      g.tpot_us = us;
    } else if (key == "e2e" || key == "e2el") {
      g.e2e_us = us;
    } else if (key == "itl") {
      g.itl_us = us;
    } else {
      return Status::InvalidArgument("goodput keys: ttft, tpot, e2e, itl");
    }
  }
  return g;
}

Result<Plan> BuildPlan(const BenchCommandOptions& o) {
  Plan p;
  RunConfig& rc = p.run;
  if (o.url.empty()) return Status::InvalidArgument("--url is required");
  rc.base_url = NormalizeBaseUrl(o.url);
  auto parsed = http::ParseUrl(rc.base_url);
  if (!parsed.ok()) return parsed.status();
  p.base_path = parsed->target;
  rc.api_key = o.api_key;
  if (rc.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY")) rc.api_key = env;
  }
  for (const std::string& h : o.headers) {
    size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0)
      return Status::InvalidArgument("headers look like 'Name: value': " + h);
    rc.headers.push_back({std::string(Trim(h.substr(0, colon))),
                          std::string(Trim(h.substr(colon + 1)))});
  }
  RL_ASSIGN_OR_RETURN(int64_t timeout_ns, ParseDurationNs(o.timeout));
  RL_ASSIGN_OR_RETURN(int64_t idle_ns, ParseDurationNs(o.idle_timeout));
  RL_ASSIGN_OR_RETURN(int64_t connect_ns, ParseDurationNs(o.connect_timeout));
  rc.request_timeout_ms = timeout_ns / 1'000'000;
  rc.idle_timeout_ms = idle_ns / 1'000'000;
  rc.connect_timeout_ms = connect_ns / 1'000'000;
  rc.tls_verify = !o.insecure;
  rc.tls_ca_file = o.ca_file;
  rc.max_connections = o.max_connections;
  rc.seed = o.seed;
  rc.debug_requests = std::max<int64_t>(0, o.debug_requests);
  rc.realtime = o.realtime;
  rc.send_traceparent = !o.no_traceparent;
  rc.cold_requests = std::max(0, o.cold_requests);

  // Load model.
  const bool open = !o.rate.empty() || !o.stages.empty() ||
                    (o.users == 0 && o.expected_rate > 0);
  if (open && o.users > 0)
    return Status::InvalidArgument(
        "give either --users (closed loop) or --rate/--stages (open loop)");
  RL_ASSIGN_OR_RETURN(rc.arrival, ParseArrivalKind(o.arrival));
  rc.burstiness = o.burstiness;
  if (rc.arrival == ArrivalKind::kGamma && o.burstiness <= 0)
    return Status::InvalidArgument("--burstiness must be > 0");
  if (open) {
    rc.mode = RunConfig::Mode::kOpen;
    if (!o.stages.empty()) {
      RL_ASSIGN_OR_RETURN(rc.stages, ParseStages(o.stages));
    } else if (!o.rate.empty()) {
      RL_ASSIGN_OR_RETURN(rc.rate_rps, ParseRate(o.rate));
    } else {
      // The peak check's offered rate
      // (docs/METRICS.md#peak-check-and-capacity-search).
      rc.rate_rps = 1.2 * o.expected_rate;
    }
    if (rc.stages.empty() && rc.rate_rps <= 0)
      return Status::InvalidArgument("--rate must be > 0");
    rc.max_in_flight = o.max_in_flight;
  } else {
    rc.mode = RunConfig::Mode::kClosed;
    rc.users = o.users > 0 ? o.users : 1;
    if (!o.think.empty()) {
      RL_ASSIGN_OR_RETURN(rc.think, ThinkTime::Parse(o.think));
    }
    if (!o.ramp_up.empty()) {
      RL_ASSIGN_OR_RETURN(rc.ramp_up_ns, ParseDurationNs(o.ramp_up));
    }
  }
  if (!o.duration.empty()) {
    RL_ASSIGN_OR_RETURN(rc.duration_ns, ParseDurationNs(o.duration));
  }
  rc.max_requests = o.requests;
  if (rc.duration_ns == 0 && rc.max_requests < 0 && rc.stages.empty())
    rc.duration_ns = 60 * 1'000'000'000LL;
  if (!o.warmup.empty()) {
    if (o.warmup.find_first_not_of("0123456789") == std::string::npos) {
      rc.warmup_requests = std::stoll(o.warmup);
      if (open)
        return Status::InvalidArgument(
            "open loop warm-up is a duration (e.g. --warmup 5s)");
    } else {
      RL_ASSIGN_OR_RETURN(rc.warmup_ns, ParseDurationNs(o.warmup));
    }
  }

  // Events, on the load timeline (warm-up + measurement, or the stages).
  if (!o.events.empty()) {
    RL_ASSIGN_OR_RETURN(p.events, ParseEventSpecs(o.events));
    auto timeout = ParseDurationNs(o.event_timeout);
    if (!timeout.ok() || *timeout <= 0)
      return Status::InvalidArgument(
          "--event-timeout: " +
          (timeout.ok() ? std::string("must be > 0")
                        : std::string(timeout.status().message())));
    p.event_options.timeout_ns = *timeout;
    if (o.find_max_rate)
      return Status::InvalidArgument(
          "--event does not apply to --find-max-rate (a search is many runs)");
    int64_t planned_ns = 0;
    if (rc.mode == RunConfig::Mode::kOpen && !rc.stages.empty()) {
      for (const Stage& st : rc.stages) planned_ns += st.duration_ns;
    } else if (rc.duration_ns > 0) {
      planned_ns = rc.warmup_ns + rc.duration_ns;
    }
    for (const EventSpec& e : p.events) {
      if (planned_ns > 0 && e.offset_ns >= planned_ns)
        return Status::InvalidArgument(fmt::format(
            "--event '{}': offset {} is not before the end of the run ({}{})",
            e.source, FormatSeconds(static_cast<double>(e.offset_ns) / 1e9),
            FormatSeconds(static_cast<double>(planned_ns) / 1e9),
            rc.warmup_ns > 0 ? ", warm-up included" : ""));
    }
  }

  // Workload.
  if (!o.scenario.empty()) {
    RL_ASSIGN_OR_RETURN(p.tasks, Workload::LoadScenario(o.scenario));
    // --max-tokens and --temperature are the defaults of the tasks that set
    // neither (as --model is): a scenario without lengths would otherwise
    // send no max_tokens, and a server generates up to its context.
    for (TaskSpec& t : p.tasks) {
      if (!t.sampling.max_tokens && !t.output_tokens && o.max_tokens > 0)
        t.sampling.max_tokens = o.max_tokens;
      if (!t.sampling.temperature && o.temperature >= 0)
        t.sampling.temperature = o.temperature;
    }
  } else {
    TaskSpec t;
    if (o.api == "completions") {
      t.api = api::ApiKind::kCompletions;
    } else if (o.api != "chat") {
      return Status::InvalidArgument("--api must be chat or completions");
    }
    t.stream = !o.no_stream;
    t.include_usage = !o.no_usage;
    t.system_prompt = o.system_prompt;
    if (o.max_tokens > 0) t.sampling.max_tokens = o.max_tokens;
    if (o.temperature >= 0) t.sampling.temperature = o.temperature;
    t.pin_output_length = o.pin_output_length;
    t.turns = std::max(1, o.turns);
    if (!o.output_tokens.empty()) {
      RL_ASSIGN_OR_RETURN(t.output_tokens, LengthDist::Parse(o.output_tokens));
    }
    if (!o.dataset.empty()) {
      t.file = o.dataset;
      std::string fmt_name = o.dataset_format;
      const bool json_ext = o.dataset.size() > 5 &&
                            o.dataset.substr(o.dataset.size() - 5) == ".json";
      if (fmt_name.empty())
        fmt_name = (o.dataset.find("sharegpt") != std::string::npos || json_ext)
                       ? "sharegpt"
                       : "jsonl";
      if (fmt_name == "jsonl") {
        t.source = TaskSpec::Source::kJsonl;
      } else if (fmt_name == "sharegpt") {
        t.source = TaskSpec::Source::kShareGpt;
      } else {
        return Status::InvalidArgument(
            "--dataset-format must be jsonl or sharegpt");
      }
    } else if (!o.input_tokens.empty()) {
      t.source = TaskSpec::Source::kSynthetic;
      RL_ASSIGN_OR_RETURN(t.input_tokens, LengthDist::Parse(o.input_tokens));
    } else if (t.api == api::ApiKind::kChat) {
      if (!o.system_prompt.empty())
        t.messages.push_back({"system", o.system_prompt});
      t.messages.push_back({"user", o.prompt});
    } else {
      t.prompt = o.prompt;
    }
    p.tasks.push_back(std::move(t));
  }

  // Thresholds.
  if (!o.profile.empty()) {
    RL_ASSIGN_OR_RETURN(auto ts, ProfileThresholds(o.profile));
    p.thresholds.insert(p.thresholds.end(), ts.begin(), ts.end());
  }
  for (const std::string& e : o.slo) {
    RL_ASSIGN_OR_RETURN(auto ts, ParseThresholds(e));
    p.thresholds.insert(p.thresholds.end(), ts.begin(), ts.end());
  }
  if (o.abort_on_fail) {
    RL_ASSIGN_OR_RETURN(int64_t delay_ns, ParseDurationNs(o.abort_delay));
    bool any = false;
    for (Threshold& t : p.thresholds) {
      if (!CanAbortOnFail(t)) continue;
      any = true;
      if (t.abort_on_fail)
        continue;  // an explicit `abort(...)` keeps its own delay
      t.abort_on_fail = true;
      t.abort_delay_ns = delay_ns;
    }
    if (!any)
      return Status::InvalidArgument(
          "--abort-on-fail needs a latency or error threshold (--slo or "
          "--profile)");
  }
  if (o.find_max_rate) {
    for (const Threshold& t : p.thresholds) {
      if (t.abort_on_fail)
        return Status::InvalidArgument(
            "abort-on-fail does not apply to --find-max-rate");
    }
  }
  rc.thresholds = p.thresholds;
  if (!o.goodput.empty()) {
    RL_ASSIGN_OR_RETURN(p.goodput, ParseGoodput(o.goodput));
  }
  if (!o.max_dispatch_delay.empty()) {
    RL_ASSIGN_OR_RETURN(int64_t ns, ParseDurationNs(o.max_dispatch_delay));
    p.validity.dispatch_bound_us = std::max<int64_t>(1, ns / 1000);
  }
  RL_ASSIGN_OR_RETURN(p.max_error_rate,
                      ParsePercentOrFraction(o.max_error_rate));
  RL_ASSIGN_OR_RETURN(p.validity.send_rate_tolerance,
                      ParsePercentOrFraction(o.rate_tolerance));

  // Config echo (display order).
  auto& c = p.config;
  c.push_back({"url", rc.base_url});
  std::string api_desc = o.scenario.empty() ? o.api : "scenario " + o.scenario;
  if (o.scenario.empty())
    api_desc += o.no_stream ? ", non-streaming" : ", streaming";
  if (!o.model.empty()) api_desc += ", model " + o.model;
  c.push_back({"api", api_desc});
  std::string load;
  if (rc.mode == RunConfig::Mode::kOpen) {
    load = o.stages.empty()
               ? fmt::format("open loop {} {:.4g}/s",
                             ArrivalKindName(rc.arrival), rc.rate_rps)
               : fmt::format("open loop {} stages {}",
                             ArrivalKindName(rc.arrival), o.stages);
    if (rc.arrival == ArrivalKind::kGamma)
      load += fmt::format(" (burstiness {})", rc.burstiness);
    if (rc.max_in_flight > 0)
      load += fmt::format(", in-flight cap {}", rc.max_in_flight);
  } else {
    load = fmt::format("closed loop {} user{}, think {}", rc.users,
                       rc.users == 1 ? "" : "s", rc.think.ToString());
  }
  c.push_back({"load", load});
  std::string length;
  if (rc.max_requests >= 0)
    length = fmt::format("{} requests", rc.max_requests);
  if (rc.duration_ns > 0)
    length += (length.empty() ? "" : " or ") +
              fmt::format("{:.4g}s", static_cast<double>(rc.duration_ns) / 1e9);
  if (rc.warmup_ns > 0)
    length += fmt::format(" + warm-up {:.4g}s",
                          static_cast<double>(rc.warmup_ns) / 1e9);
  if (rc.warmup_requests > 0)
    length += fmt::format(" + warm-up {} requests", rc.warmup_requests);
  length += fmt::format(", cold requests {}", rc.cold_requests);
  c.push_back({"length", length});
  c.push_back(
      {"timeouts", fmt::format("request {}, stream idle {}, connect {}",
                               o.timeout, o.idle_timeout, o.connect_timeout)});
  c.push_back({"seed", std::to_string(rc.seed) +
                           (rc.realtime ? ", real-time scheduling" : "")});
  if (!o.profile.empty()) c.push_back({"profile", o.profile});
  std::string slos, aborts;
  for (const Threshold& t : p.thresholds) {
    slos += (slos.empty() ? "" : "; ") + t.source;
    if (t.abort_on_fail) {
      aborts +=
          fmt::format("{}{} (delay {:.4g}s)", aborts.empty() ? "" : "; ",
                      t.source, static_cast<double>(t.abort_delay_ns) / 1e9);
    }
  }
  if (!slos.empty()) c.push_back({"thresholds", slos});
  if (!aborts.empty()) c.push_back({"abort_on_fail", aborts});
  if (o.find_max_rate)
    c.push_back(
        {"capacity_search",
         fmt::format("min samples {}, confidence {}, resolution {}, "
                     "repeat {}{}",
                     o.min_samples, o.confidence, o.resolution, o.repeat,
                     o.max_step.empty() ? "" : ", max step " + o.max_step)});
  if (o.expected_rate > 0)
    c.push_back(
        {"expected_rate", fmt::format("{:.4g}/s (target 1.2x = {:.4g}/s)",
                                      o.expected_rate, 1.2 * o.expected_rate)});
  if (!p.events.empty()) {
    std::string list;
    for (const EventSpec& e : p.events)
      list += fmt::format("{}@{} {}", list.empty() ? "" : "; ",
                          FormatSeconds(static_cast<double>(e.offset_ns) / 1e9),
                          e.command);
    c.push_back(
        {"events", list + fmt::format(" (timeout {})", o.event_timeout)});
  }
  p.echo = BuildEcho(o, p);
  return p;
}

Result<CapacityOptions> CapacityOptionsFrom(const BenchCommandOptions& o) {
  CapacityOptions co;
  co.probe_users = o.probe_users;
  co.expected_rps = o.expected_rate;
  co.scrape_url = o.scrape;
  if (o.probe_users < 1)
    return Status::InvalidArgument("--probe-users must be >= 1");
  if (o.min_samples < 1)
    return Status::InvalidArgument("--min-samples must be >= 1");
  co.min_samples = o.min_samples;
  RL_ASSIGN_OR_RETURN(co.confidence, ParsePercentOrFraction(o.confidence));
  if (co.confidence < 0.5 || co.confidence >= 1)
    return Status::InvalidArgument(
        "--confidence must be at least 50% and below 100%");
  RL_ASSIGN_OR_RETURN(co.resolution, ParsePercentOrFraction(o.resolution));
  if (co.resolution <= 0 || co.resolution > 0.5)
    return Status::InvalidArgument("--resolution must be in (0, 50%]");
  if (!o.max_step.empty()) {
    RL_ASSIGN_OR_RETURN(co.max_step_ns, ParseDurationNs(o.max_step));
    if (co.max_step_ns <= 0)
      return Status::InvalidArgument("--max-step must be > 0");
  }
  if (o.repeat < 1 || o.repeat > 100)
    return Status::InvalidArgument("--repeat must be in 1..100");
  co.repeat = o.repeat;
  RL_ASSIGN_OR_RETURN(co.drain_timeout_ns, ParseDurationNs(o.drain_timeout));
  return co;
}

// Planned length of the load timeline in seconds (warm-up + measurement, or
// the stages); 0 when the run is bounded by a request count instead.
double PlannedSeconds(const RunConfig& rc) {
  int64_t ns = 0;
  if (rc.mode == RunConfig::Mode::kOpen && !rc.stages.empty()) {
    for (const Stage& st : rc.stages) ns += st.duration_ns;
  } else if (rc.duration_ns > 0) {
    ns = rc.warmup_ns + rc.duration_ns;
  }
  return static_cast<double>(ns) / 1e9;
}

// "12.0s / 60s, ETA 48s" when the length is planned ("12.0s / 60s" on the
// final line), else "12.0s".
std::string ElapsedOfTotal(double elapsed_s, double total_s, bool final) {
  if (total_s <= 0) return fmt::format("{:6.1f}s", elapsed_s);
  if (final) return fmt::format("{:6.1f}s / {:.0f}s", elapsed_s, total_s);
  return fmt::format("{:6.1f}s / {:.0f}s, ETA {:.0f}s", elapsed_s, total_s,
                     std::max(0.0, total_s - elapsed_s));
}

std::string ProgressLine(const Progress& p, double total_s) {
  return fmt::format(
      "[{} {:<7}] sent {} ok {} fail {} in-flight {}{} | {:.1f} req/s | "
      "ttft p50 {} p99 {} | e2e p50 {} p99 {}",
      ElapsedOfTotal(p.elapsed_s, total_s, p.final), PhaseName(p.phase), p.sent,
      p.ok, p.failed, p.in_flight,
      p.waiting ? fmt::format(" queued {}", p.waiting) : "", p.done_rps,
      FormatUs(p.ttft_p50_us), FormatUs(p.ttft_p99_us), FormatUs(p.e2e_p50_us),
      FormatUs(p.e2e_p99_us));
}

}  // namespace

int RunBenchCommand(const BenchCommandOptions& o,
                    const std::atomic<bool>* stop_flag, std::FILE* out,
                    std::FILE* err) {
  RaiseFdLimit();
  auto plan_or = BuildPlan(o);
  if (!plan_or.ok()) {
    fmt::print(err, "redline bench: {}\n", plan_or.status().message());
    return kExitToolError;
  }
  Plan& plan = *plan_or;
  RunConfig& rc = plan.run;
  rc.stop_flag = stop_flag;

  auto workload_or =
      Workload::Create(plan.tasks, o.model, plan.base_path, o.seed);
  if (!workload_or.ok()) {
    fmt::print(err, "redline bench: {}\n", workload_or.status().message());
    return kExitToolError;
  }
  Workload& workload = **workload_or;
  std::vector<std::string> task_names;
  for (const TaskSpec& t : workload.tasks()) task_names.push_back(t.name);

  // Progress: one live line on a terminal, plain lines every 5 s otherwise.
  const bool tty = !o.quiet && ::isatty(::fileno(err));
  rc.progress_interval_ns = tty ? 500'000'000 : 5'000'000'000;
  if (!o.quiet) {
    const double total_s = PlannedSeconds(rc);
    rc.on_progress = [tty, err, total_s](const Progress& p) {
      if (tty) {
        fmt::print(err, "\r\033[2K{}{}", ProgressLine(p, total_s),
                   p.final ? "\n" : "");
      } else {
        fmt::print(err, "{}\n", ProgressLine(p, total_s));
      }
      std::fflush(err);
    };
  }
  std::unique_ptr<Scraper> scraper;
  if (!o.scrape.empty()) {
    std::vector<std::string> filter;
    std::string_view f = o.scrape_filter;
    while (!f.empty()) {
      size_t comma = f.find(',');
      std::string_view item = Trim(f.substr(0, comma));
      if (!item.empty()) filter.emplace_back(item);
      f = comma == std::string_view::npos ? std::string_view()
                                          : f.substr(comma + 1);
    }
    scraper = std::make_unique<Scraper>(o.scrape, filter);
    rc.on_tick = [&scraper](http::Client& client, int64_t now) {
      scraper->Sample(client, now);
    };
    // At least one sample per second for the series, even off a terminal.
    rc.progress_interval_ns =
        std::min<int64_t>(rc.progress_interval_ns, 1'000'000'000);
    if (!tty && rc.on_progress) {
      auto inner = rc.on_progress;
      auto counter = std::make_shared<int>(0);
      rc.on_progress = [inner, counter](const Progress& p) {
        if (p.final || ++*counter % 5 == 0) inner(p);
      };
    }
  }

  // Cold start: launch the server and wait until it is ready.
  std::unique_ptr<ServerProcess> server;
  std::optional<ColdStartInfo> cold;
  if (!o.cold_start.empty()) {
    ColdStartInfo info;
    info.command = o.cold_start;
    auto launched = ServerProcess::Launch(o.cold_start, o.server_log);
    if (!launched.ok()) {
      fmt::print(err, "redline bench: {}\n", launched.status().message());
      return kExitToolError;
    }
    server = std::move(*launched);
    std::vector<std::string> urls;
    if (!o.ready_url.empty()) {
      urls.push_back(o.ready_url);
    } else {
      const http::Origin origin = http::ParseUrl(rc.base_url)->origin;
      urls = {origin.ToString() + "/readyz", origin.ToString() + "/health"};
    }
    auto ready_timeout = ParseDurationNs(o.ready_timeout);
    if (!ready_timeout.ok()) {
      fmt::print(err, "redline bench: {}\n", ready_timeout.status().message());
      return kExitToolError;
    }
    if (!o.quiet)
      fmt::print(err, "cold start: launched '{}' (pid {}), polling readiness\n",
                 o.cold_start, server->pid());
    Status st =
        WaitReady(urls, *ready_timeout / 1'000'000, 50, server.get(), &info);
    if (!st.ok()) {
      fmt::print(err, "redline bench: cold start failed: {}\n", st.message());
      return kExitToolError;
    }
    if (!o.quiet)
      fmt::print(err, "cold start: ready after {:.2f} s ({})\n",
                 info.time_to_ready_s, info.ready_url);
    if (rc.cold_requests < 1) rc.cold_requests = 1;
    cold = info;
  }

  if (!o.no_preflight) {
    if (Status st = Preflight(rc); !st.ok()) {
      fmt::print(err, "redline bench: {}\n", st.message());
      if (server) server->Stop();
      // Unreachable (or refused for a key) is a tool error, as before; a
      // target that is not an OpenAI API makes any run invalid.
      return st.code() == StatusCode::kUnavailable ? kExitToolError
                                                   : kExitInvalidRun;
    }
  }

  RunResult run;
  std::vector<EventRecord> event_records;
  std::optional<CapacityResult> capacity;
  // A search's bottleneck is read at the knee (KneeRate in capacity.h).
  RunResult knee_run;
  double knee_rps = 0;
  if (o.find_max_rate) {
    auto co_or = CapacityOptionsFrom(o);
    if (!co_or.ok()) {
      fmt::print(err, "redline bench: {}\n", co_or.status().message());
      if (server) server->Stop();
      return kExitToolError;
    }
    CapacityOptions co = *co_or;
    if (!o.quiet)
      co.log = [err](const std::string& line) {
        fmt::print(err, "capacity: {}\n", line);
      };
    auto on_progress = rc.on_progress;
    if (!tty)
      rc.on_progress = nullptr;  // probe lines are enough off a terminal
    auto cap = FindMaxRate(rc, workload, plan.thresholds, plan.validity, co);
    rc.on_progress = on_progress;
    if (!cap.ok()) {
      fmt::print(err, "redline bench: {}\n", cap.status().message());
      return kExitToolError;
    }
    capacity = cap->result;
    run = std::move(cap->best_run);
    knee_run = std::move(cap->knee_run);
    knee_rps = cap->knee_rps;
  } else {
    // The commands run on a thread of their own; the load's loop only
    // tells it when the timeline starts.
    const SteadyClock steady;
    std::unique_ptr<EventThread> events;
    if (!plan.events.empty()) {
      EventRunnerOptions eo = plan.event_options;
      if (!o.quiet) {
        // One line when each command starts and ends (a whole line on a
        // terminal, where the live progress line is redrawn after it).
        eo.on_update = [err, tty](const EventRecord& e) {
          const std::string at =
              FormatSeconds(static_cast<double>(e.spec.offset_ns) / 1e9);
          const std::string what =
              e.finished  ? fmt::format("{} at {:.2f}s", e.Outcome(), e.end_s)
              : e.started ? fmt::format("started at {:.2f}s", e.start_s)
                          : e.Outcome();
          fmt::print(err, "{}event @{} '{}': {}\n", tty ? "\r\033[2K" : "", at,
                     e.spec.command, what);
          std::fflush(err);
        };
      }
      events = std::make_unique<EventThread>(plan.events, eo, steady);
      EventThread* thread = events.get();
      rc.on_load_start = [thread](int64_t start_ns) {
        thread->OnLoadStart(start_ns);
      };
    }
    auto result = RunLoad(rc, workload);
    if (events) event_records = events->Finish();
    rc.on_load_start = nullptr;
    if (!result.ok()) {
      fmt::print(err, "redline bench: {}\n", result.status().message());
      if (server) server->Stop();
      return kExitToolError;
    }
    run = std::move(*result);
  }
  if (server) server->Stop();

  ReportInputs in;
  in.config = plan.config;
  in.config_echo = plan.echo;
  in.thresholds = plan.thresholds;
  in.goodput = plan.goodput;
  in.validity = plan.validity;
  in.warmup_ns = rc.warmup_ns;
  if (o.expected_rate > 0 && !o.find_max_rate)
    in.expected_rps = o.expected_rate;
  in.arrival = rc.arrival;
  in.task_names = task_names;
  in.max_error_rate = plan.max_error_rate;
  BenchReport report = BuildReport(run, in);
  report.cold_start = cold;
  report.first_errors = run.first_errors;
  for (const EventRecord& e : event_records) {
    if (e.Failed())
      report.warnings.push_back(fmt::format(
          "event @{} '{}': {}",
          FormatSeconds(static_cast<double>(e.spec.offset_ns) / 1e9),
          e.spec.command, e.Outcome()));
  }
  report.events = std::move(event_records);
  if (capacity) {
    report.capacity = capacity;
    if (capacity->capacity_rps <= 0 && report.verdict == Verdict::kPass) {
      report.verdict = Verdict::kFail;
      report.verdict_reason = "no offered rate met every threshold";
      report.failed_checks.push_back(report.verdict_reason);
      report.exit_code = kExitSloFailed;
    } else {
      DecideVerdict(report);
    }
  }
  if (scraper) {
    report.scrape_url = scraper->url();
    report.scrape = scraper->Series(run.start_ns);
    report.scrape_histograms = scraper->Histograms(run.start_ns);
    if (scraper->samples() == 0)
      report.warnings.push_back(
          fmt::format("no successful scrape of {}", scraper->url()));
  }

  if (!knee_run.records.empty()) {
    const std::vector<ScrapeSeries> series =
        scraper ? scraper->Series(knee_run.start_ns)
                : std::vector<ScrapeSeries>();
    AttachBottleneck(
        report, knee_run, series, o.max_connections,
        fmt::format("the step at {:.2f} req/s, the lowest rate that failed "
                    "above every rate that held",
                    knee_rps));
  } else {
    AttachBottleneck(report, run, report.scrape, o.max_connections,
                     capacity ? "the step at the capacity rate" : "the run");
  }

  fmt::print(out, "{}", RenderText(report));
  std::fflush(out);
  int code = report.exit_code;
  auto write = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    Status st = WriteFile(path, text);
    if (!st.ok()) {
      fmt::print(err, "redline bench: {}\n", st.message());
      code = kExitToolError;
    }
  };
  write(o.json_path, RenderJson(report));
  write(o.html_path, RenderHtml(report));
  write(o.requests_out, RenderRequestsJsonl(run, task_names));
  if (o.debug_requests > 0) {
    write(o.debug_file, RenderDebugExchangesJsonl(run));
    fmt::print(err, "redline bench: {} exchange(s) written to {}\n",
               run.debug_exchanges.size(), o.debug_file);
  }
  return code;
}

int RunCompareCommand(const std::string& path_a, const std::string& path_b,
                      double tolerance, std::FILE* out, std::FILE* err) {
  auto a = ReadFile(path_a);
  auto b = ReadFile(path_b);
  if (!a.ok() || !b.ok()) {
    fmt::print(err, "redline bench compare: {}\n",
               (!a.ok() ? a.status() : b.status()).message());
    return kExitToolError;
  }
  CompareOptions opt;
  opt.latency_tolerance = tolerance;
  opt.throughput_tolerance = tolerance;
  auto res = CompareResults(*a, *b, opt);
  if (!res.ok()) {
    fmt::print(err, "redline bench compare: {}\n", res.status().message());
    return kExitToolError;
  }
  fmt::print(out, "{}", RenderCompare(*res, path_a, path_b));
  return res->any_regression ? kExitSloFailed : kExitPass;
}

}  // namespace redline::bench

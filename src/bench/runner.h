// RunLoad: drives one load run against an OpenAI-compatible endpoint and
// returns the per-request records. Everything (timers, sockets, parsing,
// bookkeeping) runs on one EventLoop on the calling thread, so the client is
// lock-free and its cost per request is small and steady.
//
// Sequence: optional cold phase (the first request(s), sent alone and
// reported separately, docs/METRICS.md#phases), then the load timeline:
// [warm-up | measurement], then a drain of in-flight requests.
//
// Open loop: arrivals follow an ArrivalPlan on an absolute schedule; with an
// in-flight cap, arrivals wait in a FIFO and the wait counts as dispatch
// delay (t_sched stays the planned time). Closed loop: N virtual users each
// send, read the whole response, think (Locust semantics), repeat; t_sched of
// the next request = end of the response + think time.
//
// Thresholds marked abort-on-fail (bench/abort.h) are checked as measured
// requests finish; the first that fails stops the run at once.
//
// Thread-safety: RunLoad blocks its caller; the optional progress callback
// runs on the same thread. `stop_flag` may be set from any thread (SIGINT).
#ifndef REDLINE_BENCH_RUNNER_H_
#define REDLINE_BENCH_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/arrival.h"
#include "bench/record.h"
#include "bench/threshold.h"
#include "bench/workload.h"
#include "http/client.h"

namespace redline::bench {

struct RunConfig {
  // Target.
  std::string base_url;                 // e.g. "http://127.0.0.1:8000/v1"
  std::string api_key;                  // sent as "Authorization: Bearer <key>"
  std::vector<http::Header> headers;    // added to every request
  int64_t request_timeout_ms = 60'000;  // total per request (0: none)
  int64_t idle_timeout_ms = 30'000;     // stream idle limit (0: none)
  int64_t connect_timeout_ms = 10'000;
  bool tls_verify = true;
  std::string tls_ca_file;
  int max_connections = 0;  // 0: one connection per in-flight request

  // Load model.
  enum class Mode { kClosed, kOpen };
  Mode mode = Mode::kClosed;
  int users = 1;           // closed loop
  ThinkTime think;         // closed loop
  int64_t ramp_up_ns = 0;  // closed loop: users start spread over this
  double rate_rps = 1;     // open loop, when `stages` is empty
  ArrivalKind arrival = ArrivalKind::kPoisson;
  double burstiness = 1;      // gamma shape
  std::vector<Stage> stages;  // open loop; overrides rate and duration
  int64_t max_in_flight = 0;  // open loop cap; 0 = none

  int64_t duration_ns = 0;      // measurement length (0: use max_requests)
  int64_t max_requests = -1;    // measured requests (-1: use duration)
  int64_t warmup_ns = 0;        // excluded from statistics
  int64_t warmup_requests = 0;  // closed loop: first N requests are warm-up
  int cold_requests = 1;        // sent alone first, reported as cold
  uint64_t seed = 1;
  // Run the loop thread under SCHED_FIFO (needs CAP_SYS_NICE). On a busy
  // machine, wake-ups of an ordinary thread can lag by milliseconds, which
  // shows up as dispatch delay; a real-time thread is woken at once. The
  // thread blocks in epoll between events (apart from at most 200 us of
  // polling before each open-loop send), so it does not hog the CPU.
  // Without it (or when it is refused) the thread asks the fair scheduler
  // for a short time slice instead (runner.cc, ShortSlice).
  bool realtime = false;

  // Send a fresh W3C `traceparent` (sampled) with every request and keep its
  // trace id in the record (RequestRecord::trace_id); `--no-traceparent`
  // turns it off. A `traceparent` among `headers` is sent as given instead,
  // and its trace id recorded.
  bool send_traceparent = true;

  // Keep the first this many request/response exchanges in full
  // (RunResult::debug_exchanges; `bench --debug-requests N`).
  int64_t debug_requests = 0;

  // Progress: called every `progress_interval_ns` and once at the end.
  int64_t progress_interval_ns = 1'000'000'000;
  std::function<void(const struct Progress&)> on_progress;
  const std::atomic<bool>* stop_flag = nullptr;

  // Called on the loop thread at each progress tick with the loop's client,
  // for side jobs such as scraping /metrics (bench/scrape.h).
  std::function<void(http::Client&, int64_t now_ns)> on_tick;

  // Called once on the loop thread when the load timeline starts (after the
  // cold phase), with RunResult::start_ns; for `--event` (bench/event_runner.h).
  // It must not block.
  std::function<void(int64_t start_ns)> on_load_start;

  // Early abort (bench/abort.h): the thresholds with abort_on_fail are
  // checked on the measurement phase while the run goes on; the first that
  // fails stops the run at once (RunResult::abort). Others are ignored here.
  std::vector<Threshold> thresholds;
};

// Why and when an abort-on-fail threshold stopped the run.
struct AbortInfo {
  std::string threshold;  // the assertion as written
  std::string reason;     // one line for the report
  bool certain = false;  // failed for good, rather than failing after its delay
  double at_s = 0;       // seconds from the load timeline start
  // Requests in flight at that moment: cancelled, and reported in the
  // cooldown phase (excluded from the statistics) since they have no outcome.
  int64_t cancelled = 0;
};

struct Progress {
  double elapsed_s = 0;
  Phase phase = Phase::kCold;
  int64_t sent = 0;
  int64_t done = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t in_flight = 0;
  int64_t waiting = 0;  // open loop: arrivals queued behind the cap
  double send_rps = 0;  // over the last interval
  double done_rps = 0;
  double ttft_p50_us = 0,
         ttft_p99_us = 0;  // measurement phase so far (success only)
  double e2e_p50_us = 0, e2e_p99_us = 0;
  bool final = false;
};

struct RunResult {
  std::vector<RequestRecord> records;
  bool open_loop = false;
  int64_t start_ns = 0;        // load timeline start (after the cold phase)
  int64_t end_ns = 0;          // last request finished
  int64_t planned_warmup = 0;  // open loop arrivals per phase
  int64_t planned_measure = 0;
  bool interrupted = false;  // stop_flag or the hard deadline ended the run
  std::string stop_reason;
  std::optional<AbortInfo> abort;  // an abort-on-fail threshold ended the run
  double cpu_seconds = 0;          // process CPU time during the run
  double wall_seconds = 0;
  uint64_t connections_opened = 0;
  std::vector<std::string> notes;  // e.g. "real-time scheduling not permitted"
  // The first failure of each error class, in the order they happened.
  std::vector<ErrorSample> first_errors;
  // The first RunConfig::debug_requests exchanges, in completion order.
  std::vector<DebugExchange> debug_exchanges;
};

// Runs the load. Returns an error (tool error) for bad configuration, or
// when every cold request failed to connect (target unreachable at start).
Result<RunResult> RunLoad(const RunConfig& config, Workload& workload);

// Normalizes a base URL: "http://h:8000" -> "http://h:8000/v1"; a URL with a
// path is kept as given.
std::string NormalizeBaseUrl(const std::string& url);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_RUNNER_H_

// The bottleneck finder (docs/OBSERVABILITY.md#the-bottleneck-finder): from
// what bench measured, the server's per-request timing and the scraped
// /metrics, names the likely bottleneck of a run with its evidence and a
// suggested action, and for a capacity search the knee (the offered rate
// where each SLO breaks).
//
// The rules are pure functions of BottleneckInput, a plain struct with every
// signal they use, so tests can state a situation directly; GatherBottleneck
// Input (bottleneck_input.cc) fills it from a run. Every threshold below is
// a named constant and listed in the doc.
//
// Thread-safety: values, thread-compatible. Cost: O(1) for the rules.
#ifndef REDLINE_BENCH_BOTTLENECK_H_
#define REDLINE_BENCH_BOTTLENECK_H_

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/decomposition.h"
#include "bench/runner.h"
#include "bench/scrape.h"

namespace redline::bench {

struct CapacityResult;

// A signal that was not measured is NaN (fractions, rates, ratios) or -1
// (counts); the rules skip what they do not have and say so.
struct BottleneckInput {
  // ---- bench's own measurements (measurement phase) ----
  int64_t ok_requests = 0;
  double e2e_p50_ms = 0, e2e_p99_ms = 0;
  double dispatch_p99_ms = 0;
  // Bench's CPU seconds / wall seconds: 1 is one core busy; the client runs
  // one event-loop thread, so near 1 it cannot keep up.
  double client_cpu = -1;
  int max_connections = 0;  // --max-connections (0: none)
  int64_t http_429 = 0;     // refused by the server (rate limit, admission)

  // ---- the decomposition (bench/decomposition.h) ----
  // Requests with the server's timing / successful requests.
  double timing_coverage = 0;
  // Share of each part in the total (client + E2E) of the requests near p50
  // and p99 of that total, indexed by Part; without server timing only the
  // client's share is set (from dispatch delay).
  PartArray share_p50{}, share_p99{};

  // ---- relations across requests (Spearman rank correlation, NaN with
  // fewer than 8 requests or no spread) ----
  // Time to first token (the server's prefill when sent) vs prompt tokens.
  double ttft_prompt_corr = std::nan("");
  // Largest / smallest prompt length seen (1 when all equal).
  double prompt_spread = 1;
  // A request's mean inter-token latency vs the requests in flight when it
  // was sent.
  double itl_concurrency_corr = std::nan("");
  // Mean ITL of the requests sent at the top quarter of concurrency over
  // that of the bottom quarter (NaN when the quarters do not differ).
  double itl_growth = std::nan("");

  // ---- scraped server metrics (--scrape) ----
  bool scraped = false;
  // Samples with requests waiting while the running gauge sat at its
  // limit (num_slots of cache_config_info, else the highest value seen), as
  // a fraction of the samples; NaN without both gauges.
  double waiting_at_limit = std::nan("");
  double waiting_max = -1, running_max = -1, slot_limit = -1;
  double kv_usage_max = std::nan("");  // 0..1
  double preemptions = -1;             // counter increase during the run
  double system_cpu = std::nan("");    // mean of the samples, 0..1
  double process_cpu = std::nan("");   // 0..1 of all CPUs
  double memory_used_fraction = std::nan("");  // max of used / limit
  double swap_in_pages_per_s = std::nan("");   // over the run
};

// Causes, in the order ties are broken (the earlier wins).
enum class Cause : uint8_t {
  kMemory,
  kKvCache,
  kClient,
  kQueueing,
  kPrefill,
  kDecode,
  kNetwork,
  kGateway,
  kCpu,
  kNone
};
// "memory", "kv_cache", "client", "queueing", "prefill", "decode",
// "network", "gateway", "cpu", "none".
std::string_view CauseKey(Cause cause);

struct Finding {
  Cause cause = Cause::kNone;
  std::string title;  // "queueing: requests wait for a slot"
  // How strongly the signals point at it, 0..1: the rules rank by it.
  double score = 0;
  std::vector<std::string> evidence;  // one measured fact a line
  std::string action;
};

// Where one SLO breaks in a capacity search.
struct Knee {
  std::string threshold;  // as written
  double holds_rps = 0;   // highest rate below the break where it passed
  // Lowest rate where it failed with no pass at that rate or above
  // (KneeRate; 0: never).
  double breaks_rps = 0;
};

struct BottleneckReport {
  Finding primary;              // kNone with an explanation when no rule fired
  std::vector<Finding> others;  // every other rule that fired, best first
  std::vector<std::string> missing;  // signals the rules could not use
  std::string scope;  // what was analysed ("the run", "the step at 12 req/s")
  std::vector<Knee> knees;  // capacity search only
};

// Applies the rules.
BottleneckReport FindBottleneck(const BottleneckInput& in);

// Fills the input from a run, its decomposition and the scraped series
// (relative to the load start; empty without --scrape).
BottleneckInput GatherBottleneckInput(const RunResult& run,
                                      const Decomposition& decomposition,
                                      std::span<const ScrapeSeries> scrape,
                                      int max_connections);

// The knee of each SLO over a capacity search's valid steps.
std::vector<Knee> FindKnees(const CapacityResult& capacity);

// Spearman's rank correlation of paired samples (NaN below 8 pairs or when
// either side is constant). Exposed for tests.
double SpearmanCorrelation(std::span<const double> x,
                           std::span<const double> y);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_BOTTLENECK_H_

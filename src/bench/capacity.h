// Capacity search (--find-max-rate,
// docs/METRICS.md#peak-check-and-capacity-search): a closed-loop
// saturation probe finds the ceiling, then the offered rate is bisected below
// it; every probe is a full warm-up plus measurement run, judged on every
// threshold, on validity and on keeping up (completed >= offered minus the
// arrival-sampling tolerance).
#ifndef REDLINE_BENCH_CAPACITY_H_
#define REDLINE_BENCH_CAPACITY_H_

#include <functional>
#include <optional>
#include <string>

#include "base/result.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/threshold.h"
#include "bench/workload.h"

namespace redline::bench {

struct CapacityOptions {
  int probe_users = 64;     // closed-loop saturation probe concurrency
  int max_probes = 7;       // bisection steps after the ceiling probe
  double precision = 0.05;  // stop when the bracket is this narrow (relative)
  double expected_rps = 0;  // for headroom; 0 when unknown
  std::function<void(const std::string&)> log;  // one line per probe
};

struct CapacityRun {
  CapacityResult result;
  RunResult best_run;  // the run at the capacity rate (or the last probe)
  bool found = false;
};

// `base` supplies target, workload, warm-up and duration; its load model is
// replaced per probe.
Result<CapacityRun> FindMaxRate(const RunConfig& base, Workload& workload,
                                const std::vector<Threshold>& thresholds,
                                const ValidityOptions& validity,
                                const CapacityOptions& options);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_CAPACITY_H_

// Open-loop arrival plans and closed-loop think times
// (docs/METRICS.md#load-models).
//
// ArrivalPlan yields the intended send times of an open-loop run as
// offsets from the run start on an ABSOLUTE schedule: offset_i is computed
// from the plan alone, never from when earlier requests were actually sent,
// so a late send cannot shift the ones after it (no drift, no coordinated
// omission). Rates may change by stage, stepwise or as a linear ramp.
//
// Inter-arrival gaps are drawn in "unit-rate time" (the integral of the
// rate, Lambda(t)) and mapped back through Lambda^-1, which handles ramps
// exactly:
//   constant: gap 1            poisson: Exp(1)
//   gamma:    Gamma(k, 1/k), k = burstiness (k = 1 is Poisson; smaller is
//             burstier; the mean gap stays 1/rate as in vLLM's --burstiness)
//
// Thread-safety: thread-compatible. Deterministic for a given seed.
#ifndef REDLINE_BENCH_ARRIVAL_H_
#define REDLINE_BENCH_ARRIVAL_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::bench {

enum class ArrivalKind { kConstant, kPoisson, kGamma };
Result<ArrivalKind> ParseArrivalKind(std::string_view text);
std::string_view ArrivalKindName(ArrivalKind kind);

// One stage: `duration_ns` long, rate going linearly from `start_rps` to
// `end_rps` (equal for a flat stage).
struct Stage {
  int64_t duration_ns = 0;
  double start_rps = 0;
  double end_rps = 0;
};

// "30s:5rps,60s:20rps" (flat stages) or "60s:5-20rps" (a ramp).
Result<std::vector<Stage>> ParseStages(std::string_view text);

class ArrivalPlan {
 public:
  // The plan ends after the stages' total duration or after `max_arrivals`
  // (when >= 0), whichever comes first. Stages of total duration 0 mean "the
  // last stage's rate forever" (end it with max_arrivals or by the caller).
  ArrivalPlan(ArrivalKind kind, double burstiness, std::vector<Stage> stages,
              uint64_t seed, int64_t max_arrivals = -1);

  // The next intended offset from the run start in ns, or nullopt when the
  // plan is over. The first arrival is at offset 0.
  std::optional<int64_t> Next();

  int64_t total_duration_ns() const { return total_ns_; }
  int64_t produced() const { return produced_; }
  // Offered rate at offset t (for reports).
  double RateAt(int64_t offset_ns) const;

 private:
  double Gap();  // in unit-rate time
  // Maps unit-rate time to an offset; nullopt past the end of the stages.
  std::optional<int64_t> Invert(double lambda);

  ArrivalKind kind_;
  double burstiness_;
  std::vector<Stage> stages_;
  int64_t max_arrivals_;
  int64_t total_ns_ = 0;
  std::mt19937_64 rng_;
  double lambda_ = 0;  // unit-rate time of the next arrival
  int64_t produced_ = 0;
  bool unbounded_ = false;
};

// Think time after each response (Locust semantics): drawn per user after
// the response ends, success or error; excluded from every latency.
struct ThinkTime {
  enum class Kind { kNone, kConstant, kBetween, kExponential };
  Kind kind = Kind::kNone;
  int64_t a_ns = 0;  // constant value, lower bound, or exponential mean
  int64_t b_ns = 0;  // upper bound (kBetween)

  // "0", "1s", "0.5s..2s", "between(0.5s,2s)", "constant(1s)",
  // "exponential(1s)" / "exp(1s)".
  static Result<ThinkTime> Parse(std::string_view text);
  int64_t SampleNs(std::mt19937_64& rng) const;
  std::string ToString() const;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_ARRIVAL_H_

// Admission: the engine's one policy for accepting or refusing new requests,
// and the one estimate behind every Retry-After it reports. Pure functions of
// a counter snapshot, so they are testable without a model; the engine takes
// the snapshot under the same lock that updates the counters, so a decision
// never misses a sequence that was just admitted.
//
// A group (the n choices of one API request) is decided as a whole: either
// every member is admitted or none is. Rules, in order:
//  1. Queue budget (limits.queue_budget_s > 0): with `in_flight` sequences in
//     the engine (waiting or running, not yet finished) and `parallel`
//     slots, a group of k finds free slots when in_flight + k <= parallel.
//     Otherwise ahead = in_flight + k - parallel sequences must finish
//     first; each round of `parallel` of them takes up to one service time
//     (worst case: the running ones just started), so the wait is bounded by
//       wait_s = service_s * ceil(ahead / parallel).
//     Refused when wait_s > queue_budget_s (Retry-After: the excess,
//     ceil(wait_s - queue_budget_s)). Before any request has finished
//     (service_s == 0) there is no estimate and only free slots admit.
//  2. Waiting-queue count: queued + k > max_waiting_requests is refused.
//  3. Waiting-queue prompt tokens: when other requests already wait,
//     queued_prompt_tokens + the group's tokens > max_waiting_prompt_tokens
//     is refused (a group alone in the queue is admitted however long its
//     prompts, so no request is refused forever).
// Retry-After (>= 1 s) for rules 2 and 3 is the time until enough sequences
// have finished to make room, at the same service-time rate as rule 1:
// service_s * ceil(finishes needed / parallel). Until a first request has
// finished, it falls back to the queued prompt tokens over the recent
// prefill throughput.
//
// Thread-safety: pure functions. Cost: O(group size).
#ifndef REDLINE_ENGINE_ADMISSION_H_
#define REDLINE_ENGINE_ADMISSION_H_

#include <cstdint>
#include <span>

#include "base/status.h"

namespace redline::engine {

// Counters the decision reads, as one consistent snapshot.
struct AdmissionState {
  int parallel = 1;         // slots
  int in_flight = 0;        // sequences admitted by Submit and not yet finished
  int queued_requests = 0;  // of those, still waiting for a slot
  int64_t queued_prompt_tokens = 0;  // their prompt tokens
  // Exponential average of admission-to-finish seconds of recently finished
  // requests; 0 until one has finished.
  double service_s = 0;
  double prefill_tok_per_s = 0;  // recent prefill throughput; 0 = unknown
};

struct AdmissionLimits {
  double queue_budget_s = 0;  // 0 = rule 1 off
  int max_waiting_requests = 64;
  int64_t max_waiting_prompt_tokens = 32768;
};

struct AdmissionDecision {
  Status status;          // OK: admit the whole group; else ResourceExhausted
  int retry_after_s = 0;  // >= 1 when refused, 0 when admitted
  bool ok() const { return status.ok(); }
};

// Decides for a group whose members have these prompt lengths (non-empty).
AdmissionDecision DecideAdmission(const AdmissionState& state,
                                  const AdmissionLimits& limits,
                                  std::span<const int64_t> group_prompt_tokens);

// Seconds (>= 1) until `finishes` more sequences have finished, by the
// estimate above (service time, else prefill throughput).
int RetryAfterForFinishes(const AdmissionState& state, int64_t finishes);

// Weight of the newest sample in the engine's exponential averages.
inline constexpr double kEmaAlpha = 0.2;

// The first sample replaces an unset (0) average.
inline double UpdateEma(double average, double sample) {
  return average == 0 ? sample : (1 - kEmaAlpha) * average + kEmaAlpha * sample;
}

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_ADMISSION_H_

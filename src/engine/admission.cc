#include "engine/admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace redline::engine {
namespace {

// Seconds as a whole Retry-After value, at least 1, without overflow.
int WholeSeconds(double seconds) {
  if (!(seconds > 1.0)) return 1;
  constexpr double kMax = 24.0 * 3600.0;  // a day: beyond it, say a day
  return static_cast<int>(std::ceil(std::min(seconds, kMax)));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

AdmissionDecision Refuse(std::string message, int retry_after_s) {
  return {Status::ResourceExhausted(message), std::max(1, retry_after_s)};
}

}  // namespace

int RetryAfterForFinishes(const AdmissionState& state, int64_t finishes) {
  const int64_t parallel = std::max(1, state.parallel);
  if (state.service_s > 0) {
    const int64_t rounds = CeilDiv(std::max<int64_t>(finishes, 1), parallel);
    return WholeSeconds(state.service_s * static_cast<double>(rounds));
  }
  const double rate = std::max(1.0, state.prefill_tok_per_s);
  return WholeSeconds(static_cast<double>(state.queued_prompt_tokens) / rate);
}

AdmissionDecision DecideAdmission(
    const AdmissionState& state, const AdmissionLimits& limits,
    std::span<const int64_t> group_prompt_tokens) {
  const int64_t k = static_cast<int64_t>(group_prompt_tokens.size());
  const int64_t parallel = std::max(1, state.parallel);
  int64_t group_tokens = 0;
  for (int64_t n : group_prompt_tokens) group_tokens += n;

  // 1. Queue budget.
  if (limits.queue_budget_s > 0) {
    const int64_t ahead = state.in_flight + k - parallel;
    if (ahead > 0) {
      if (state.service_s <= 0) {
        return Refuse(
            "at capacity: every slot is busy and no request has finished yet "
            "to estimate the wait; retry later",
            RetryAfterForFinishes(state, ahead));
      }
      const double wait_s =
          state.service_s * static_cast<double>(CeilDiv(ahead, parallel));
      if (wait_s > limits.queue_budget_s) {
        return Refuse(
            fmt::format("at capacity: the estimated wait for a slot is {:.1f} "
                        "s, over the queue budget of {:.1f} s; retry later",
                        wait_s, limits.queue_budget_s),
            WholeSeconds(wait_s - limits.queue_budget_s));
      }
    }
  }
  // 2. Waiting-queue count.
  if (state.queued_requests + k > limits.max_waiting_requests) {
    const int64_t excess =
        state.queued_requests + k - limits.max_waiting_requests;
    return Refuse(fmt::format("the waiting queue is full ({} requests)",
                              limits.max_waiting_requests),
                  RetryAfterForFinishes(state, excess));
  }
  // 3. Waiting-queue prompt tokens.
  if (state.queued_requests > 0 && state.queued_prompt_tokens + group_tokens >
                                       limits.max_waiting_prompt_tokens) {
    // Requests to leave the queue first, at its average prompt length.
    const int64_t over = state.queued_prompt_tokens + group_tokens -
                         limits.max_waiting_prompt_tokens;
    const int64_t average = std::max<int64_t>(
        1, state.queued_prompt_tokens / state.queued_requests);
    const int64_t leave =
        std::min<int64_t>(CeilDiv(over, average), state.queued_requests);
    return Refuse(
        fmt::format("the waiting queue holds {} prompt tokens; {} more would "
                    "exceed its bound of {}",
                    state.queued_prompt_tokens, group_tokens,
                    limits.max_waiting_prompt_tokens),
        RetryAfterForFinishes(state, leave));
  }
  return {};
}

}  // namespace redline::engine

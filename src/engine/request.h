// Requests into the engine and the events that come back on each request's
// own stream.
//
// Ownership: the caller builds an EngineRequest and gives it to
// Engine::Submit, which returns a shared RequestStream. The engine thread
// pushes events; any other thread consumes them and may Cancel().
// Thread-safety: RequestStream is thread-safe.
#ifndef REDLINE_ENGINE_REQUEST_H_
#define REDLINE_ENGINE_REQUEST_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/sampling/sampling_ops.h"
#include "model/sampling/sampling_params.h"
#include "model/sampling/stop_matcher.h"

namespace redline::engine {

using Clock = std::chrono::steady_clock;

struct EngineRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included if wanted
  model::SamplingParams sampling;
  // Absolute deadline; the request ends with kDeadlineExceeded after it.
  std::optional<Clock::time_point> deadline;
  // When the request arrived at the front end (for queue/TTFT timings).
  Clock::time_point arrival = Clock::now();
  // A start-up warm-up request: served like any other, but its service time
  // does not feed the admission estimate (admission.h), which a few
  // tokens of warm-up would make look far too short.
  bool warmup = false;
  // False: never speculate for this request (the "speculative": false
  // opt-out), even when the engine does.
  bool speculative = true;
};

// One forward pass that processed part of a request's prompt.
struct PrefillChunkTiming {
  double start_ms = 0;  // from arrival
  double end_ms = 0;
  int32_t tokens = 0;        // prompt tokens of this request in the pass
  int32_t batch_tokens = 0;  // every token in the pass (all sequences)
};

// At most this many prefill chunks are kept per request; later ones are
// merged into the last (a prompt of 64 chunks is 32k tokens at 512).
inline constexpr size_t kMaxPrefillChunkTimings = 64;

// Timings of a finished request, in milliseconds from `arrival`, and what
// its trace shows of its time in the engine.
struct RequestTimings {
  double queue_ms = 0;    // arrival -> admitted into a slot
  double prefill_ms = 0;  // admitted -> prompt fully processed
  double ttft_ms = 0;     // arrival -> first token sampled
  double decode_ms = 0;   // first token -> last token
  double e2e_ms = 0;      // arrival -> finished
  int slot = -1;          // the engine slot it ran in
  std::vector<PrefillChunkTiming> prefill_chunks;
  int64_t steps = 0;             // forward passes it took part in
  int64_t batch_tokens_sum = 0;  // over those passes, every token
  int32_t batch_tokens_max = 0;  // the largest of those passes
  int32_t batch_sequences_max = 0;
};

struct RequestEvent {
  enum class Type {
    kToken,  // text (possibly empty while a stop string or UTF-8 char is held)
             // and token
    kDone,   // finish_reason, usage, timings
    kError,  // status (deadline, cancelled, internal)
  };
  Type type = Type::kToken;
  std::string text;
  int32_t token = -1;
  std::optional<model::SampleLogprobs> logprobs;
  // kDone:
  model::FinishReason finish_reason = model::FinishReason::kNone;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  RequestTimings timings;
  // kError:
  Status status;
};

class RequestStream {
 public:
  // Engine side: appends an event and calls the notifier (if any) outside the
  // lock.
  void Push(RequestEvent event);

  // Consumer side. Pops the next event, waiting up to `timeout`; false on
  // timeout.
  bool Pop(RequestEvent* event, std::chrono::milliseconds timeout);
  // Pops without waiting; false when empty.
  bool TryPop(RequestEvent* event);
  // Called (from the engine thread) after every Push; set before events flow.
  void SetNotifier(std::function<void()> notifier);

  // Asks the engine to stop this request; it is removed within one step and
  // its slot freed. A final kError(kCancelled) event follows.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;  // guarded by mu_
  std::function<void()> notifier_;   // guarded by mu_
  std::atomic<bool> cancelled_{false};
};

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_REQUEST_H_

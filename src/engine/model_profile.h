// ModelProfile: where the time of one model's load, prefill and decode goes,
// stage by stage, set against this machine's measured memory bandwidth —
// the stage table of `redline profile`:
//
//   stage                 ms      %     GB/s  GFLOP/s  roofline
//   matmul gate/up      41.2   38.1    27.9     1.2     61 %
//   ...
//
// Method: the model is loaded with LoadTimings; one warm-up step; prefill of
// `prompt_tokens` (chunks of batch_tokens) and `decode_tokens` decode steps
// run with a ForwardProfile on the Transformer; greedy sampling (argmax)
// and per-token detokenizing are timed around each decode step. "other" is
// the phase's wall time minus the stages, so the rows always add up to the
// wall time. Timer overhead: decode is also run with the profile off,
// interleaved with profiled runs, and the median difference is reported.
//
// Cost: seconds (a load, one prefill, (1 + 2 x repeats) decodes of
// decode_tokens, and a bandwidth probe unless disabled).
#ifndef REDLINE_ENGINE_MODEL_PROFILE_H_
#define REDLINE_ENGINE_MODEL_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/memory_bandwidth.h"
#include "base/result.h"
#include "model/arch/forward_profile.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"

namespace redline::engine {

struct ModelProfileOptions {
  int64_t prompt_tokens = 128;
  int64_t decode_tokens = 32;
  int threads = 0;  // 0: ThreadPool's default
  int64_t batch_tokens = 256;
  bool repack = true;
  bool measure_bandwidth = true;
  model::KvType kv_type = model::KvType::kF16;
  int overhead_repeats = 6;
  // When set, every stage of every step is recorded (bounded) for a
  // timeline; see ModelProfileResult::events.
  bool record_events = false;
};

struct ProfileRow {
  std::string stage;
  double ms = 0;
  double share = 0;     // of the phase's wall time
  double gbps = 0;      // weight bytes read / time (products only)
  double gflops = 0;    // 2 x multiply-adds / time (products, attention)
  double roofline = 0;  // gbps / measured bandwidth (products only)
};

struct ProfilePhase {
  std::string name;  // "load", "prefill", "decode"
  int64_t tokens = 0;
  double wall_ms = 0;
  std::vector<ProfileRow> rows;  // the last row is "other" (unaccounted)
  double tok_per_s() const { return wall_ms > 0 ? tokens * 1e3 / wall_ms : 0; }
};

struct ModelProfileResult {
  std::string model_path, arch, weight_types;
  int threads = 0;
  std::string isa;
  BandwidthResult bandwidth;
  ProfilePhase load, prefill, decode;
  // Decode wall time with the profile on vs off: (on - off) / off, median
  // over interleaved repeats. Noise can make it negative.
  double timer_overhead = 0;
  // The timer's direct cost: stage marks per decode step (counted during
  // the profiled decode) x the measured cost of one mark, as a share of a
  // decode step's time. Resolves what the on/off comparison cannot.
  double marks_per_decode_step = 0;
  double mark_ns = 0;
  double timer_cost_share = 0;
  // With record_events: the steps' stages, steady-clock nanoseconds; the
  // prefill's come first, then the decode's.
  std::vector<model::ForwardEvent> events;
  int64_t events_dropped = 0;

  std::string ToText() const;
  std::string ToJson() const;
};

// Loads `path` and profiles it. Errors: the file's load errors,
// InvalidArgument for token counts that do not fit (prompt + decode must be
// at most the model's training context, and >= 1 each).
Result<ModelProfileResult> RunModelProfile(const std::string& path,
                                           const ModelProfileOptions& options);

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_MODEL_PROFILE_H_

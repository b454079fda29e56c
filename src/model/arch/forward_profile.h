// ForwardProfile: where a Transformer's forward passes spend their time, by
// operation kind, with the bytes of weights read and the arithmetic done, so
// `redline profile` can set each stage against the machine's roofline.
//
// Cost: when a Transformer has no profile set, each stage boundary costs one
// predictable branch; with one, one steady-clock read and a few additions
// per stage per layer (~25 ns; MeasureStageMarkNs) — under 0.2 % of a decode
// step of a 135M model (the profile command measures and prints it).
//
// Thread-safety: none; owned by the caller, written by the Transformer's
// owner thread during Forward. Times include the thread pool's fan-out and
// wait (imbalance shows up in the stage that waits).
#ifndef REDLINE_MODEL_ARCH_FORWARD_PROFILE_H_
#define REDLINE_MODEL_ARCH_FORWARD_PROFILE_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace redline::model {

enum class ForwardStage : uint8_t {
  kEmbedding,   // token embedding rows (dequantized) and RoPE tables
  kNorm,        // RMSNorm before attention, FFN and the output head
  kQkv,         // Wq, Wk, Wv products
  kRope,        // q/k/v biases, RoPE, storing K/V into the cache
  kAttention,   // scores, softmax and the weighted sum over the cache
  kAttnOutput,  // Wo product
  kResidual,    // residual additions
  kGateUp,      // W_gate, W_up products
  kActivation,  // SiLU(gate) * up
  kDown,        // W_down product
  kOutputHead,  // output (or tied embedding) product: the logits
  kCount,
};

inline constexpr int kNumForwardStages = static_cast<int>(ForwardStage::kCount);

// As the profile table prints them: "embedding", "norm", "matmul q/k/v", ...
std::string_view ForwardStageName(ForwardStage stage);
// Metric label values: "embedding", "norm", "qkv", "rope", "attention",
// "attn_output", "residual", "gate_up", "activation", "down", "output_head".
std::string_view ForwardStageKey(ForwardStage stage);
// True for the stages that are matrix products (they read weights).
bool IsMatMulStage(ForwardStage stage);

// One stage of one forward call, for timelines (`profile --trace-file`).
struct ForwardEvent {
  ForwardStage stage = ForwardStage::kEmbedding;
  int32_t layer = -1;    // -1 outside the layer loop
  int64_t start_ns = 0;  // steady clock
  int64_t dur_ns = 0;
};

struct ForwardProfile {
  std::array<int64_t, kNumForwardStages> ns{};
  // Weight bytes read by the products of each stage, summed over calls.
  std::array<int64_t, kNumForwardStages> weight_bytes{};
  // Multiply-adds x 2 of the products (and of attention), summed.
  std::array<double, kNumForwardStages> flops{};
  int64_t forward_calls = 0;
  int64_t tokens = 0;
  // Stage boundaries timed (one steady-clock read each).
  int64_t marks = 0;
  // When set, every stage is also appended here, up to max_events (then
  // counted in events_dropped). Borrowed.
  std::vector<ForwardEvent>* events = nullptr;
  size_t max_events = size_t{1} << 20;
  int64_t events_dropped = 0;

  // Zeroes the sums (keeps the event sink and its bound).
  void Clear() {
    ns = {};
    weight_bytes = {};
    flops = {};
    forward_calls = 0;
    tokens = 0;
    marks = 0;
  }
  int64_t total_ns() const {
    int64_t t = 0;
    for (int64_t v : ns) t += v;
    return t;
  }
};

// Closes the stage that started at *t: reads the steady clock once, adds
// the time to `profile`'s sums (and events), and moves *t to now. What a
// Transformer does at each stage boundary when a profile is set.
void RecordStage(ForwardProfile& profile, ForwardStage stage, int32_t layer,
                 int64_t* t);

// Steady-clock nanoseconds now (the clock RecordStage reads).
int64_t ProfileNowNs();

// The cost of one RecordStage without an event sink, in nanoseconds: the
// median over `rounds` rounds of `marks_per_round` calls each. What the
// profile adds to a forward step is about marks x this (the timer's direct
// cost, which an on/off comparison of whole steps cannot resolve below the
// machine's noise).
double MeasureStageMarkNs(int rounds = 9, int marks_per_round = 20000);

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_FORWARD_PROFILE_H_

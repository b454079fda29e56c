#include "model/arch/forward_profile.h"

#include <algorithm>
#include <chrono>

namespace redline::model {

std::string_view ForwardStageName(ForwardStage stage) {
  switch (stage) {
    case ForwardStage::kEmbedding:
      return "embedding";
    case ForwardStage::kNorm:
      return "norm";
    case ForwardStage::kQkv:
      return "matmul q/k/v";
    case ForwardStage::kRope:
      return "rope + kv store";
    case ForwardStage::kAttention:
      return "attention";
    case ForwardStage::kAttnOutput:
      return "matmul attn output";
    case ForwardStage::kResidual:
      return "residual add";
    case ForwardStage::kGateUp:
      return "matmul gate/up";
    case ForwardStage::kActivation:
      return "activation (silu*up)";
    case ForwardStage::kDown:
      return "matmul down";
    case ForwardStage::kOutputHead:
      return "matmul output head";
    case ForwardStage::kCount:
      break;
  }
  return "?";
}

std::string_view ForwardStageKey(ForwardStage stage) {
  static constexpr std::string_view kKeys[kNumForwardStages] = {
      "embedding", "norm",    "qkv",        "rope", "attention",  "attn_output",
      "residual",  "gate_up", "activation", "down", "output_head"};
  const int i = static_cast<int>(stage);
  return i >= 0 && i < kNumForwardStages ? kKeys[i] : "?";
}

bool IsMatMulStage(ForwardStage stage) {
  switch (stage) {
    case ForwardStage::kQkv:
    case ForwardStage::kAttnOutput:
    case ForwardStage::kGateUp:
    case ForwardStage::kDown:
    case ForwardStage::kOutputHead:
      return true;
    default:
      return false;
  }
}

int64_t ProfileNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RecordStage(ForwardProfile& profile, ForwardStage stage, int32_t layer,
                 int64_t* t) {
  const int64_t now = ProfileNowNs();
  profile.ns[static_cast<int>(stage)] += now - *t;
  ++profile.marks;
  if (profile.events != nullptr) {
    if (profile.events->size() < profile.max_events) {
      profile.events->push_back({stage, layer, *t, now - *t});
    } else {
      ++profile.events_dropped;
    }
  }
  *t = now;
}

double MeasureStageMarkNs(int rounds, int marks_per_round) {
  rounds = std::max(1, rounds);
  marks_per_round = std::max(1, marks_per_round);
  std::vector<double> per_mark;
  per_mark.reserve(static_cast<size_t>(rounds));
  ForwardProfile profile;
  for (int r = 0; r < rounds; ++r) {
    int64_t t = ProfileNowNs();
    const int64_t start = t;
    for (int i = 0; i < marks_per_round; ++i) {
      // Cycle through the stages as a forward step does.
      RecordStage(profile, static_cast<ForwardStage>(i % kNumForwardStages),
                  i & 15, &t);
    }
    per_mark.push_back(static_cast<double>(t - start) / marks_per_round);
  }
  std::nth_element(per_mark.begin(), per_mark.begin() + per_mark.size() / 2,
                   per_mark.end());
  return per_mark[per_mark.size() / 2];
}

}  // namespace redline::model

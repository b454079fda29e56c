#include "model/arch/forward_profile.h"

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

}  // namespace redline::model

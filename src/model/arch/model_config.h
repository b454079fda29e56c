// ModelConfig: the hyper-parameters of a decoder-only transformer, read from
// GGUF metadata with the keys llama.cpp's converter writes
// ({arch}.embedding_length, {arch}.attention.head_count, ...).
#ifndef REDLINE_MODEL_ARCH_MODEL_CONFIG_H_
#define REDLINE_MODEL_ARCH_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "base/result.h"
#include "kernels/ops.h"
#include "model/gguf/gguf.h"

namespace redline::model {

enum class Arch { kLlama, kQwen2 };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;   // "llama" or "qwen2" as in general.architecture
  std::string name;        // general.name, may be empty
  int64_t vocab_size = 0;  // rows of token_embd
  int64_t embedding_length = 0;  // n_embd
  int64_t block_count = 0;       // layers
  int64_t feed_forward_length = 0;
  int64_t head_count = 0;
  int64_t head_count_kv = 0;
  int64_t head_dim = 0;  // key_length (default n_embd / head_count)
  int64_t context_length_train = 0;
  float rms_norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  int64_t rope_dimension_count = 0;  // rotated dims per head (default head_dim)
  kernels::RopeStyle rope_style = kernels::RopeStyle::kNorm;
  bool has_qkv_bias = false;     // qwen2
  bool tied_embeddings = false;  // no output.weight: reuse token_embd

  int64_t q_dim() const { return head_count * head_dim; }
  int64_t kv_dim() const { return head_count_kv * head_dim; }

  // Reads and validates the metadata (positive sizes, head_count divisible by
  // head_count_kv, head_dim even, ...). Tensor-dependent fields
  // (vocab_size, tied_embeddings) are filled by LoadWeights.
  static Result<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

std::string_view ArchName(Arch arch);

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_MODEL_CONFIG_H_

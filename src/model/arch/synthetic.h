// Synthetic models: GGUF files with the exact shapes of real models
// (SmolLM2-135M, Qwen2.5-0.5B, Llama-3.2-1B, plus tiny test models),
// deterministic random weights and a SentencePiece-style vocabulary. Every
// feature is tested and benchmarked on them without downloads; the files use
// the metadata keys and tensor names of llama.cpp's converter so other GGUF
// engines load them unchanged.
#ifndef REDLINE_MODEL_ARCH_SYNTHETIC_H_
#define REDLINE_MODEL_ARCH_SYNTHETIC_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "kernels/dtype.h"
#include "model/arch/model_config.h"

namespace redline::model {

struct SyntheticSpec {
  std::string preset;
  Arch arch = Arch::kLlama;
  int64_t vocab_size = 0;
  int64_t embedding_length = 0;
  int64_t block_count = 0;
  int64_t feed_forward_length = 0;
  int64_t head_count = 0;
  int64_t head_count_kv = 0;
  int64_t context_length = 0;
  float rms_norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  bool tied_embeddings = true;
  bool llama3_rope_scaling =
      false;  // write rope_freqs.weight as Llama 3.x does
  // A "cycle" model: the vocabulary's word pieces are put on one random
  // cycle, and the weights make greedy decoding emit, after each piece, its
  // successor on the cycle, whatever came before. Its own output never
  // repeats within the cycle's length (the pieces of the vocabulary), so
  // quoting a passage it wrote is the only way to make it repeat text: a
  // passage given back in the prompt is continued exactly as written — an
  // input-echoing task on a full-size shape, for measuring speculative
  // decoding. Large embeddings dominate the residual stream (the layers are
  // the usual random ones, so a pass costs what it costs on any model) and
  // an untied output matrix maps each piece to its successor; the file has
  // output.weight even where the preset ties it.
  bool successor_cycle = false;
};

// "tiny", "tiny-qwen2", "smollm2-135m", "qwen2.5-0.5b", "llama3.2-1b".
std::vector<std::string> SyntheticPresetNames();
Result<SyntheticSpec> SyntheticPreset(std::string_view name);

// Parses "f32", "f16", "bf16", "q8_0", "q4_0".
Result<kernels::DType> ParseDType(std::string_view name);

// The successor of every token id on the cycle of a `successor_cycle` model
// written with this spec and seed ([vocab_size]; ids outside the cycle, the
// special and byte tokens, map to -1).
std::vector<int32_t> SyntheticSuccessors(const SyntheticSpec& spec,
                                         uint64_t seed);

// Writes the model. Same spec, type and seed give the same bytes.
// Cost: generates every weight (~1 s per 100M parameters on 2 cores).
// `progress`, if set, is called on the calling thread after each tensor with
// the tensor bytes generated so far and in all.
using SyntheticProgress =
    std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;
Status WriteSyntheticModel(const SyntheticSpec& spec, kernels::DType type,
                           uint64_t seed, const std::string& path,
                           ThreadPool& pool,
                           const SyntheticProgress& progress = {});

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_SYNTHETIC_H_

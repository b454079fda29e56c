#include "model/arch/synthetic.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numbers>

#include "kernels/matmul.h"
#include "model/gguf/gguf_writer.h"

namespace redline::model {
namespace {

using gguf::TensorType;
using gguf::Value;

// Tokens with fixed ids at the start of every synthetic vocabulary.
constexpr const char* kSpecialTokens[] = {"<unk>", "<s>", "</s>",
                                          "<|im_start|>", "<|im_end|>"};
constexpr int32_t kNumSpecial = 5;
constexpr int32_t kFirstByteToken = kNumSpecial;
constexpr int32_t kFirstPiece = kFirstByteToken + 256;

// Each layer adds a small update to the residual stream (outputs ~0.25 of
// its inputs): a random deep network with unit-size updates is chaotic, and
// rounding differences between engines (f16 KV caches, 8-bit activations)
// would grow through the layers into different greedy tokens.
constexpr float kLayerOutputScale = 0.25f;

// ChatML, the format SmolLM2 and Qwen2.5 instruct models use.
constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' "
    "+ message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}"
    "{% endif %}";

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

// Uniform in [-1, 1): std 1/sqrt(3).
inline float UniformSym(uint64_t& state) {
  return static_cast<float>(static_cast<int64_t>(SplitMix64(state) >> 40) -
                            (1ll << 23)) *
         (1.0f / static_cast<float>(1 << 23));
}

// Row `r` of a random matrix whose rows are seeded by `name_seed`: entries
// uniform in [-amplitude, amplitude).
void RandomRow(uint64_t name_seed, int64_t r, float amplitude, float* row,
               int64_t cols) {
  uint64_t state =
      name_seed ^ (static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ull);
  for (int64_t c = 0; c < cols; ++c) row[c] = UniformSym(state) * amplitude;
}

TensorType ToTensorType(kernels::DType t) {
  switch (t) {
    case kernels::DType::kF32:
      return TensorType::kF32;
    case kernels::DType::kF16:
      return TensorType::kF16;
    case kernels::DType::kBF16:
      return TensorType::kBF16;
    case kernels::DType::kQ8_0:
      return TensorType::kQ8_0;
    case kernels::DType::kQ4_0:
      return TensorType::kQ4_0;
    case kernels::DType::kQ4_1:
      return TensorType::kQ4_1;
    case kernels::DType::kQ5_0:
      return TensorType::kQ5_0;
    case kernels::DType::kQ5_1:
      return TensorType::kQ5_1;
    case kernels::DType::kIQ4_NL:
      return TensorType::kIQ4_NL;
    case kernels::DType::kQ2_K:
      return TensorType::kQ2_K;
    case kernels::DType::kQ3_K:
      return TensorType::kQ3_K;
    case kernels::DType::kQ4_K:
      return TensorType::kQ4_K;
    case kernels::DType::kQ5_K:
      return TensorType::kQ5_K;
    case kernels::DType::kQ6_K:
      return TensorType::kQ6_K;
  }
  return TensorType::kF32;
}

// general.file_type values (llama_ftype) of llama.cpp.
uint32_t FileType(kernels::DType t) {
  switch (t) {
    case kernels::DType::kF32:
      return 0;
    case kernels::DType::kF16:
      return 1;
    case kernels::DType::kQ4_0:
      return 2;
    case kernels::DType::kQ8_0:
      return 7;
    case kernels::DType::kBF16:
      return 32;
    default:  // ParseDType offers only the types above
      return 0;
  }
}

// Pieces "a".."z", "▁a", then syllable words, unique and deterministic.
std::vector<std::string> MakePieces(int64_t count) {
  std::vector<std::string> pieces;
  pieces.reserve(count);
  const std::string space =
      "\xe2\x96\x81";  // U+2581, SentencePiece's space mark
  auto push = [&](std::string s) {
    if (static_cast<int64_t>(pieces.size()) < count)
      pieces.push_back(std::move(s));
  };
  push(space);
  for (int ch = 33; ch < 127; ++ch) {
    push(std::string(1, static_cast<char>(ch)));
    push(space + static_cast<char>(ch));
  }
  static const char kConsonants[] = "bcdfghjklmnprstvwz";
  static const char kVowels[] = "aeiou";
  std::vector<std::string> syllables;
  for (char c : std::string_view(kConsonants)) {
    for (char v : std::string_view(kVowels))
      syllables.push_back(std::string{c, v});
  }
  // Words of 1, 2, 3, ... syllables, each as "▁word" and "word".
  std::vector<std::string> words = syllables;
  while (static_cast<int64_t>(pieces.size()) < count) {
    for (const std::string& w : words) {
      push(space + w);
      push(w);
      if (static_cast<int64_t>(pieces.size()) >= count) break;
    }
    std::vector<std::string> longer;
    for (const std::string& w : words) {
      for (const std::string& s : syllables) {
        longer.push_back(w + s);
        if (longer.size() > static_cast<size_t>(count)) break;
      }
      if (longer.size() > static_cast<size_t>(count)) break;
    }
    words = std::move(longer);
  }
  return pieces;
}

// Llama 3.x frequency divisors (rope_freqs.weight) for the given base and
// head size, from the published scaling rule (factor 32, low/high frequency
// factors 1 and 4, original context 8192).
std::vector<float> Llama3RopeFactors(float base, int64_t head_dim) {
  constexpr double kFactor = 32.0, kLow = 1.0, kHigh = 4.0,
                   kOriginalCtx = 8192.0;
  const double low_wavelen = kOriginalCtx / kLow;
  const double high_wavelen = kOriginalCtx / kHigh;
  std::vector<float> factors(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(base),
                                       2.0 * i / static_cast<double>(head_dim));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f;
    if (wavelen < high_wavelen) {
      f = 1.0;
    } else if (wavelen > low_wavelen) {
      f = kFactor;
    } else {
      const double smooth = (kOriginalCtx / wavelen - kLow) / (kHigh - kLow);
      f = 1.0 / ((1.0 - smooth) / kFactor + smooth);
    }
    factors[i] = static_cast<float>(f);
  }
  return factors;
}

}  // namespace

std::vector<std::string> SyntheticPresetNames() {
  return {"tiny", "tiny-qwen2", "smollm2-135m", "qwen2.5-0.5b", "llama3.2-1b"};
}

Result<SyntheticSpec> SyntheticPreset(std::string_view name) {
  SyntheticSpec s;
  s.preset = std::string(name);
  if (name == "tiny") {
    s.arch = Arch::kLlama;
    s.vocab_size = 512;
    s.embedding_length = 64;
    s.block_count = 2;
    s.feed_forward_length = 192;
    s.head_count = 4;
    s.head_count_kv = 2;
    s.context_length = 2048;
    s.tied_embeddings = false;
  } else if (name == "tiny-qwen2") {
    s.arch = Arch::kQwen2;
    s.vocab_size = 640;
    s.embedding_length = 64;
    s.block_count = 2;
    s.feed_forward_length = 160;
    s.head_count = 4;
    s.head_count_kv = 1;
    s.context_length = 2048;
    s.rms_norm_eps = 1e-6f;
    s.rope_freq_base = 1000000.0f;
  } else if (name == "smollm2-135m") {
    s.arch = Arch::kLlama;
    s.vocab_size = 49152;
    s.embedding_length = 576;
    s.block_count = 30;
    s.feed_forward_length = 1536;
    s.head_count = 9;
    s.head_count_kv = 3;
    s.context_length = 8192;
    s.rope_freq_base = 100000.0f;
  } else if (name == "qwen2.5-0.5b") {
    s.arch = Arch::kQwen2;
    s.vocab_size = 151936;
    s.embedding_length = 896;
    s.block_count = 24;
    s.feed_forward_length = 4864;
    s.head_count = 14;
    s.head_count_kv = 2;
    s.context_length = 32768;
    s.rms_norm_eps = 1e-6f;
    s.rope_freq_base = 1000000.0f;
  } else if (name == "llama3.2-1b") {
    s.arch = Arch::kLlama;
    s.vocab_size = 128256;
    s.embedding_length = 2048;
    s.block_count = 16;
    s.feed_forward_length = 8192;
    s.head_count = 32;
    s.head_count_kv = 8;
    s.context_length = 131072;
    s.rope_freq_base = 500000.0f;
    s.llama3_rope_scaling = true;
  } else {
    return Status::InvalidArgument(
        fmt::format("unknown preset '{}' (known: {})", name,
                    fmt::join(SyntheticPresetNames(), ", ")));
  }
  return s;
}

Result<kernels::DType> ParseDType(std::string_view name) {
  for (auto t :
       {kernels::DType::kF32, kernels::DType::kF16, kernels::DType::kBF16,
        kernels::DType::kQ8_0, kernels::DType::kQ4_0}) {
    if (kernels::DTypeName(t) == name) return t;
  }
  return Status::InvalidArgument(fmt::format(
      "unknown weight type '{}' (known: f32, f16, bf16, q8_0, q4_0)", name));
}

std::vector<int32_t> SyntheticSuccessors(const SyntheticSpec& s,
                                         uint64_t seed) {
  std::vector<int32_t> successors(std::max<int64_t>(s.vocab_size, 0), -1);
  if (s.vocab_size <= kFirstPiece) return successors;
  std::vector<int32_t> order;
  for (int64_t i = kFirstPiece; i < s.vocab_size; ++i)
    order.push_back(static_cast<int32_t>(i));
  uint64_t state = HashName("successor_cycle", seed);
  for (size_t i = order.size() - 1; i > 0; --i)
    std::swap(order[i], order[SplitMix64(state) % (i + 1)]);
  for (size_t i = 0; i < order.size(); ++i)
    successors[order[i]] = order[(i + 1) % order.size()];
  return successors;
}

Status WriteSyntheticModel(const SyntheticSpec& s, kernels::DType type,
                           uint64_t seed, const std::string& path,
                           ThreadPool& pool,
                           const SyntheticProgress& progress) {
  if (s.vocab_size < kFirstPiece + 1)
    return Status::InvalidArgument("vocabulary too small");
  const std::string arch(ArchName(s.arch));
  const int64_t head_dim = s.embedding_length / s.head_count;
  const int64_t kv_dim = s.head_count_kv * head_dim;
  gguf::GgufWriter w;
  w.Set("general.architecture", Value::Str(arch));
  w.Set("general.type", Value::Str("model"));
  w.Set("general.name",
        Value::Str(fmt::format("redline-synthetic-{}{}", s.preset,
                               s.successor_cycle ? "-cycle" : "")));
  w.Set("general.file_type", Value::U32(FileType(type)));
  w.Set("general.quantization_version", Value::U32(2));
  w.Set(arch + ".vocab_size", Value::U32(static_cast<uint32_t>(s.vocab_size)));
  w.Set(arch + ".context_length",
        Value::U32(static_cast<uint32_t>(s.context_length)));
  w.Set(arch + ".embedding_length",
        Value::U32(static_cast<uint32_t>(s.embedding_length)));
  w.Set(arch + ".block_count",
        Value::U32(static_cast<uint32_t>(s.block_count)));
  w.Set(arch + ".feed_forward_length",
        Value::U32(static_cast<uint32_t>(s.feed_forward_length)));
  w.Set(arch + ".attention.head_count",
        Value::U32(static_cast<uint32_t>(s.head_count)));
  w.Set(arch + ".attention.head_count_kv",
        Value::U32(static_cast<uint32_t>(s.head_count_kv)));
  w.Set(arch + ".attention.layer_norm_rms_epsilon", Value::F32(s.rms_norm_eps));
  w.Set(arch + ".rope.freq_base", Value::F32(s.rope_freq_base));
  if (s.arch == Arch::kLlama) {
    w.Set(arch + ".rope.dimension_count",
          Value::U32(static_cast<uint32_t>(head_dim)));
    w.Set(arch + ".attention.key_length",
          Value::U32(static_cast<uint32_t>(head_dim)));
    w.Set(arch + ".attention.value_length",
          Value::U32(static_cast<uint32_t>(head_dim)));
  }

  // Vocabulary: SentencePiece ("llama") with byte fallback.
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(s.vocab_size);
  for (int32_t i = 0; i < kNumSpecial; ++i) {
    tokens.push_back(kSpecialTokens[i]);
    scores.push_back(0.0f);
    types.push_back(i == 0 ? 2 : 3);  // unknown, control
  }
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0.0f);
    types.push_back(6);  // byte
  }
  const std::vector<std::string> pieces =
      MakePieces(s.vocab_size - kFirstPiece);
  for (size_t i = 0; i < pieces.size(); ++i) {
    tokens.push_back(pieces[i]);
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);  // normal
  }
  w.Set("tokenizer.ggml.model", Value::Str("llama"));
  w.Set("tokenizer.ggml.pre", Value::Str("default"));
  w.Set("tokenizer.ggml.tokens", Value::StrArray(tokens));
  w.Set("tokenizer.ggml.scores", Value::F32Array(scores));
  w.Set("tokenizer.ggml.token_type", Value::I32Array(types));
  w.Set("tokenizer.ggml.unknown_token_id", Value::U32(0));
  w.Set("tokenizer.ggml.bos_token_id", Value::U32(1));
  w.Set("tokenizer.ggml.eos_token_id", Value::U32(2));
  w.Set("tokenizer.ggml.eot_token_id", Value::U32(4));
  w.Set("tokenizer.ggml.add_bos_token", Value::Bool(true));
  w.Set("tokenizer.ggml.add_eos_token", Value::Bool(false));
  w.Set("tokenizer.chat_template", Value::Str(kChatMlTemplate));

  ThreadPool* p = &pool;
  // Progress: the writer fills tensors in the order they are added, one at a
  // time, so a shared counter after each fill is the bytes written so far.
  auto total_bytes = std::make_shared<uint64_t>(0);
  auto done_bytes = std::make_shared<uint64_t>(0);
  auto add_tensor = [&](const std::string& name, TensorType t,
                        std::vector<int64_t> shape, uint64_t bytes,
                        std::function<void(std::span<uint8_t>)> fill) {
    *total_bytes += bytes;
    w.AddTensor(name, t, std::move(shape),
                [=, &progress](std::span<uint8_t> dst) {
                  fill(dst);
                  *done_bytes += bytes;
                  if (progress) progress(*done_bytes, *total_bytes);
                });
  };
  // A matrix [rows, cols] whose row r is `fill_row(r, row)` in f32,
  // quantized to `t` row by row on all threads.
  using RowFill = std::function<void(int64_t r, float* row)>;
  auto rows_matrix = [&](const std::string& name, int64_t rows, int64_t cols,
                         kernels::DType t, RowFill fill_row) {
    add_tensor(name, ToTensorType(t), {cols, rows},
               static_cast<uint64_t>(rows * kernels::RowBytes(t, cols)),
               [=](std::span<uint8_t> dst) {
                 const int64_t row_bytes = kernels::RowBytes(t, cols);
                 p->ParallelFor(rows, 64, [&](int64_t begin, int64_t end, int) {
                   std::vector<float> row(cols);
                   for (int64_t r = begin; r < end; ++r) {
                     fill_row(r, row.data());
                     kernels::QuantizeRow(t, row.data(), cols,
                                          dst.data() + r * row_bytes);
                   }
                 });
               });
  };
  // A random matrix [rows, cols] with entries uniform, standard deviation
  // `stddev`. Special and byte tokens get small rows (x special_row_scale),
  // so a random model rarely ends early or emits raw bytes: its output reads
  // as words.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols,
                    float stddev, kernels::DType t,
                    float special_row_scale = 1.0f) {
    const uint64_t name_seed = HashName(name, seed);
    const float amplitude = stddev * std::sqrt(3.0f);
    rows_matrix(name, rows, cols, t, [=](int64_t r, float* row) {
      RandomRow(name_seed, r,
                amplitude * (r < kFirstPiece ? special_row_scale : 1.0f), row,
                cols);
    });
  };
  auto vector = [&](const std::string& name, int64_t n, float center,
                    float spread) {
    const uint64_t name_seed = HashName(name, seed);
    add_tensor(name, TensorType::kF32, {n}, static_cast<uint64_t>(4 * n),
               [=](std::span<uint8_t> dst) {
                 uint64_t state = name_seed;
                 for (int64_t i = 0; i < n; ++i) {
                   const float v = center + spread * UniformSym(state);
                   std::memcpy(dst.data() + 4 * i, &v, 4);
                 }
               });
  };

  const int64_t d = s.embedding_length;
  const float in_std = 1.0f / std::sqrt(static_cast<float>(d));
  // Logits get a standard deviation of ~8: wide gaps between the best
  // tokens, so greedy decoding is robust to rounding and engines agree token
  // for token. With tied embeddings the scale comes from output_norm (x16)
  // rather than from large embeddings: a large embedding would dominate the
  // residual stream, and the model would mostly repeat its input token (slow
  // drifts between repeats make exact near-ties).
  const float embd_std = 0.5f / std::sqrt(static_cast<float>(d));
  const float out_std = 8.0f / std::sqrt(static_cast<float>(d));
  if (s.successor_cycle) {
    // Embedding entries of standard deviation 4: |e| = 4 sqrt(d), several
    // times the summed updates of the random layers (each well under
    // sqrt(d)), so the final hidden state points along the current token's
    // embedding.
    constexpr float kCycleEmbdStd = 4.0f;
    // The successor's logit: ~16, the others' 16 cos(e_i, e_j), of standard
    // deviation 16 / sqrt(d); so greedy decoding follows the cycle under any
    // weight type's rounding (speculative_test checks it on the tiny
    // preset).
    constexpr float kCycleLogit = 16.0f;
    matrix("token_embd.weight", s.vocab_size, d, kCycleEmbdStd, type, 0.05f);
    vector("output_norm.weight", d, 1.0f, 0.1f);
    const std::vector<int32_t> successors = SyntheticSuccessors(s, seed);
    auto predecessors =
        std::make_shared<std::vector<int32_t>>(s.vocab_size, -1);
    for (int64_t i = 0; i < s.vocab_size; ++i)
      if (successors[i] >= 0)
        (*predecessors)[successors[i]] = static_cast<int32_t>(i);
    const uint64_t embd_seed = HashName("token_embd.weight", seed);
    const uint64_t out_seed = HashName("output.weight", seed);
    const float special_amplitude = 0.05f * out_std * std::sqrt(3.0f);
    const int64_t rows = s.vocab_size;
    // Row r is the unit embedding of r's predecessor, scaled so that the
    // normalised hidden state (length ~sqrt(d)) gives it kCycleLogit.
    rows_matrix("output.weight", rows, d, type, [=](int64_t r, float* row) {
      const int32_t pred = (*predecessors)[r];
      if (pred < 0) {
        RandomRow(out_seed, r, special_amplitude, row, d);
        return;
      }
      RandomRow(embd_seed, pred, 1.0f, row, d);
      double norm2 = 0;
      for (int64_t c = 0; c < d; ++c) norm2 += double(row[c]) * row[c];
      const float scale =
          static_cast<float>(kCycleLogit / std::sqrt(norm2 * d));
      for (int64_t c = 0; c < d; ++c) row[c] *= scale;
    });
  } else {
    matrix("token_embd.weight", s.vocab_size, d, embd_std, type, 0.05f);
    if (s.tied_embeddings) {
      vector("output_norm.weight", d, 16.0f, 1.6f);
    } else {
      vector("output_norm.weight", d, 1.0f, 0.1f);
      matrix("output.weight", s.vocab_size, d, out_std, type, 0.05f);
    }
  }
  if (s.llama3_rope_scaling) {
    const std::vector<float> factors =
        Llama3RopeFactors(s.rope_freq_base, head_dim);
    add_tensor("rope_freqs.weight", TensorType::kF32, {head_dim / 2},
               static_cast<uint64_t>(factors.size() * 4),
               [factors](std::span<uint8_t> dst) {
                 std::memcpy(dst.data(), factors.data(), factors.size() * 4);
               });
  }
  const float ff_std =
      1.0f / std::sqrt(static_cast<float>(s.feed_forward_length));
  for (int64_t i = 0; i < s.block_count; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    vector(b + "attn_norm.weight", d, 1.0f, 0.1f);
    matrix(b + "attn_q.weight", d, d, in_std, type);
    matrix(b + "attn_k.weight", kv_dim, d, in_std, type);
    matrix(b + "attn_v.weight", kv_dim, d, in_std, type);
    matrix(b + "attn_output.weight", d, d, kLayerOutputScale * in_std, type);
    if (s.arch == Arch::kQwen2) {
      vector(b + "attn_q.bias", d, 0.0f, 0.1f);
      vector(b + "attn_k.bias", kv_dim, 0.0f, 0.1f);
      vector(b + "attn_v.bias", kv_dim, 0.0f, 0.1f);
    }
    vector(b + "ffn_norm.weight", d, 1.0f, 0.1f);
    matrix(b + "ffn_gate.weight", s.feed_forward_length, d, in_std, type);
    matrix(b + "ffn_up.weight", s.feed_forward_length, d, in_std, type);
    matrix(b + "ffn_down.weight", d, s.feed_forward_length,
           kLayerOutputScale * ff_std, type);
  }
  return w.Write(path);
}

}  // namespace redline::model

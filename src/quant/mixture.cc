// The rules are llama.cpp's (llama_tensor_get_type) restricted to the file types
// `redline quantize` offers; each branch says which tensors it upgrades. The
// counters advance exactly where llama.cpp's do, since "layers 0..n/8 and
// the last n/8, plus every third in between" (UseMoreBits) is counted over
// attn_v / ffn_down tensors in file order, not over layer numbers.
#include "quant/mixture.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace redline::quant {
namespace {

struct FileTypeEntry {
  std::string_view name;
  FileType type;
  TensorType base;
};

constexpr FileTypeEntry kFileTypes[] = {
    {"q8_0", FileType::kQ8_0, TensorType::kQ8_0},
    {"q4_0", FileType::kQ4_0, TensorType::kQ4_0},
    {"q4_1", FileType::kQ4_1, TensorType::kQ4_1},
    {"q5_0", FileType::kQ5_0, TensorType::kQ5_0},
    {"q5_1", FileType::kQ5_1, TensorType::kQ5_1},
    {"q2_k", FileType::kQ2_K, TensorType::kQ2_K},
    {"q3_k_s", FileType::kQ3_K_S, TensorType::kQ3_K},
    {"q3_k_m", FileType::kQ3_K_M, TensorType::kQ3_K},
    {"q3_k_l", FileType::kQ3_K_L, TensorType::kQ3_K},
    {"q4_k_s", FileType::kQ4_K_S, TensorType::kQ4_K},
    {"q4_k_m", FileType::kQ4_K_M, TensorType::kQ4_K},
    {"q5_k_s", FileType::kQ5_K_S, TensorType::kQ5_K},
    {"q5_k_m", FileType::kQ5_K_M, TensorType::kQ5_K},
    {"q6_k", FileType::kQ6_K, TensorType::kQ6_K},
    {"iq4_nl", FileType::kIQ4_NL, TensorType::kIQ4_NL},
    {"f16", FileType::kF16, TensorType::kF16},
    {"bf16", FileType::kBF16, TensorType::kBF16},
    {"f32", FileType::kAllF32, TensorType::kF32},
};

bool IsQuantized(TensorType t) {
  return t != TensorType::kF32 && t != TensorType::kF16 &&
         t != TensorType::kBF16;
}

bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

enum class Category {
  kTokenEmbd,
  kAttnQ,
  kAttnV,  // attn_v, attn_qkv and attn_kv_b
  kAttnK,
  kAttnQkv,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther,
};

Category CategoryOf(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
    return Category::kTokenEmbd;
  }
  if (Contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (Contains(name, "attn_kv_b.weight")) return Category::kAttnV;
  if (Contains(name, "attn_v.weight")) return Category::kAttnV;
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up")) return Category::kFfnUp;
  if (Contains(name, "ffn_gate")) return Category::kFfnGate;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool IsAttnVLike(Category c) {
  return c == Category::kAttnV || c == Category::kAttnQkv;
}

// More bits for the first and last eighth of the layers and every third
// layer in between.
bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
         (i_layer - n_layers / 8) % 3 == 2;
}

}  // namespace

std::optional<FileType> ParseFileType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const auto& e : kFileTypes) {
    if (e.name == lower) return e.type;
  }
  return std::nullopt;
}

std::string_view FileTypeName(FileType type) {
  switch (type) {
    case FileType::kAllF32:
      return "F32";
    case FileType::kF16:
      return "F16";
    case FileType::kBF16:
      return "BF16";
    case FileType::kQ4_0:
      return "Q4_0";
    case FileType::kQ4_1:
      return "Q4_1";
    case FileType::kQ8_0:
      return "Q8_0";
    case FileType::kQ5_0:
      return "Q5_0";
    case FileType::kQ5_1:
      return "Q5_1";
    case FileType::kQ2_K:
      return "Q2_K";
    case FileType::kQ3_K_S:
      return "Q3_K_S";
    case FileType::kQ3_K_M:
      return "Q3_K_M";
    case FileType::kQ3_K_L:
      return "Q3_K_L";
    case FileType::kQ4_K_S:
      return "Q4_K_S";
    case FileType::kQ4_K_M:
      return "Q4_K_M";
    case FileType::kQ5_K_S:
      return "Q5_K_S";
    case FileType::kQ5_K_M:
      return "Q5_K_M";
    case FileType::kQ6_K:
      return "Q6_K";
    case FileType::kIQ4_NL:
      return "IQ4_NL";
  }
  return "?";
}

const std::vector<std::string_view>& QuantizeTypeNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& e : kFileTypes) {
      if (IsQuantized(e.base)) v.push_back(e.name);
    }
    return v;
  }();
  return names;
}

TensorType DefaultTensorType(FileType type) {
  for (const auto& e : kFileTypes) {
    if (e.type == type) return e.base;
  }
  return TensorType::kF32;
}

MixturePlanner::MixturePlanner(FileType ftype, ModelShape shape,
                               const std::vector<std::string>& tensor_names,
                               bool has_imatrix)
    : ftype_(ftype), shape_(std::move(shape)), has_imatrix_(has_imatrix) {
  for (const auto& name : tensor_names) {
    const Category c = CategoryOf(name);
    if (IsAttnVLike(c)) ++n_attention_wv_;
    if (c == Category::kOutput) tied_embeddings_ = false;
  }
}

bool MixturePlanner::AllowsQuantization(const std::string& name,
                                        const std::vector<int64_t>& dims) {
  // ggml_n_dims: trailing dimensions of 1 do not count.
  int n_dims = static_cast<int>(dims.size());
  while (n_dims > 1 && dims[n_dims - 1] == 1) --n_dims;
  if (n_dims < 2) return false;
  const std::string_view suffix = "weight";
  if (name.size() < suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  static constexpr std::string_view kKeep[] = {
      "_norm.weight",
      "ffn_gate_inp.weight",
      "altup",
      "laurel",
      "per_layer_model_proj",
      "ssm_conv1d",
      "shortconv.conv.weight",
      "time_mix_first.weight",
      "time_mix_w0.weight",
      "time_mix_w1.weight",
      "time_mix_w2.weight",
      "time_mix_v0.weight",
      "time_mix_v1.weight",
      "time_mix_v2.weight",
      "time_mix_a0.weight",
      "time_mix_a1.weight",
      "time_mix_a2.weight",
      "time_mix_g1.weight",
      "time_mix_g2.weight",
      "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight",
      "attn_rel_b.weight",
      ".position_embd",
      ".patch_embd",
      ".patch_merger",
  };
  for (std::string_view k : kKeep) {
    if (Contains(name, k)) return false;
  }
  // Positional embeddings and token types (BERT-style models).
  if (name == "position_embd.weight" || name == "token_types.weight") {
    return false;
  }
  return true;
}

TensorType MixturePlanner::Mixture(const std::string& name, int64_t ncols,
                                   TensorType type) {
  const Category c = CategoryOf(name);
  const FileType f = ftype_;
  const bool falcon = shape_.arch == "falcon";
  const int64_t n_gqa =
      shape_.n_head_kv > 0 ? shape_.n_head / shape_.n_head_kv : 1;
  const bool is_70b = shape_.arch == "llama" && shape_.n_layer == 80 &&
                      shape_.n_head != shape_.n_head_kv;
  const auto n_layer = static_cast<int>(shape_.n_layer);

  if (c == Category::kOutput ||
      (tied_embeddings_ && c == Category::kTokenEmbd)) {
    const int64_t block = model::gguf::TensorTypeBlockElements(type);
    if (falcon || ncols % block != 0) return TensorType::kQ8_0;
    if (type != TensorType::kQ8_0) return TensorType::kQ6_K;
    return type;
  }
  if (c == Category::kTokenEmbd) return type;
  if (IsAttnVLike(c)) {
    if (f == FileType::kQ2_K) {
      type = n_gqa >= 4 ? TensorType::kQ4_K : TensorType::kQ3_K;
    } else if (f == FileType::kQ3_K_M) {
      type = i_attention_wv_ < 2 ? TensorType::kQ5_K : TensorType::kQ4_K;
    } else if (f == FileType::kQ3_K_L) {
      type = TensorType::kQ5_K;
    } else if (f == FileType::kIQ4_NL && n_gqa >= 4) {
      type = TensorType::kQ5_K;
    } else if ((f == FileType::kQ4_K_M || f == FileType::kQ5_K_M) &&
               UseMoreBits(i_attention_wv_, n_attention_wv_)) {
      type = TensorType::kQ6_K;
    } else if (f == FileType::kQ4_K_S && i_attention_wv_ < 4) {
      type = TensorType::kQ5_K;
    }
    if (is_70b && (type == TensorType::kQ3_K || type == TensorType::kQ4_K)) {
      type = TensorType::kQ5_K;
    }
    if (shape_.n_expert == 8) type = TensorType::kQ8_0;
    ++i_attention_wv_;
    return type;
  }
  if (c == Category::kAttnK) {
    if (shape_.n_expert == 8) type = TensorType::kQ8_0;
    return type;
  }
  if (c == Category::kFfnDown) {
    int i_layer = i_ffn_down_;
    if (shape_.n_expert > 1) {
      // Expert tensors are not consecutive: take the layer from the name.
      int parsed = 0;
      if (std::sscanf(name.c_str(), "blk.%d.", &parsed) == 1) i_layer = parsed;
    }
    if (f == FileType::kQ2_K) {
      type = TensorType::kQ3_K;
    } else if (f == FileType::kQ3_K_M) {
      type = i_layer < n_layer / 16                       ? TensorType::kQ5_K
             : (!falcon || UseMoreBits(i_layer, n_layer)) ? TensorType::kQ4_K
                                                          : TensorType::kQ3_K;
    } else if (f == FileType::kQ3_K_L) {
      type = falcon ? TensorType::kQ4_K : TensorType::kQ5_K;
    } else if (f == FileType::kQ4_K_M) {
      if (falcon) {
        type = i_layer < n_layer / 16          ? TensorType::kQ6_K
               : UseMoreBits(i_layer, n_layer) ? TensorType::kQ5_K
                                               : TensorType::kQ4_K;
      } else if (UseMoreBits(i_layer, n_layer)) {
        type = TensorType::kQ6_K;
      }
    } else if (i_layer < n_layer / 8 && f == FileType::kIQ4_NL &&
               !has_imatrix_) {
      type = TensorType::kQ5_K;
    } else if (f == FileType::kQ5_K_M && UseMoreBits(i_layer, n_layer)) {
      type = TensorType::kQ6_K;
    } else if (f == FileType::kQ4_K_S && !falcon && i_layer < n_layer / 8) {
      type = TensorType::kQ5_K;
    } else if ((f == FileType::kQ4_0 || f == FileType::kQ5_0) && has_imatrix_ &&
               i_layer < n_layer / 8) {
      // With an importance matrix llama.cpp gives the first ffn_down layers
      // an offset (Q4_1/Q5_1) against outliers; without one it keeps the
      // type, so that plain quantisation never changes.
      type = f == FileType::kQ4_0 ? TensorType::kQ4_1 : TensorType::kQ5_1;
    }
    ++i_ffn_down_;
    return type;
  }
  if (c == Category::kAttnOutput) {
    if (!falcon) {
      if (shape_.n_expert == 8) {
        if (f == FileType::kQ2_K || f == FileType::kQ3_K_S ||
            f == FileType::kQ3_K_M || f == FileType::kIQ4_NL ||
            f == FileType::kQ4_K_S || f == FileType::kQ4_K_M) {
          type = TensorType::kQ5_K;
        }
      } else if (f == FileType::kQ2_K) {
        type = TensorType::kQ3_K;
      } else if (f == FileType::kQ3_K_M) {
        type = TensorType::kQ4_K;
      } else if (f == FileType::kQ3_K_L) {
        type = TensorType::kQ5_K;
      }
    } else if (f == FileType::kQ3_K_L) {
      type = TensorType::kQ4_K;
    }
    return type;
  }
  if (c == Category::kAttnQkv) {
    if (f == FileType::kQ3_K_M || f == FileType::kQ3_K_L) {
      type = TensorType::kQ4_K;
    } else if (f == FileType::kQ4_K_M) {
      type = TensorType::kQ5_K;
    } else if (f == FileType::kQ5_K_M) {
      type = TensorType::kQ6_K;
    }
    return type;
  }
  if (c == Category::kFfnGate) {
    ++i_ffn_gate_;
  } else if (c == Category::kFfnUp) {
    ++i_ffn_up_;
  }
  return type;
}

TensorPlan MixturePlanner::Plan(const std::string& name,
                                const std::vector<int64_t>& dims,
                                TensorType current) {
  if (!AllowsQuantization(name, dims)) return {current, false};
  TensorType type = DefaultTensorType(ftype_);
  if (!IsQuantized(type)) return {type, false};
  const int64_t ncols = dims[0];
  type = Mixture(name, ncols, type);
  const int64_t block = model::gguf::TensorTypeBlockElements(type);
  if (ncols % block == 0) return {type, false};
  TensorType fallback = TensorType::kF16;
  switch (type) {
    // llama.cpp at the oracle's commit (c392e5094) sends Q2_K/Q3_K to
    // IQ4_NL; later versions send them to Q4_0.
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
      fallback = TensorType::kIQ4_NL;
      break;
    case TensorType::kQ4_K:
      fallback = TensorType::kQ5_0;
      break;
    case TensorType::kQ5_K:
      fallback = TensorType::kQ5_1;
      break;
    case TensorType::kQ6_K:
      fallback = TensorType::kQ8_0;
      break;
    default:
      return {type, false, true};
  }
  if (ncols % model::gguf::TensorTypeBlockElements(fallback) != 0) {
    fallback = TensorType::kF16;
  }
  return {fallback, true};
}

}  // namespace redline::quant

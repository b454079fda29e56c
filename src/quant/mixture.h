// Which ggml type each tensor of a model gets for a requested file type
// (llama.cpp's "ftype": Q4_K_M, Q3_K_S, ...), following llama-quantize's
// rules: which tensors are quantised at all,
// the _S/_M/_L mixtures that give attn_v / ffn_down / attn_output / output
// more bits, and the fallback for rows a type cannot hold (a K-quant on rows
// not divisible by 256 becomes IQ4_NL/Q5_0/Q5_1/Q8_0; F16 when even 32 fails).
// An importance matrix changes two rules: IQ4_NL no longer moves the first
// eighth of ffn_down to Q5_K, and Q4_0/Q5_0 move it to Q4_1/Q5_1.
//
// Thread-safety: MixturePlanner is thread-compatible (it counts attn_v and
// ffn_down tensors as they are planned, in file order). Cost: O(tensors).
#ifndef REDLINE_QUANT_MIXTURE_H_
#define REDLINE_QUANT_MIXTURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf/gguf.h"

namespace redline::quant {

using model::gguf::TensorType;

// llama.cpp's llama_ftype numbering (stored in general.file_type).
enum class FileType : uint32_t {
  kAllF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kBF16 = 32,
};

// "q4_k_m" / "Q4_K_M" -> FileType; nullopt for names `redline quantize` does
// not offer.
std::optional<FileType> ParseFileType(std::string_view name);
// "Q4_K_M", ... (llama.cpp's spelling).
std::string_view FileTypeName(FileType type);
// The names ParseFileType accepts, lower case, in the order of --help.
const std::vector<std::string_view>& QuantizeTypeNames();
// The base block type of a file type (Q4_K for Q4_K_M).
TensorType DefaultTensorType(FileType type);

// What the planner needs about the model (from its metadata).
struct ModelShape {
  std::string arch;       // general.architecture
  int64_t n_layer = 0;    // <arch>.block_count
  int64_t n_head = 0;     // <arch>.attention.head_count
  int64_t n_head_kv = 0;  // <arch>.attention.head_count_kv (n_head if absent)
  int64_t n_expert = 0;   // <arch>.expert_count (0 if absent)
};

struct TensorPlan {
  TensorType type;         // the type written
  bool fell_back = false;  // the chosen type could not hold the rows
  // No type can hold the rows (a 32-element type on rows not divisible by
  // 32): llama-quantize refuses the file, and so does `redline quantize`.
  bool impossible = false;
};

// Plans tensor types for one file. Construct with every tensor's name in
// the order they will be planned (llama.cpp counts attn_v tensors up front
// and decides output/token_embd by whether output.weight exists).
class MixturePlanner {
 public:
  MixturePlanner(FileType ftype, ModelShape shape,
                 const std::vector<std::string>& tensor_names,
                 bool has_imatrix = false);

  // The type for one tensor, called once per tensor in file order. `dims`
  // in ggml order; `current` is the tensor's type in the input.
  TensorPlan Plan(const std::string& name, const std::vector<int64_t>& dims,
                  TensorType current);

  // Whether llama-quantize would quantise this tensor at all (2-D+ weights
  // that are not norms, positional embeddings and similar small tensors).
  static bool AllowsQuantization(const std::string& name,
                                 const std::vector<int64_t>& dims);

 private:
  TensorType Mixture(const std::string& name, int64_t ncols, TensorType type);

  FileType ftype_;
  ModelShape shape_;
  bool has_imatrix_ = false;
  bool tied_embeddings_ = true;
  int n_attention_wv_ = 0;
  int i_attention_wv_ = 0;
  int i_ffn_down_ = 0;
  int i_ffn_gate_ = 0;
  int i_ffn_up_ = 0;
};

}  // namespace redline::quant

#endif  // REDLINE_QUANT_MIXTURE_H_

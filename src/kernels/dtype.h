// Weight element types the kernels understand, their block layouts (byte
// compatible with GGUF/ggml) and the WeightView that kernels read.
#ifndef REDLINE_KERNELS_DTYPE_H_
#define REDLINE_KERNELS_DTYPE_H_

#include <cstdint>
#include <string_view>

#include "kernels/blocks.h"

namespace redline::kernels {

// Float types first, then the 32-element block types, then the K-quants
// (256-element super-blocks). Values index the kernel tables.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kIQ4_NL,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
};
inline constexpr int kDTypeCount = 14;

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", ..., "iq4_nl", "q2_k", ...
std::string_view DTypeName(DType type);

// Every DType, in enum order.
inline constexpr DType kAllDTypes[kDTypeCount] = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,   DType::kQ4_0,
    DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K,
    DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// True for the block types (products round the activations to Q8_0).
bool IsQuantized(DType type);

// Elements per block: 1 for float types, 32 for Q8_0 ... IQ4_NL, 256 for the
// K-quants.
int64_t BlockElements(DType type);

// Bytes per block (sizeof the blocks.h struct; 4 or 2 for float types).
int64_t BlockBytes(DType type);

// Bytes of one row of `cols` elements; cols must be a multiple of
// BlockElements(type).
int64_t RowBytes(DType type, int64_t cols);

// A read-only weight matrix [rows, cols], row-major: row r starts at
// data + r * RowBytes(type, cols). Not owned; typically points into a
// memory-mapped GGUF file, so rows may be unaligned.
//
// `packed`, when set, is the same matrix in the panel layout of
// kernels/packed.h (PackWeights); products read it instead of `data` where
// the active kernels have a packed variant, and `data` everywhere else
// (DequantizeRow, other ISAs), so both must stay valid.
struct WeightView {
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  const void* packed = nullptr;

  const uint8_t* Row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * RowBytes(type, cols);
  }
};

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_DTYPE_H_

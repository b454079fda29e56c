// Internal to kernels/: the table of per-ISA kernel entry points behind the
// public API (matmul.h, ops.h), and the argument structs they share.
//
// Every ISA translation unit (ref/, x86/*_avx2.cc, x86/*_avx512.cc,
// x86/matmul_amx.cc) fills a KernelTable; dispatch.cc picks one at start-up.
// This header holds plain data and declarations only: no intrinsics and no
// inline functions, because an inline function odr-used in an ISA TU is
// compiled with that TU's flags and the linker may keep that copy for baseline
// callers.
#ifndef REDLINE_KERNELS_KERNEL_TABLE_H_
#define REDLINE_KERNELS_KERNEL_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

namespace redline::kernels {

// Activations rounded to Q8_0 blocks (ggml's reference quantizer) in the
// layout every ISA reads. Token rows are padded with zeros to qs_stride and
// d_stride so SIMD loads of whole units of blocks (up to 128 bytes from a
// 128-byte boundary) or of 16 scales never leave the buffer and read zeros
// past `cols`.
struct Q8Activations {
  // [n_tokens, qs_stride]: block b at qs + 32 * b.
  const int8_t* qs = nullptr;
  // [n_tokens, d_stride]: fp16-rounded block scale, as f32.
  const float* d = nullptr;
  // [n_tokens, d_stride]: sum of each block's 32 qs (0 in the padding), for
  // kernels that offset one operand of vpdpbusd (see packed.h).
  const int32_t* s = nullptr;
  // [n_tokens, 2 * d_stride]: sum of each 16 qs (0 in the padding), for
  // kernels whose weight scales change every 16 elements (packed Q6_K).
  const int32_t* s16 = nullptr;
  // Bytes; multiple of 128, >= cols + 64.
  int64_t qs_stride = 0;
  // Floats; multiple of 16, >= cols / 32 + 16.
  int64_t d_stride = 0;
};

// One MatMul call as the row kernels see it: y[t, r] = sum_c w[r, c] x[t, c].
struct MatMulArgs {
  DType type = DType::kF32;
  // [rows, row_bytes]; for KernelTable::matmul_packed, the packed matrix
  // (packed.h) instead.
  const uint8_t* w = nullptr;
  int64_t row_bytes = 0;  // RowBytes(type, cols)
  int64_t cols = 0;
  int64_t n_tokens = 0;
  // [n_tokens, x_stride] f32 (float weight types). F16 weights: rounded to
  // binary16 first (RoundF16Fn), so every ISA and tile shape multiplies
  // the same values and xh holds them as binary16.
  const float* x = nullptr;
  // Floats from one token of x to the next: cols, or more for the rounded
  // F16 copy (HalfRoundedStride in matmul.cc says why).
  int64_t x_stride = 0;
  const uint16_t* xh = nullptr;  // [n_tokens, cols] x as binary16 (F16 only)
  Q8Activations xq;      // [n_tokens, cols] as Q8_0 (quantized weight types)
  float* y = nullptr;    // [n_tokens, y_stride]
  int64_t y_stride = 0;  // usually rows
  // xq again as AMX B tiles, when the table has pack_q8_tiles and
  // n_tokens > 1 (else null): tile j, block b at xtiles + (j * cols / 32 + b) *
  // 512 holds tokens [16j, 16j + 16) (zeros past n_tokens) as [k][4t + i] =
  // x[16j + t][32b + 4k + i]; xtile_d likewise [.., 16] scales.
  const int8_t* xtiles = nullptr;  // [ceil(n_tokens / 16), cols / 32, 8, 64]
  const float* xtile_d = nullptr;  // [ceil(n_tokens / 16), cols / 32, 16]
};

// Packs token tiles [tile_begin, tile_end) of xq into the MatMulArgs::xtiles
// layout.
using PackQ8TilesFn = void (*)(const Q8Activations& xq, int64_t n_tokens,
                               int64_t cols, int64_t tile_begin,
                               int64_t tile_end, int8_t* tiles, float* tile_d);

// Computes rows [row_begin, row_end) of y for all n_tokens tokens.
using MatMulRowsFn = void (*)(const MatMulArgs& args, int64_t row_begin,
                              int64_t row_end);

// Quantizes one token row x [cols] (cols a multiple of 32) into
// qs [cols] and d [cols / 32] exactly as the reference does (bit-identical
// output across ISAs). Does not write the padding.
using QuantizeQ8Fn = void (*)(const float* x, int64_t cols, int8_t* qs,
                              float* d);

// Rounds x [n] to binary16, round to nearest even, finite values saturated
// at +-65504 (ggml converts such activations to inf; NaN stays NaN):
// rounded[i] is the f32 value of bits[i]. Bit-identical across ISAs (NaN
// payloads aside).
inline constexpr float kF16Max = 65504.0f;
using RoundF16Fn = void (*)(const float* x, int64_t n, float* rounded,
                            uint16_t* bits);

struct KernelTable {
  Isa isa = Isa::kScalar;
  QuantizeQ8Fn quantize_q8 = nullptr;
  RoundF16Fn round_f16 = nullptr;
  PackQ8TilesFn pack_q8_tiles = nullptr;  // null: the row kernels read xq only
  MatMulRowsFn matmul[kDTypeCount] = {};  // indexed by DType
  // The same products on packed weights (packed.h), indexed by DType; null
  // where the ISA has none. Called with row_begin a multiple of kPackRows.
  MatMulRowsFn matmul_packed[kDTypeCount] = {};
  void (*rms_norm)(const float* x, const float* weight, int64_t n, float eps,
                   float* out) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, int64_t n,
                   float* out) = nullptr;
  void (*add)(const float* x, int64_t n, float* y) = nullptr;
  void (*to_f16)(const float* x, int64_t n, uint16_t* out) = nullptr;
  int64_t (*argmax)(const float* x, int64_t n) = nullptr;  // n >= 1
  void (*rope)(float* x, int64_t n_heads, int64_t head_dim,
               const float* cos_sin, RopeStyle style) = nullptr;
  void (*attention_head)(const float* q, const float* k, const float* v,
                         int64_t n_kv, int64_t head_dim, int64_t kv_stride,
                         float scale, float* scores, float* out) = nullptr;
  void (*attention_head_f16)(const float* q, const uint16_t* k,
                             const uint16_t* v, int64_t n_kv, int64_t head_dim,
                             int64_t kv_stride, float scale, float* work,
                             float* out) = nullptr;
  void (*attention_chunk)(KvElement type, const float* q, int64_t n_q,
                          const void* k, const void* v, int64_t n_kv,
                          int64_t head_dim, int64_t row_bytes, float scale,
                          float* work, float* partial) = nullptr;
};

// One block of a quantized type (BlockElements(type) = E elements) in the
// form every product kernel reads: E signed 8-bit values q and, per group of
// 16 elements g, a scale and an offset, so that the weight is
//   w[e] = scale[e / 16] * q[e] + offset[e / 16]
// which equals the type's dequantisation (DequantizeBlocks) up to the sign
// of a zero. Offsets are 0 for the types without a min (HasOffset false).
// |q| <= 127 for every type, so u8 x s8 pair sums of |q| and x never
// saturate int16.
using UnpackBlockFn = void (*)(const uint8_t* block, int8_t* q, float* scale,
                               float* offset);

// True for the types whose unpacked blocks carry a non-zero offset
// (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K).
bool HasOffset(DType type);

// The table the public functions use (see isa.h for how it is chosen).
const KernelTable& ActiveKernels();

// Each ISA's table. Only call FillTable of an ISA the CPU supports.
// FillTable (in the ISA's ops TU) calls FillMatMulTable (its matmul TU).
namespace ref {
void FillTable(KernelTable* table);
void FillMatMulTable(KernelTable* table);
// ggml's dequantize_row_* for n_blocks blocks of `type` (any quantized
// type) at src (unaligned), into out [n_blocks * BlockElements(type)].
void DequantizeBlocks(DType type, const uint8_t* src, int64_t n_blocks,
                      float* out);
// The scalar unpacker of a quantized type (never null for those).
UnpackBlockFn Unpacker(DType type);
// The reference Argmax (ops.h), which the vector ones fall back to when no
// value beats -inf.
int64_t Argmax(const float* x, int64_t n);
// The reference ToF16 (ops.h), which the vector ones use for NaN lanes and
// tails.
void ToF16(const float* x, int64_t n, uint16_t* out);
}  // namespace ref
namespace avx2 {
void FillTable(KernelTable* table);
void FillMatMulTable(KernelTable* table);
// The products on packed Q8_0/Q4_0/Q4_1/IQ4_NL/Q5_0/Q5_1/F16/BF16 weights
// (x86/matmul_packed_avx2.cc).
void FillPackedMatMulTable(KernelTable* table);
// The products on packed Q2_K/Q3_K/Q4_K/Q5_K/Q6_K weights
// (x86/matmul_kpacked_avx2.cc).
void FillKPackedMatMulTable(KernelTable* table);
}  // namespace avx2
// The AVX2 table with the panel products of matmul_packed_avx2.cc and
// matmul_kpacked_avx2.cc built for AVX-VNNI (x86/matmul_packed_avxvnni.cc,
// x86/matmul_kpacked_avxvnni.cc).
namespace avxvnni {
void FillTable(KernelTable* table);
void FillPackedMatMulTable(KernelTable* table);
void FillKPackedMatMulTable(KernelTable* table);
}  // namespace avxvnni
namespace avx512 {
void FillTable(KernelTable* table);
void FillMatMulTable(KernelTable* table);
// The VNNI row kernels, which the AMX ones fall back to.
void MatMulRowsQ8_0(const MatMulArgs& args, int64_t row_begin, int64_t row_end);
void MatMulRowsQ4_0(const MatMulArgs& args, int64_t row_begin, int64_t row_end);
// Products on packed weights (x86/matmul_packed_avx512.cc).
void MatMulPackedRowsQ8_0(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ4_0(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ5_0(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ5_1(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ4_1(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsIQ4_NL(const MatMulArgs& args, int64_t row_begin,
                            int64_t row_end);
// Products on packed F16/BF16 weights (x86/matmul_half_packed_avx512.cc).
void MatMulPackedRowsF16(const MatMulArgs& args, int64_t row_begin,
                         int64_t row_end);
void MatMulPackedRowsBF16(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
// Products on packed Q2_K/Q3_K/Q4_K/Q5_K/Q6_K weights
// (x86/matmul_kpacked_avx512.cc).
void MatMulPackedRowsQ2_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ3_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ4_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ5_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
void MatMulPackedRowsQ6_K(const MatMulArgs& args, int64_t row_begin,
                          int64_t row_end);
}  // namespace avx512
namespace amx {
void FillTable(KernelTable* table);
// Asks Linux for AMX tile state (arch_prctl); false if refused. Call once
// before FillTable, only on a CPU with AVX-512 and AMX-INT8.
bool RequestTilePermission();
}  // namespace amx

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_KERNEL_TABLE_H_

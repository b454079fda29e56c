// Reference quantisers: float rows -> ggml blocks (kernels/blocks.h), one
// function per block type, reproducing ggml's deterministic (no importance
// matrix) quantisation bit for bit, so a file quantised here is byte-identical
// to one quantised by llama.cpp's llama-quantize (with or without an
// importance matrix).
//
// Bit-exactness rules the implementation keeps (see row_quantize.cc):
// float (never double) arithmetic in ggml's operation order, no fused
// multiply-add (the file is built with -ffp-contract=off), ggml's
// nearest_int (the 1.5 * 2^23 magic-number rounding) where ggml uses it and
// roundf / truncating casts where ggml uses those, and binary16 scales
// rounded to nearest even (base/float16.h).
//
// Thread-safety: every function is pure; distinct rows may be quantised on
// any number of threads at once. Cost: O(elements); the K-quants search
// 16-20 candidate scales per sub-block (Q4_K/Q5_K ~10x slower than Q8_0).
#ifndef REDLINE_QUANT_ROW_QUANTIZE_H_
#define REDLINE_QUANT_ROW_QUANTIZE_H_

#include <cstdint>
#include <span>

#include "model/gguf/gguf.h"

namespace redline::quant {

using model::gguf::TensorType;

// True for the block types QuantizeRow can produce: Q4_0 Q4_1 Q5_0 Q5_1
// Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL (plus F32/F16/BF16 conversions).
bool CanQuantizeTo(TensorType type);

// Bytes of one row of `n_per_row` elements of `type` (0 if n_per_row is not
// a multiple of the type's block size).
int64_t RowBytes(TensorType type, int64_t n_per_row);

// Quantises one row: `x` holds n_per_row floats, `out` exactly
// RowBytes(type, n_per_row) bytes. Requires CanQuantizeTo(type) and
// n_per_row a multiple of the block size (RL_CHECK: callers validate).
// `importance`, when not empty, holds n_per_row finite non-negative values
// (an importance matrix's entry for this row's columns) and selects ggml's
// weighted quantisers (what llama-quantize --imatrix writes); F16/BF16/F32
// and Q8_0 ignore it, as ggml does.
void QuantizeRow(TensorType type, std::span<const float> x,
                 std::span<uint8_t> out,
                 std::span<const float> importance = {});

// Dequantises one row of any type QuantizeRow produces back to floats with
// ggml's formulas (used for --allow-requantize and by the tests' error
// checks). `out` holds n_per_row floats.
void DequantizeRow(TensorType type, std::span<const uint8_t> in,
                   std::span<float> out);

}  // namespace redline::quant

#endif  // REDLINE_QUANT_ROW_QUANTIZE_H_

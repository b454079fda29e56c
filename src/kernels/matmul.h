// Matrix products with a weight matrix in any DType.
#ifndef REDLINE_KERNELS_MATMUL_H_
#define REDLINE_KERNELS_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "kernels/dtype.h"

namespace redline::kernels {

// Bytes of scratch that MatMul needs for these shapes (e.g. the activations
// quantized to Q8 for integer dot products, or rounded to binary16 for F16
// weights). 0 when none (F32, BF16). The same for every ISA, and for every
// quantized type; F16's covers a quantized type's too (a MatMulMany group
// may mix them).
size_t MatMulScratchBytes(DType weight_type, int64_t cols, int64_t n_tokens);

// y = x * w^T:  y[t, r] = sum_c w[r, c] * x[t, c].
//   x: [n_tokens, w.cols] f32, row stride w.cols
//   y: [n_tokens, w.rows] f32, row stride w.rows (overwritten)
// n_tokens == 1 is the matrix-vector product of a decode step; larger
// n_tokens is the matrix-matrix product of prefill. Splits rows over `pool`
// (products of under 2^18 multiply-adds run on the calling thread).
// For quantized weights (every block type), x is first rounded to Q8_0
// blocks (as ggml does for the 32-element types; the K-quants, which ggml
// pairs with 256-element Q8_K blocks, get the same finer per-32 rounding),
// so the result differs from the float reference by that rounding. For F16
// weights x is first rounded to binary16 (as ggml's F16 products do; finite
// values saturate at +-65504 where ggml's become inf).
void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y,
            std::span<std::byte> scratch, ThreadPool& pool);

// Several products with the same x, as one call: ys[i] = x * ws[i]^T, each
// like MatMul (ys[i] row stride ws[i].rows). Every ws[i] has the same cols;
// types may differ. Quantizes x once and splits the rows of all matrices
// over `pool` in one pass, so q/k/v or gate/up projections cost one
// quantization and one thread synchronisation instead of several.
// scratch: MatMulScratchBytes(kF16, cols, n_tokens) if any ws[i] is F16,
// else MatMulScratchBytes(kQ8_0, cols, n_tokens) if any is quantized. At
// most 8 matrices.
void MatMulMany(std::span<const WeightView> ws, const float* x,
                int64_t n_tokens, std::span<float* const> ys,
                std::span<std::byte> scratch, ThreadPool& pool);

// out[0, w.cols) = row `row` of w as f32; for block types bit-identical to
// ggml's dequantize_row_*.
void DequantizeRow(const WeightView& w, int64_t row, float* out);

// Writes n floats as `type` into dst (RowBytes(type, n) bytes); n must be a
// multiple of BlockElements(type). Float types, Q8_0 and Q4_0 only (the
// other block types have no quantizer here). Round to nearest; Q8_0/Q4_0
// choose the block scale as ggml's reference quantizers do.
void QuantizeRow(DType type, const float* src, int64_t n, void* dst);

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_MATMUL_H_

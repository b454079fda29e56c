// Importance-weighted quantisation (llama-quantize --imatrix): ggml's
// quantize_row_*_impl for every type whose result depends on the weights.
// Used through QuantizeRow (row_quantize.h) with an importance span.
//
// Thread-safety: pure. Cost: like the unweighted K-quants (Q4_K/Q5_K's
// affine search tries 37 scales per 32 elements), and Q4_0/Q5_0, which are
// a single division without weights, search 19 scales per block.
#ifndef REDLINE_QUANT_WEIGHTED_QUANTIZE_H_
#define REDLINE_QUANT_WEIGHTED_QUANTIZE_H_

#include <cstdint>

#include "model/gguf/gguf.h"

namespace redline::quant::internal {

// Quantises the n floats of `x` with importance `qw` (n values, >= 0) into
// `dst` (RowBytes(type, n) bytes). Returns false, writing nothing, for the
// types ggml quantises the same with or without weights (F32, F16, BF16,
// Q8_0).
bool QuantizeRowWeighted(model::gguf::TensorType type, const float* x,
                         const float* qw, int64_t n, uint8_t* dst);

}  // namespace redline::quant::internal

#endif  // REDLINE_QUANT_WEIGHTED_QUANTIZE_H_

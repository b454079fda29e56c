// The steps of each block type's quantisation that come after the scale
// search and are the same with and without an importance matrix: packing
// levels and scales into ggml's layouts, and re-deriving the levels from
// the scales as they were rounded (binary16 super-scales, 4/6-bit
// sub-scales). Shared by row_quantize.cc (ggml's *_ref quantisers) and
// weighted_quantize.cc (ggml's *_impl quantisers with importance weights);
// bit-exact with ggml like them (-ffp-contract=off, ggml's operation order).
//
// Thread-safety: pure functions. Cost: O(block elements).
#ifndef REDLINE_QUANT_BLOCK_ENCODE_H_
#define REDLINE_QUANT_BLOCK_ENCODE_H_

#include <cstdint>

#include "kernels/blocks.h"

namespace redline::quant::internal {

// The 6-bit scale/min pair j (0..7) of Q4_K/Q5_K's 12-byte packing.
inline void UnpackScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Stores pair j; pairs must be stored in order 0..7 (j >= 4 ORs into the
// bytes pairs 0..3 wrote).
inline void PackScaleMinK4(int j, uint8_t ls, uint8_t lm, uint8_t* q) {
  if (j < 4) {
    q[j] = ls;
    q[j + 4] = lm;
  } else {
    q[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
    q[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    q[j] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// Q4_0 / Q4_1 / IQ4_NL nibbles: byte j holds levels j and j + 16.
void PackNibbleHalves(const uint8_t* levels, uint8_t* qs);
// Q5_0 / Q5_1: the low nibbles as PackNibbleHalves, bit 4 of level j in bit j
// of the 32-bit qh.
void PackFiveBitHalves(const uint8_t* levels, uint8_t* qs, uint8_t* qh);

// IQ4_NL block: ggml's quantize_row_iq4_nl_impl for one 32-element block
// with 7 scale trials either side of max / -127, scored by the weighted
// least-squares gain, then every element re-assigned with the chosen scale.
// `weight` holds 32 importance values.
void EncodeIq4NlBlock(const float* x, const float* weight,
                      kernels::BlockIQ4_NL* y);

// Q2_K: with out.d, out.dmin and out.scales set, re-derives each sub-block's
// levels in [0, 3] from its rounded scale and min (sub-blocks whose scale
// rounds to 0 keep the search's levels) and packs them.
void EncodeQ2KLevels(const float* x, uint8_t* levels, kernels::BlockQ2_K& out);

// Q3_K: stores sub-block j's 6-bit scale `l` (0..63, biased by 32) into the
// 12 scale bytes (zeroed before j = 0).
void PackQ3KScale(int j, int l, uint8_t* scales);
// Q3_K: with out.d and out.scales set, re-derives the levels in [-4, 3]
// (sub-blocks whose scale rounds to 0 keep `levels`, biased by 4) and packs
// the high bits into hmask and the low two into qs.
void EncodeQ3KLevels(const float* x, int8_t* levels, kernels::BlockQ3_K& out);

// Q4_K/Q5_K: with the 12 packed scale bytes and the binary16 d/dmin set,
// re-derives every sub-block's levels in [0, nmax] (sub-blocks whose scale
// rounds to 0 keep theirs).
void RequantizeScaleMinK4(const float* x, const uint8_t* packed, uint16_t d,
                          uint16_t dmin, int nmax, uint8_t* levels);
void PackQ4KLevels(const uint8_t* levels, kernels::BlockQ4_K& out);
void PackQ5KLevels(const uint8_t* levels, kernels::BlockQ5_K& out);

// Q6_K: from the 16 sub-block scales the search chose (and its levels,
// kept where a rounded scale is 0): the super-scale, the 8-bit sub-scales,
// the re-derived levels and their 4+2-bit packing. An all-zero block when
// every scale is below the group epsilon.
void EncodeQ6KBlock(const float* x, const float* scales, int8_t* levels,
                    kernels::BlockQ6_K& out);

}  // namespace redline::quant::internal

#endif  // REDLINE_QUANT_BLOCK_ENCODE_H_

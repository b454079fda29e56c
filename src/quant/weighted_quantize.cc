// ggml's importance-weighted quantisers, bit for bit (see row_quantize.cc
// for the rules). Each element's weight is its importance times
// sqrt(sigma2 + x^2), sigma2 being the mean square of the row (32-element
// types), of the super-block (K-quants, doubled except for Q2_K) or of the
// block (IQ4_NL, doubled); Q6_K uses the importance alone. The K-quants'
// sub-block scales and mins are then fitted with the sub-blocks' summed
// weights (PositiveScale) instead of being scaled to their maximum.
#include "quant/weighted_quantize.h"

#include <cmath>
#include <cstring>

#include "base/float16.h"
#include "kernels/blocks.h"
#include "quant/block_encode.h"
#include "quant/scale_search.h"

namespace redline::quant::internal {
namespace {

using kernels::BlockIQ4_NL;
using kernels::BlockQ2_K;
using kernels::BlockQ3_K;
using kernels::BlockQ4_0;
using kernels::BlockQ4_1;
using kernels::BlockQ4_K;
using kernels::BlockQ5_0;
using kernels::BlockQ5_1;
using kernels::BlockQ5_K;
using kernels::BlockQ6_K;
using kernels::kQkBlock;
using kernels::kQkSuper;
using model::gguf::TensorType;

float SumSquares(const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum;
}

// weight[j] = qw[j] * sqrt(sigma2 + x[j]^2); returns their sum.
float Weigh(const float* x, const float* qw, float sigma2, int n,
            float* weight) {
  for (int j = 0; j < n; ++j)
    weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) sum += weight[j];
  return sum;
}

// Q4_0 (nmax 8) and Q5_0 (nmax 16): symmetric, one scale per block.
template <int kNmax, typename Block>
void Symmetric32(const float* x, const float* qw, int64_t n, Block* y) {
  const float sigma2 = SumSquares(x, n) / n;
  for (int64_t ib = 0; ib < n / kQkBlock; ++ib) {
    const float* xb = x + kQkBlock * ib;
    float weight[kQkBlock];
    Weigh(xb, qw + kQkBlock * ib, sigma2, kQkBlock, weight);
    int8_t levels[kQkBlock];
    const float d = SymmetricScale(kQkBlock, kNmax, xb, weight, levels);
    y[ib].d = Fp32ToFp16(d);
    const auto* l = reinterpret_cast<const uint8_t*>(levels);
    if constexpr (kNmax == 8) {
      PackNibbleHalves(l, y[ib].qs);
    } else {
      PackFiveBitHalves(l, y[ib].qs, y[ib].qh);
    }
  }
}

// Q4_1 (nmax 15) and Q5_1 (nmax 31): scale and min per block.
template <int kNmax, typename Block>
void Affine32(const float* x, const float* qw, int64_t n, Block* y) {
  const float sigma2 = SumSquares(x, n) / n;
  for (int64_t ib = 0; ib < n / kQkBlock; ++ib) {
    const float* xb = x + kQkBlock * ib;
    float weight[kQkBlock];
    Weigh(xb, qw + kQkBlock * ib, sigma2, kQkBlock, weight);
    uint8_t levels[kQkBlock];
    float min;
    const float d = AffineScale(kQkBlock, kNmax, xb, weight, levels, &min,
                                -0.9f, 0.05f, 36, false);
    y[ib].d = Fp32ToFp16(d);
    y[ib].m = Fp32ToFp16(-min);
    if constexpr (kNmax == 15) {
      PackNibbleHalves(levels, y[ib].qs);
    } else {
      PackFiveBitHalves(levels, y[ib].qs, y[ib].qh);
    }
  }
}

void Iq4Nl(const float* x, const float* qw, int64_t n, BlockIQ4_NL* y) {
  for (int64_t ib = 0; ib < n / kQkBlock; ++ib) {
    const float* xb = x + kQkBlock * ib;
    float sigma2 = SumSquares(xb, kQkBlock);
    sigma2 *= 2.f / kQkBlock;
    float weight[kQkBlock];
    Weigh(xb, qw + kQkBlock * ib, sigma2, kQkBlock, weight);
    EncodeIq4NlBlock(xb, weight, &y[ib]);
  }
}

void Q2K(const float* x, const float* qw, int64_t n, BlockQ2_K* y) {
  for (int64_t i = 0; i < n / kQkSuper; ++i, x += kQkSuper, qw += kQkSuper) {
    const float sigma2 = SumSquares(x, kQkSuper) / kQkSuper;
    uint8_t levels[kQkSuper];
    float scales[kQkSuper / 16];
    float mins[kQkSuper / 16];
    float sw[kQkSuper / 16];
    for (int j = 0; j < kQkSuper / 16; ++j) {
      float weight[16];
      sw[j] = Weigh(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
      scales[j] = AffineScale(16, 3, x + 16 * j, weight, levels + 16 * j,
                              &mins[j], -0.9f, 0.05f, 36, false);
    }
    uint8_t ls[kQkSuper / 16];
    uint8_t lm[kQkSuper / 16];
    const float dm = PositiveScale(kQkSuper / 16, 15, scales, sw, ls);
    const float mm = PositiveScale(kQkSuper / 16, 15, mins, sw, lm);
    BlockQ2_K& out = y[i];
    out.d = Fp32ToFp16(dm);
    out.dmin = Fp32ToFp16(mm);
    for (int j = 0; j < kQkSuper / 16; ++j) {
      out.scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
    }
    EncodeQ2KLevels(x, levels, out);
  }
}

void Q3K(const float* x, const float* qw, int64_t n, BlockQ3_K* y) {
  for (int64_t i = 0; i < n / kQkSuper; ++i, x += kQkSuper, qw += kQkSuper) {
    const float sigma2 = 2 * SumSquares(x, kQkSuper) / kQkSuper;
    int8_t levels[kQkSuper];
    float scales[kQkSuper / 16];
    float sw[kQkSuper / 16];
    for (int j = 0; j < kQkSuper / 16; ++j) {
      float weight[16];
      sw[j] = Weigh(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
      scales[j] = SymmetricScale(16, 4, x + 16 * j, weight, levels + 16 * j);
    }
    BlockQ3_K& out = y[i];
    std::memset(out.scales, 0, sizeof(out.scales));
    int8_t ls[kQkSuper / 16];
    const float d_block = SymmetricScale(kQkSuper / 16, 32, scales, sw, ls);
    for (int j = 0; j < kQkSuper / 16; ++j) PackQ3KScale(j, ls[j], out.scales);
    out.d = Fp32ToFp16(d_block);
    EncodeQ3KLevels(x, levels, out);
  }
}

// Q4_K (nmax 15) and Q5_K (nmax 31).
template <int kNmax, typename Block>
void ScaleMinK(const float* x, const float* qw, int64_t n, Block* y) {
  for (int64_t i = 0; i < n / kQkSuper; ++i, x += kQkSuper, qw += kQkSuper) {
    const float sigma2 = 2 * SumSquares(x, kQkSuper) / kQkSuper;
    uint8_t levels[kQkSuper];
    float scales[kQkSuper / 32];
    float mins[kQkSuper / 32];
    float sw[kQkSuper / 32];
    for (int j = 0; j < kQkSuper / 32; ++j) {
      float weight[32];
      sw[j] = Weigh(x + 32 * j, qw + 32 * j, sigma2, 32, weight);
      scales[j] = AffineScale(32, kNmax, x + 32 * j, weight, levels + 32 * j,
                              &mins[j], -0.9f, 0.05f, 36, false);
    }
    uint8_t ls[kQkSuper / 32];
    uint8_t lm[kQkSuper / 32];
    const float d_block = PositiveScale(kQkSuper / 32, 63, scales, sw, ls);
    const float m_block = PositiveScale(kQkSuper / 32, 63, mins, sw, lm);
    Block& out = y[i];
    for (int j = 0; j < kQkSuper / 32; ++j) {
      // ggml caps the codes at 63 for Q5_K only; Q4_K stores them as they
      // are (a negative code, from a negative scale, wraps).
      const uint8_t s = kNmax == 31 && ls[j] > 63 ? 63 : ls[j];
      const uint8_t m = kNmax == 31 && lm[j] > 63 ? 63 : lm[j];
      PackScaleMinK4(j, s, m, out.scales);
    }
    out.d = Fp32ToFp16(d_block);
    out.dmin = Fp32ToFp16(m_block);
    RequantizeScaleMinK4(x, out.scales, out.d, out.dmin, kNmax, levels);
    if constexpr (kNmax == 15) {
      PackQ4KLevels(levels, out);
    } else {
      PackQ5KLevels(levels, out);
    }
  }
}

void Q6K(const float* x, const float* qw, int64_t n, BlockQ6_K* y) {
  for (int64_t i = 0; i < n / kQkSuper; ++i, x += kQkSuper, qw += kQkSuper) {
    int8_t levels[kQkSuper];
    float scales[kQkSuper / 16];
    for (int ib = 0; ib < kQkSuper / 16; ++ib) {
      scales[ib] =
          SymmetricScale(16, 32, x + 16 * ib, qw + 16 * ib, levels + 16 * ib);
    }
    EncodeQ6KBlock(x, scales, levels, y[i]);
  }
}

}  // namespace

bool QuantizeRowWeighted(TensorType type, const float* x, const float* qw,
                         int64_t n, uint8_t* dst) {
  switch (type) {
    case TensorType::kQ4_0:
      Symmetric32<8>(x, qw, n, reinterpret_cast<BlockQ4_0*>(dst));
      return true;
    case TensorType::kQ5_0:
      Symmetric32<16>(x, qw, n, reinterpret_cast<BlockQ5_0*>(dst));
      return true;
    case TensorType::kQ4_1:
      Affine32<15>(x, qw, n, reinterpret_cast<BlockQ4_1*>(dst));
      return true;
    case TensorType::kQ5_1:
      Affine32<31>(x, qw, n, reinterpret_cast<BlockQ5_1*>(dst));
      return true;
    case TensorType::kIQ4_NL:
      Iq4Nl(x, qw, n, reinterpret_cast<BlockIQ4_NL*>(dst));
      return true;
    case TensorType::kQ2_K:
      Q2K(x, qw, n, reinterpret_cast<BlockQ2_K*>(dst));
      return true;
    case TensorType::kQ3_K:
      Q3K(x, qw, n, reinterpret_cast<BlockQ3_K*>(dst));
      return true;
    case TensorType::kQ4_K:
      ScaleMinK<15>(x, qw, n, reinterpret_cast<BlockQ4_K*>(dst));
      return true;
    case TensorType::kQ5_K:
      ScaleMinK<31>(x, qw, n, reinterpret_cast<BlockQ5_K*>(dst));
      return true;
    case TensorType::kQ6_K:
      Q6K(x, qw, n, reinterpret_cast<BlockQ6_K*>(dst));
      return true;
    default:
      return false;
  }
}

}  // namespace redline::quant::internal

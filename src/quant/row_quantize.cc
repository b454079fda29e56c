// Why this file looks the way it does: the output must equal ggml's byte for
// byte, and float rounding makes that depend on every operation. So each
// quantiser keeps ggml's evaluation order exactly ((w * x) * l, not
// w * (x * l)), accumulates in float, compares with the same strictness
// (> vs >=), and this file is compiled with -ffp-contract=off so the compiler
// never fuses a * b + c. Structure and names are Redline's own.
#include "quant/row_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/float16.h"
#include "kernels/blocks.h"
#include "quant/block_encode.h"
#include "quant/scale_search.h"
#include "quant/weighted_quantize.h"

namespace redline::quant {
namespace {

using internal::AffineScale;
using internal::ClampLevel;
using internal::EncodeQ2KLevels;
using internal::EncodeQ3KLevels;
using internal::EncodeQ6KBlock;
using internal::NearestInt;
using internal::PackFiveBitHalves;
using internal::PackQ3KScale;
using internal::PackQ4KLevels;
using internal::PackQ5KLevels;
using internal::PackScaleMinK4;
using internal::Q3Scale;
using internal::RequantizeScaleMinK4;
using internal::SignedAbsMax;
using internal::SymmetricScale;
using internal::UnpackScaleMinK4;

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
using kernels::BlockQ8_0;
using kernels::kIq4NlValues;
using kernels::kQkBlock;
using kernels::kQkSuper;

inline float H2F(uint16_t h) { return Fp16ToFp32(h); }
inline uint16_t F2H(float f) { return Fp32ToFp16(f); }

// ---- 32-element types ------------------------------------------------------

void QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQkBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F2H(d);
    for (int j = 0; j < kQkBlock; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    }
  }
}

void QuantizeQ4_0(const float* x, BlockQ4_0* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float amax;
    const float d = SignedAbsMax(x, kQkBlock, &amax) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F2H(d);
    for (int j = 0; j < kQkBlock / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[kQkBlock / 2 + j] * id;
      const int q0 =
          std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeQ5_0(const float* x, BlockQ5_0* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float amax;
    const float d = SignedAbsMax(x, kQkBlock, &amax) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F2H(d);
    uint8_t levels[kQkBlock];
    for (int j = 0; j < kQkBlock; ++j) {
      levels[j] = static_cast<uint8_t>(std::min(
          31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f))));
    }
    PackFiveBitHalves(levels, y[b].qs, y[b].qh);
  }
}

inline void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

void QuantizeQ4_1(const float* x, BlockQ4_1* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float min, max;
    MinMax(x, kQkBlock, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F2H(d);
    y[b].m = F2H(min);
    for (int j = 0; j < kQkBlock / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[kQkBlock / 2 + j] - min) * id;
      const int q0 =
          std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f)));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeQ5_1(const float* x, BlockQ5_1* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float min, max;
    MinMax(x, kQkBlock, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F2H(d);
    y[b].m = F2H(min);
    uint8_t levels[kQkBlock];
    for (int j = 0; j < kQkBlock; ++j) {
      levels[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    }
    PackFiveBitHalves(levels, y[b].qs, y[b].qh);
  }
}

void QuantizeIq4Nl(const float* x, BlockIQ4_NL* y, int64_t blocks) {
  // Without an importance matrix llama-quantize weights each element by x^2.
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float weight[kQkBlock];
    for (int j = 0; j < kQkBlock; ++j) weight[j] = x[j] * x[j];
    internal::EncodeIq4NlBlock(x, weight, &y[b]);
  }
}

// ---- K-quants ----------------------------------------------------------------

void QuantizeQ2_K(const float* x, BlockQ2_K* y, int64_t blocks) {
  constexpr float kScaleMax = 15.f;
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    uint8_t levels[kQkSuper];
    float weights[16];
    float mins[kQkSuper / 16];
    float scales[kQkSuper / 16];
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int j = 0; j < kQkSuper / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = AffineScale(16, 3, x + 16 * j, weights, levels + 16 * j,
                              &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    BlockQ2_K& out = y[b];
    if (max_scale > 0) {
      const float iscale = kScaleMax / max_scale;
      for (int j = 0; j < kQkSuper / 16; ++j) {
        out.scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      }
      out.d = F2H(max_scale / kScaleMax);
    } else {
      for (int j = 0; j < kQkSuper / 16; ++j) out.scales[j] = 0;
      out.d = F2H(0.0f);
    }
    if (max_min > 0) {
      const float iscale = kScaleMax / max_min;
      for (int j = 0; j < kQkSuper / 16; ++j) {
        const int l = NearestInt(iscale * mins[j]);
        out.scales[j] = static_cast<uint8_t>(out.scales[j] | (l << 4));
      }
      out.dmin = F2H(max_min / kScaleMax);
    } else {
      out.dmin = F2H(0.0f);
    }
    EncodeQ2KLevels(x, levels, out);
  }
}

void QuantizeQ3_K(const float* x, BlockQ3_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    int8_t levels[kQkSuper];
    float scales[kQkSuper / 16];
    float max_scale = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQkSuper / 16; ++j) {
      scales[j] = Q3Scale(16, 4, x + 16 * j, levels + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    BlockQ3_K& out = y[b];
    std::memset(out.scales, 0, sizeof(out.scales));
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQkSuper / 16; ++j) {
        const auto l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        PackQ3KScale(j, ClampLevel(l, -32, 31) + 32, out.scales);
      }
      out.d = F2H(1 / iscale);
    } else {
      out.d = F2H(0.0f);
    }
    EncodeQ3KLevels(x, levels, out);
  }
}

// Q4_K and Q5_K share the scale search and scale packing; they differ in
// nmax, the search grid and how the quants are stored.
template <int kNmax>
void KxScales(const float* x, float rmin, float rdelta, int nstep,
              uint8_t* levels, uint8_t* packed, uint16_t* d_out,
              uint16_t* dmin_out) {
  float weights[32];
  float mins[kQkSuper / 32];
  float scales[kQkSuper / 32];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < kQkSuper / 32; ++j) {
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = AffineScale(32, kNmax, x + 32 * j, weights, levels + 32 * j,
                            &mins[j], rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.0f;
  for (int j = 0; j < kQkSuper / 32; ++j) {
    uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    PackScaleMinK4(j, ls, lm, packed);
  }
  *d_out = F2H(max_scale / 63.f);
  *dmin_out = F2H(max_min / 63.f);
  RequantizeScaleMinK4(x, packed, *d_out, *dmin_out, kNmax, levels);
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    uint8_t levels[kQkSuper];
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    KxScales<15>(x, -1.f, 0.1f, 20, levels, y[b].scales, &y[b].d, &y[b].dmin);
    PackQ4KLevels(levels, y[b]);
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    uint8_t levels[kQkSuper];
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    KxScales<31>(x, -0.5f, 0.1f, 15, levels, y[b].scales, &y[b].d, &y[b].dmin);
    PackQ5KLevels(levels, y[b]);
  }
}

void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    int8_t levels[kQkSuper];
    float scales[kQkSuper / 16];
    for (int ib = 0; ib < kQkSuper / 16; ++ib) {
      scales[ib] =
          SymmetricScale(16, 32, x + 16 * ib, nullptr, levels + 16 * ib);
    }
    EncodeQ6KBlock(x, scales, levels, y[b]);
  }
}

// ---- dequantisation --------------------------------------------------------

void DequantizeBlocks(TensorType type, const uint8_t* in, float* y, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(y, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = Fp16ToFp32(h);
      }
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = Bf16ToFp32(h);
      }
      return;
    case TensorType::kQ8_0: {
      const auto* x = reinterpret_cast<const BlockQ8_0*>(in);
      for (int64_t b = 0; b < n / kQkBlock; ++b) {
        const float d = H2F(x[b].d);
        for (int j = 0; j < kQkBlock; ++j) *y++ = x[b].qs[j] * d;
      }
      return;
    }
    case TensorType::kQ4_0:
    case TensorType::kIQ4_NL: {
      // Same layout (d, 16 bytes of nibbles); only the level map differs.
      const bool nl = type == TensorType::kIQ4_NL;
      const auto* x = reinterpret_cast<const BlockQ4_0*>(in);
      for (int64_t b = 0; b < n / kQkBlock; ++b, y += kQkBlock) {
        const float d = H2F(x[b].d);
        for (int j = 0; j < 16; ++j) {
          const int lo = x[b].qs[j] & 0xf;
          const int hi = x[b].qs[j] >> 4;
          y[j] = d * (nl ? kIq4NlValues[lo] : lo - 8);
          y[j + 16] = d * (nl ? kIq4NlValues[hi] : hi - 8);
        }
      }
      return;
    }
    case TensorType::kQ4_1: {
      const auto* x = reinterpret_cast<const BlockQ4_1*>(in);
      for (int64_t b = 0; b < n / kQkBlock; ++b, y += kQkBlock) {
        const float d = H2F(x[b].d);
        const float m = H2F(x[b].m);
        for (int j = 0; j < 16; ++j) {
          y[j] = (x[b].qs[j] & 0xf) * d + m;
          y[j + 16] = (x[b].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
    case TensorType::kQ5_0:
    case TensorType::kQ5_1: {
      const bool has_min = type == TensorType::kQ5_1;
      const int64_t stride = has_min ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
      for (int64_t b = 0; b < n / kQkBlock; ++b, y += kQkBlock) {
        const uint8_t* blk = in + b * stride;
        uint16_t dh, mh = 0;
        std::memcpy(&dh, blk, 2);
        if (has_min) std::memcpy(&mh, blk + 2, 2);
        const uint8_t* qh_bytes = blk + (has_min ? 4 : 2);
        const uint8_t* qs = qh_bytes + 4;
        uint32_t qh;
        std::memcpy(&qh, qh_bytes, 4);
        const float d = H2F(dh);
        const float m = H2F(mh);
        for (int j = 0; j < 16; ++j) {
          const int q0 = (qs[j] & 0xf) | (((qh >> j) << 4) & 0x10);
          const int q1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
          if (has_min) {
            y[j] = q0 * d + m;
            y[j + 16] = q1 * d + m;
          } else {
            y[j] = (q0 - 16) * d;
            y[j + 16] = (q1 - 16) * d;
          }
        }
      }
      return;
    }
    case TensorType::kQ2_K: {
      const auto* x = reinterpret_cast<const BlockQ2_K*>(in);
      for (int64_t b = 0; b < n / kQkSuper; ++b) {
        const float d = H2F(x[b].d);
        const float dmin = H2F(x[b].dmin);
        const uint8_t* q = x[b].qs;
        int is = 0;
        for (int half = 0; half < kQkSuper; half += 128, q += 32) {
          for (int shift = 0; shift < 8; shift += 2) {
            for (int k = 0; k < 2; ++k) {
              const uint8_t sc = x[b].scales[is++];
              const float dl = d * (sc & 0xf);
              const float ml = dmin * (sc >> 4);
              for (int l = 0; l < 16; ++l) {
                *y++ = dl * ((q[l + 16 * k] >> shift) & 3) - ml;
              }
            }
          }
        }
      }
      return;
    }
    case TensorType::kQ3_K: {
      const auto* x = reinterpret_cast<const BlockQ3_K*>(in);
      for (int64_t b = 0; b < n / kQkSuper; ++b) {
        const float d_all = H2F(x[b].d);
        int8_t scales[16];
        for (int j = 0; j < 16; ++j) {
          int sc = j < 8 ? x[b].scales[j] & 0xf : x[b].scales[j - 8] >> 4;
          sc |= ((x[b].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
          scales[j] = static_cast<int8_t>(sc - 32);
        }
        for (int j = 0; j < kQkSuper; ++j) {
          const int group = j / 128;
          const int within = j % 128;
          const int shift = 2 * (within / 32);
          const int l = within % 32;
          const int q = (x[b].qs[32 * group + l] >> shift) & 3;
          const bool high = (x[b].hmask[l] >> (j / 32)) & 1;
          y[j] = d_all * scales[j / 16] * (q - (high ? 0 : 4));
        }
        y += kQkSuper;
      }
      return;
    }
    case TensorType::kQ4_K:
    case TensorType::kQ5_K: {
      const bool five = type == TensorType::kQ5_K;
      const int64_t stride = five ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
      for (int64_t b = 0; b < n / kQkSuper; ++b) {
        const uint8_t* blk = in + b * stride;
        uint16_t dh, mh;
        std::memcpy(&dh, blk, 2);
        std::memcpy(&mh, blk + 2, 2);
        const uint8_t* scales = blk + 4;
        const uint8_t* qh = blk + 4 + kernels::kKScaleBytes;
        const uint8_t* ql = five ? qh + kQkSuper / 8 : qh;
        const float d = H2F(dh);
        const float dmin = H2F(mh);
        for (int j = 0; j < kQkSuper; ++j) {
          const int sub = j / 32;
          uint8_t sc, m;
          UnpackScaleMinK4(sub, scales, &sc, &m);
          const int byte = (j / 64) * 32 + j % 32;
          int q = (sub % 2 == 0) ? (ql[byte] & 0xf) : (ql[byte] >> 4);
          if (five && ((qh[j % 32] >> sub) & 1)) q += 16;
          y[j] = d * sc * q - dmin * m;
        }
        y += kQkSuper;
      }
      return;
    }
    case TensorType::kQ6_K: {
      const auto* x = reinterpret_cast<const BlockQ6_K*>(in);
      for (int64_t b = 0; b < n / kQkSuper; ++b) {
        const float d = H2F(x[b].d);
        for (int j = 0; j < kQkSuper; ++j) {
          const int group = j / 128;
          const int within = j % 128;
          const int quarter = within / 32;
          const int l = within % 32;
          const uint8_t lo_byte = x[b].ql[64 * group + l + 32 * (quarter % 2)];
          const int lo = quarter < 2 ? lo_byte & 0xf : lo_byte >> 4;
          const int hi = (x[b].qh[32 * group + l] >> (2 * quarter)) & 3;
          const int q = (lo | (hi << 4)) - 32;
          y[j] = d * x[b].scales[j / 16] * q;
        }
        y += kQkSuper;
      }
      return;
    }
    default:
      RL_CHECK(false) << "DequantizeRow: unsupported type "
                      << model::gguf::TensorTypeName(type);
  }
}

}  // namespace

bool CanQuantizeTo(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_NL:
      return true;
    default:
      return false;
  }
}

int64_t RowBytes(TensorType type, int64_t n_per_row) {
  const int64_t block = model::gguf::TensorTypeBlockElements(type);
  if (block <= 0 || n_per_row % block != 0) return 0;
  return n_per_row / block * model::gguf::TensorTypeBlockBytes(type);
}

void QuantizeRow(TensorType type, std::span<const float> x,
                 std::span<uint8_t> out, std::span<const float> importance) {
  const auto n = static_cast<int64_t>(x.size());
  RL_CHECK(CanQuantizeTo(type));
  RL_CHECK(static_cast<int64_t>(out.size()) == RowBytes(type, n) &&
           !out.empty());
  uint8_t* dst = out.data();
  if (!importance.empty()) {
    RL_CHECK(importance.size() == x.size());
    if (internal::QuantizeRowWeighted(type, x.data(), importance.data(), n,
                                      dst)) {
      return;
    }
  }
  const int64_t blocks = n / model::gguf::TensorTypeBlockElements(type);
  switch (type) {
    case TensorType::kF32:
      std::memcpy(dst, x.data(), out.size());
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToFp16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToBf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case TensorType::kQ8_0:
      return QuantizeQ8_0(x.data(), reinterpret_cast<BlockQ8_0*>(dst), blocks);
    case TensorType::kQ4_0:
      return QuantizeQ4_0(x.data(), reinterpret_cast<BlockQ4_0*>(dst), blocks);
    case TensorType::kQ4_1:
      return QuantizeQ4_1(x.data(), reinterpret_cast<BlockQ4_1*>(dst), blocks);
    case TensorType::kQ5_0:
      return QuantizeQ5_0(x.data(), reinterpret_cast<BlockQ5_0*>(dst), blocks);
    case TensorType::kQ5_1:
      return QuantizeQ5_1(x.data(), reinterpret_cast<BlockQ5_1*>(dst), blocks);
    case TensorType::kIQ4_NL:
      return QuantizeIq4Nl(x.data(), reinterpret_cast<BlockIQ4_NL*>(dst),
                           blocks);
    case TensorType::kQ2_K:
      return QuantizeQ2_K(x.data(), reinterpret_cast<BlockQ2_K*>(dst), blocks);
    case TensorType::kQ3_K:
      return QuantizeQ3_K(x.data(), reinterpret_cast<BlockQ3_K*>(dst), blocks);
    case TensorType::kQ4_K:
      return QuantizeQ4_K(x.data(), reinterpret_cast<BlockQ4_K*>(dst), blocks);
    case TensorType::kQ5_K:
      return QuantizeQ5_K(x.data(), reinterpret_cast<BlockQ5_K*>(dst), blocks);
    case TensorType::kQ6_K:
      return QuantizeQ6_K(x.data(), reinterpret_cast<BlockQ6_K*>(dst), blocks);
    default:
      RL_CHECK(false);
  }
}

void DequantizeRow(TensorType type, std::span<const uint8_t> in,
                   std::span<float> out) {
  const auto n = static_cast<int64_t>(out.size());
  RL_CHECK(CanQuantizeTo(type));
  RL_CHECK(static_cast<int64_t>(in.size()) == RowBytes(type, n));
  DequantizeBlocks(type, in.data(), out.data(), n);
}

}  // namespace redline::quant

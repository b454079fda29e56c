// Bit-exact with ggml: see row_quantize.cc for the rules (operation order,
// float arithmetic, -ffp-contract=off).
#include "quant/block_encode.h"

#include <cmath>
#include <cstring>

#include "base/float16.h"
#include "quant/scale_search.h"

namespace redline::quant::internal {
namespace {

using kernels::kIq4NlValues;
using kernels::kQkBlock;
using kernels::kQkSuper;

// Index of the table value nearest to x (table sorted strictly ascending).
// ggml bisects to the bracketing pair table[hi - 1] <= x < table[hi] and
// then compares the two distances in float; hi is also the number of
// entries <= x, which a branch-free count finds without the bisection's
// unpredictable branches (IQ4_NL quantisation ~3x less CPU, same bytes).
// A NaN (a NaN weight, or importance values so large that the scale
// search overflows) compares false with every entry: ggml's bisection then
// ends at the last index, and so does this.
inline int NearestTableIndex(const int8_t* table, int n, float x) {
  if (x <= table[0]) return 0;
  if (x >= table[n - 1]) return n - 1;
  int hi = 0;
  for (int i = 0; i < n; ++i) hi += x >= table[i] ? 1 : 0;
  if (hi == 0) return n - 1;
  return x - table[hi - 1] < table[hi] - x ? hi - 1 : hi;
}

// Four 2-bit planes per 128 elements: byte l of each 32-byte group holds
// elements l, l+32, l+64, l+96 (Q2_K and Q3_K's low bits).
void Pack2BitPlanes(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < kQkSuper; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(
          levels[j + l] | (levels[j + l + 32] << 2) |
          (levels[j + l + 64] << 4) | (levels[j + l + 96] << 6));
    }
  }
}

}  // namespace

void PackNibbleHalves(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < kQkBlock / 2; ++j) {
    qs[j] = static_cast<uint8_t>(levels[j] | (levels[j + 16] << 4));
  }
}

void PackFiveBitHalves(const uint8_t* levels, uint8_t* qs, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kQkBlock / 2; ++j) {
    const uint32_t l0 = levels[j];
    const uint32_t l1 = levels[j + kQkBlock / 2];
    qs[j] = static_cast<uint8_t>((l0 & 0x0f) | ((l1 & 0x0f) << 4));
    bits |= ((l0 & 0x10u) >> 4) << j;
    bits |= ((l1 & 0x10u) >> 4) << (j + kQkBlock / 2);
  }
  std::memcpy(qh, &bits, sizeof(bits));
}

void EncodeIq4NlBlock(const float* x, const float* weight,
                      kernels::BlockIQ4_NL* y) {
  constexpr int kTrials = 7;
  const int8_t* values = kIq4NlValues;
  float amax;
  const float max = SignedAbsMax(x, kQkBlock, &amax);
  float scale = 0.0f;
  if (amax >= kGroupMaxEps) {
    float d = -max / values[0];
    float id = 1 / d;
    float sumqx = 0.0f;
    float sumq2 = 0.0f;
    for (int j = 0; j < kQkBlock; ++j) {
      const float q = values[NearestTableIndex(values, 16, id * x[j])];
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -kTrials; t <= kTrials; ++t) {
      id = (t + values[0]) / max;
      sumqx = 0.0f;
      sumq2 = 0.0f;
      for (int j = 0; j < kQkBlock; ++j) {
        const float q = values[NearestTableIndex(values, 16, id * x[j])];
        const float w = weight[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scale = d;
  }
  y->d = Fp32ToFp16(scale);
  const float id = scale != 0.0f ? 1 / scale : 0.0f;
  uint8_t levels[kQkBlock];
  for (int j = 0; j < kQkBlock; ++j) {
    levels[j] = static_cast<uint8_t>(NearestTableIndex(values, 16, id * x[j]));
  }
  PackNibbleHalves(levels, y->qs);
}

void EncodeQ2KLevels(const float* x, uint8_t* levels, kernels::BlockQ2_K& out) {
  for (int j = 0; j < kQkSuper / 16; ++j) {
    const float d = Fp16ToFp32(out.d) * (out.scales[j] & 0xf);
    if (d == 0.0f) continue;
    const float dm = Fp16ToFp32(out.dmin) * (out.scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt((x[16 * j + ii] + dm) / d);
      levels[16 * j + ii] = static_cast<uint8_t>(ClampLevel(l, 0, 3));
    }
  }
  Pack2BitPlanes(levels, out.qs);
}

void PackQ3KScale(int j, int l, uint8_t* scales) {
  if (j < 8) {
    scales[j] = static_cast<uint8_t>(l & 0xf);
  } else {
    scales[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
  }
  l >>= 4;
  scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
}

void EncodeQ3KLevels(const float* x, int8_t* levels, kernels::BlockQ3_K& out) {
  for (int j = 0; j < kQkSuper / 16; ++j) {
    int sc = j < 8 ? out.scales[j] & 0xf : out.scales[j - 8] >> 4;
    sc = (sc | (((out.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    const float d = Fp16ToFp32(out.d) * static_cast<int8_t>(sc);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = NearestInt(x[16 * j + ii] / d);
      l = ClampLevel(l, -4, 3);
      levels[16 * j + ii] = static_cast<int8_t>(l + 4);
    }
  }
  // The high bit of element j goes to bit j / 32 of hmask[j % 32].
  std::memset(out.hmask, 0, sizeof(out.hmask));
  uint8_t low[kQkSuper];
  for (int j = 0; j < kQkSuper; ++j) {
    int l = levels[j];
    if (l > 3) {
      out.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
      l -= 4;
    }
    low[j] = static_cast<uint8_t>(l);
  }
  Pack2BitPlanes(low, out.qs);
}

void RequantizeScaleMinK4(const float* x, const uint8_t* packed, uint16_t d,
                          uint16_t dmin, int nmax, uint8_t* levels) {
  for (int j = 0; j < kQkSuper / 32; ++j) {
    uint8_t sc, m;
    UnpackScaleMinK4(j, packed, &sc, &m);
    const float scale = Fp16ToFp32(d) * sc;
    if (scale == 0.0f) continue;
    const float min = Fp16ToFp32(dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + min) / scale);
      levels[32 * j + ii] = static_cast<uint8_t>(ClampLevel(l, 0, nmax));
    }
  }
}

void PackQ4KLevels(const uint8_t* levels, kernels::BlockQ4_K& out) {
  uint8_t* q = out.qs;
  for (int j = 0; j < kQkSuper; j += 64, q += 32) {
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 4));
    }
  }
}

void PackQ5KLevels(const uint8_t* levels, kernels::BlockQ5_K& out) {
  uint8_t* qh = out.qh;
  uint8_t* ql = out.qs;
  std::memset(qh, 0, sizeof(out.qh));
  uint8_t m1 = 1;
  uint8_t m2 = 2;
  for (int n = 0; n < kQkSuper; n += 64, ql += 32) {
    for (int j = 0; j < 32; ++j) {
      int l1 = levels[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      int l2 = levels[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
  }
}

void EncodeQ6KBlock(const float* x, const float* scales, int8_t* levels,
                    kernels::BlockQ6_K& out) {
  float max_scale = 0.0f;
  float max_abs_scale = 0.0f;
  for (int ib = 0; ib < kQkSuper / 16; ++ib) {
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&out, 0, sizeof(out));
    out.d = Fp32ToFp16(0.0f);
    return;
  }
  const float iscale = -128.f / max_scale;
  out.d = Fp32ToFp16(1 / iscale);
  for (int ib = 0; ib < kQkSuper / 16; ++ib) {
    const int l = NearestInt(iscale * scales[ib]);
    out.scales[ib] = static_cast<int8_t>(l < 127 ? l : 127);
  }
  for (int j = 0; j < kQkSuper / 16; ++j) {
    const float d = Fp16ToFp32(out.d) * out.scales[j];
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = NearestInt(x[16 * j + ii] / d);
      l = ClampLevel(l, -32, 31);
      levels[16 * j + ii] = static_cast<int8_t>(l + 32);
    }
  }
  uint8_t* ql = out.ql;
  uint8_t* qh = out.qh;
  const auto* lv = reinterpret_cast<const uint8_t*>(levels);
  for (int j = 0; j < kQkSuper; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = lv[j + l] & 0xf;
      const uint8_t q2 = lv[j + l + 32] & 0xf;
      const uint8_t q3 = lv[j + l + 64] & 0xf;
      const uint8_t q4 = lv[j + l + 96] & 0xf;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>(
          (lv[j + l] >> 4) | ((lv[j + l + 32] >> 4) << 2) |
          ((lv[j + l + 64] >> 4) << 4) | ((lv[j + l + 96] >> 4) << 6));
    }
  }
}

}  // namespace redline::quant::internal

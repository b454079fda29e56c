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

namespace redline::quant {
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
using kernels::BlockQ8_0;
using kernels::kIq4NlValues;
using kernels::kQkBlock;
using kernels::kQkSuper;

// Groups whose largest magnitude is below this quantise to all zeros.
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest (ties to even) for |x| < 2^22: adding 1.5 * 2^23 puts the
// integer part in the low mantissa bits. ggml rounds this way, not with
// lrintf, and the two differ for NaN/huge inputs only; keep the trick.
inline int NearestInt(float x) {
  const float shifted = x + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// min(max(l, lo), hi) for lo <= hi, written as ggml's MAX(lo, MIN(hi, l)):
// with std::max/std::min GCC 12 compiled the level loops of the scale
// searches 30 % slower (Q2_K, measured against the same loop in ggml's
// form).
inline int ClampLevel(int l, int lo, int hi) {
  const int below = hi < l ? hi : l;
  return lo > below ? lo : below;
}

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

// The signed value of largest magnitude (the first one on ties).
inline float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void QuantizeQ4_0(const float* x, BlockQ4_0* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    const float d = SignedAbsMax(x, kQkBlock) / -8;
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
    const float d = SignedAbsMax(x, kQkBlock) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F2H(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQkBlock / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[kQkBlock / 2 + j] * id;
      const uint32_t q0 = static_cast<uint32_t>(
          std::min(31, static_cast<int>(static_cast<int8_t>(x0 + 16.5f))));
      const uint32_t q1 = static_cast<uint32_t>(
          std::min(31, static_cast<int>(static_cast<int8_t>(x1 + 16.5f))));
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + kQkBlock / 2);
    }
    std::memcpy(y[b].qh, &qh, sizeof(qh));
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
    uint32_t qh = 0;
    for (int j = 0; j < kQkBlock / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[kQkBlock / 2 + j] - min) * id;
      const uint32_t q0 = static_cast<uint8_t>(x0 + 0.5f);
      const uint32_t q1 = static_cast<uint8_t>(x1 + 0.5f);
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + kQkBlock / 2);
    }
    std::memcpy(y[b].qh, &qh, sizeof(qh));
  }
}

// Index of the table value nearest to x (table sorted strictly ascending).
// ggml bisects to the bracketing pair table[hi - 1] <= x < table[hi] and
// then compares the two distances in float; hi is also the number of
// entries <= x, which a branch-free count finds without the bisection's
// unpredictable branches (IQ4_NL quantisation ~3x less CPU, same bytes).
inline int NearestTableIndex(const int8_t* table, int n, float x) {
  if (x <= table[0]) return 0;
  if (x >= table[n - 1]) return n - 1;
  int hi = 0;
  for (int i = 0; i < n; ++i) hi += x >= table[i] ? 1 : 0;
  return x - table[hi - 1] < table[hi] - x ? hi - 1 : hi;
}

void QuantizeIq4Nl(const float* x, BlockIQ4_NL* y, int64_t blocks) {
  // ggml's quantize_iq4_nl: 7 scale trials either side of max / -127, each
  // scored by the weighted least-squares gain sumqx^2 / sumq2 with weights
  // x^2, then a final re-assignment with the chosen scale.
  constexpr int kTrials = 7;
  const int8_t* values = kIq4NlValues;
  for (int64_t b = 0; b < blocks; ++b, x += kQkBlock) {
    float weight[kQkBlock];
    uint8_t levels[kQkBlock];
    for (int j = 0; j < kQkBlock; ++j) weight[j] = x[j] * x[j];
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQkBlock; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
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
      d = sumqx / sumq2;
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
    y[b].d = F2H(scale);
    const float id = scale != 0.0f ? 1 / scale : 0.0f;
    for (int j = 0; j < kQkBlock; ++j) {
      levels[j] =
          static_cast<uint8_t>(NearestTableIndex(values, 16, id * x[j]));
    }
    for (int j = 0; j < kQkBlock / 2; ++j) {
      y[b].qs[j] = static_cast<uint8_t>(levels[j] | (levels[j + 16] << 4));
    }
  }
}

// ---- K-quant helpers -------------------------------------------------------

// Symmetric scale search (ggml's make_qx_quants with rmse_type 1 and no
// importance weights): levels in [-nmax, nmax - 1] stored as L + nmax, the
// weights are x^2, and 18 scales around -nmax / max are tried.
//
// ggml tries the candidates one after another; here every candidate's sums
// are accumulated in one pass over x, the candidates side by side (each sum
// still adds its terms in element order, and no candidate depends on
// another's outcome, so every value is what ggml computes; the pass has 19
// independent chains instead of one), and the choice is then made in
// ggml's order. (make_qkx2_quants cannot be split so: a kept candidate
// moves the min that the later ones start from.)
float SymmetricScale(int n, int nmax, const float* x, int8_t* levels) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  // Candidate 0 is -nmax / max; 1..18 are is = -9..-1, 1..9.
  constexpr int kCandidates = 19;
  float iscales[kCandidates];
  iscales[0] = -nmax / max;
  for (int c = 1, is = -9; is <= 9; ++is) {
    if (is != 0) iscales[c++] = -(nmax + 0.1f * is) / max;
  }
  float sumlx[kCandidates] = {};
  float suml2[kCandidates] = {};
  for (int i = 0; i < n; ++i) {
    const float xi = x[i];
    const float w = xi * xi;
    const float wx = w * xi;
    for (int c = 0; c < kCandidates; ++c) {
      int l = NearestInt(iscales[c] * xi);
      l = ClampLevel(l, -nmax, nmax - 1);
      const auto lf = static_cast<float>(l);
      sumlx[c] += wx * lf;
      suml2[c] += w * lf * lf;
    }
  }
  int chosen = 0;
  float scale = suml2[0] != 0.0f ? sumlx[0] / suml2[0] : 0.0f;
  float best = scale * sumlx[0];
  for (int c = 1; c < kCandidates; ++c) {
    if (suml2[c] > 0 && sumlx[c] * sumlx[c] > best * suml2[c]) {
      scale = sumlx[c] / suml2[c];
      best = scale * sumlx[c];
      chosen = c;
    }
  }
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscales[chosen] * x[i]);
    levels[i] = static_cast<int8_t>(nmax + ClampLevel(l, -nmax, nmax - 1));
  }
  return scale;
}

// Q3_K's symmetric search (ggml's make_q3_quants with do_rmse): start from
// -nmax / max, then up to 5 passes of coordinate descent on single levels
// while the weighted fit improves. Levels stored as L + nmax.
float Q3Scale(int n, int nmax, const float* x, int8_t* levels) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = ClampLevel(l, -nmax, nmax - 1);
    levels[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * levels[i];
      if (slx > 0) {
        float sl2 = suml2 - w * levels[i] * levels[i];
        int new_l = NearestInt(x[i] * sl2 / slx);
        new_l = ClampLevel(new_l, -nmax, nmax - 1);
        if (new_l != levels[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            levels[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Affine scale-and-min search (ggml's make_qkx2_quants): x ~ scale * L - min
// with L in [0, nmax]; nstep + 1 candidate scales (rmin + rdelta * k + nmax)
// / (max - min), each refit by weighted least squares and kept if its
// weighted error (absolute with use_mad, squared otherwise) is lower.
// Returns the scale and stores the (positive) min in *the_min.
float AffineScale(int n, int nmax, const float* x, const float* weights,
                  uint8_t* levels, float* the_min, float rmin, float rdelta,
                  int nstep, bool use_mad) {
  uint8_t aux[32];
  RL_DCHECK(n <= 32);
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    levels[i] = static_cast<uint8_t>(ClampLevel(l, 0, nmax));
    float diff = scale * levels[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = ClampLevel(l, 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * aux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        for (int i = 0; i < n; ++i) levels[i] = aux[i];
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// The 6-bit scale/min pair j of Q4_K/Q5_K's 12-byte packing.
inline void UnpackScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

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

// Four 2-bit planes per 128 elements: byte l of each 32-byte group holds
// elements l, l+32, l+64, l+96 (Q2_K and Q3_K's low bits).
inline void Pack2BitPlanes(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < kQkSuper; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(
          levels[j + l] | (levels[j + l + 32] << 2) |
          (levels[j + l + 64] << 4) | (levels[j + l + 96] << 6));
    }
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
    for (int j = 0; j < kQkSuper / 16; ++j) {
      const float d = H2F(out.d) * (out.scales[j] & 0xf);
      if (d == 0.0f) continue;
      const float dm = H2F(out.dmin) * (out.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt((x[16 * j + ii] + dm) / d);
        levels[16 * j + ii] = static_cast<uint8_t>(ClampLevel(l, 0, 3));
      }
    }
    Pack2BitPlanes(levels, out.qs);
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
        int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        l = static_cast<int8_t>(ClampLevel(static_cast<int>(l), -32, 31) + 32);
        if (j < 8) {
          out.scales[j] = static_cast<uint8_t>(l & 0xf);
        } else {
          out.scales[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
        }
        l = static_cast<int8_t>(l >> 4);
        out.scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      out.d = F2H(1 / iscale);
    } else {
      out.d = F2H(0.0f);
    }
    for (int j = 0; j < kQkSuper / 16; ++j) {
      int sc = j < 8 ? out.scales[j] & 0xf : out.scales[j - 8] >> 4;
      sc = (sc | (((out.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const float d = H2F(out.d) * static_cast<int8_t>(sc);
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
  for (int j = 0; j < kQkSuper / 32; ++j) {
    uint8_t sc, m;
    UnpackScaleMinK4(j, packed, &sc, &m);
    const float d = H2F(*d_out) * sc;
    if (d == 0.0f) continue;
    const float dm = H2F(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      levels[32 * j + ii] = static_cast<uint8_t>(ClampLevel(l, 0, kNmax));
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    uint8_t levels[kQkSuper];
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    KxScales<15>(x, -1.f, 0.1f, 20, levels, y[b].scales, &y[b].d, &y[b].dmin);
    uint8_t* q = y[b].qs;
    for (int j = 0; j < kQkSuper; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) {
        q[l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 4));
      }
    }
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    uint8_t levels[kQkSuper];
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    KxScales<31>(x, -0.5f, 0.1f, 15, levels, y[b].scales, &y[b].d, &y[b].dmin);
    uint8_t* qh = y[b].qh;
    uint8_t* ql = y[b].qs;
    std::memset(qh, 0, sizeof(y[b].qh));
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
}

void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kQkSuper) {
    int8_t levels[kQkSuper];
    float scales[kQkSuper / 16];
    float max_scale = 0.0f;
    float max_abs_scale = 0.0f;
    for (int ib = 0; ib < kQkSuper / 16; ++ib) {
      const float scale = SymmetricScale(16, 32, x + 16 * ib, levels + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    BlockQ6_K& out = y[b];
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&out, 0, sizeof(out));
      out.d = F2H(0.0f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    out.d = F2H(1 / iscale);
    for (int ib = 0; ib < kQkSuper / 16; ++ib) {
      out.scales[ib] =
          static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    }
    for (int j = 0; j < kQkSuper / 16; ++j) {
      const float d = H2F(out.d) * out.scales[j];
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
                 std::span<uint8_t> out) {
  const auto n = static_cast<int64_t>(x.size());
  RL_CHECK(CanQuantizeTo(type));
  RL_CHECK(static_cast<int64_t>(out.size()) == RowBytes(type, n) &&
           !out.empty());
  const int64_t blocks = n / model::gguf::TensorTypeBlockElements(type);
  uint8_t* dst = out.data();
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

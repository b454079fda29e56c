// Why the loops look the way they do: see row_quantize.cc (ggml's
// operation order, float accumulation, -ffp-contract=off).
#include "quant/scale_search.h"

#include <cmath>
#include <cstring>

#include "base/check.h"

namespace redline::quant::internal {
namespace {

// ggml tries the candidates one after another; here every candidate's sums
// are accumulated in one pass over x, the candidates side by side, four to
// a vector (GCC/Clang vector extensions, so SSE2 on the baseline build):
// each lane performs exactly the scalar operations of its candidate in
// ggml's order — f32 multiply, the nearest_int add and mask, the clamp, an
// exact int-to-float conversion, unfused multiplies and adds — so every
// sum is bit for bit what ggml computes; the choice is then made in ggml's
// order. Scalar accumulators did not fit the registers (they went through
// the stack every element, and the speed swung 1.5x with the stack's
// alignment from run to run); vectors do, ~7x fewer instructions.
// (make_qkx2_quants cannot be split so: a kept candidate moves the min that
// the later ones start from.)
//
// kX2: the weights are x^2 (no importance given), a template so each loop
// is compiled for one case.
using F32x4 = float __attribute__((vector_size(16)));
using I32x4 = int32_t __attribute__((vector_size(16)));

// NearestInt and ClampLevel on four lanes, the same operations lane by lane.
inline I32x4 NearestClampedLevels(F32x4 v, I32x4 lo, I32x4 hi) {
  const F32x4 shifted = v + 12582912.f;
  I32x4 l;
  std::memcpy(&l, &shifted, sizeof(l));
  l = (l & 0x007fffff) - 0x00400000;
  l = hi < l ? hi : l;
  return lo > l ? lo : l;
}

// Candidate 0 is -nmax / max; 1..18 are is = -9..-1, 1..9; lane 19 repeats
// candidate 0 and is never chosen.
constexpr int kCandidates = 19;
constexpr int kCandidateVectors = 5;

template <bool kX2>
float SymmetricScaleOf(int n, int nmax, const float* x, const float* weights,
                       int8_t* levels) {
  float amax;
  const float max = SignedAbsMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  float iscales[kCandidateVectors * 4];
  iscales[0] = -nmax / max;
  for (int c = 1, is = -9; is <= 9; ++is) {
    if (is != 0) iscales[c++] = -(nmax + 0.1f * is) / max;
  }
  iscales[kCandidates] = iscales[0];
  F32x4 iscale_v[kCandidateVectors];
  F32x4 sumlx_v[kCandidateVectors];
  F32x4 suml2_v[kCandidateVectors];
  for (int k = 0; k < kCandidateVectors; ++k) {
    std::memcpy(&iscale_v[k], iscales + 4 * k, sizeof(F32x4));
    sumlx_v[k] = F32x4{};
    suml2_v[k] = F32x4{};
  }
  const I32x4 lo = I32x4{} - nmax;
  const I32x4 hi = I32x4{} + (nmax - 1);
  for (int i = 0; i < n; ++i) {
    const float xi = x[i];
    const float w = kX2 ? xi * xi : weights[i];
    const float wx = w * xi;
    for (int k = 0; k < kCandidateVectors; ++k) {
      const I32x4 l = NearestClampedLevels(iscale_v[k] * xi, lo, hi);
      const F32x4 lf = __builtin_convertvector(l, F32x4);
      sumlx_v[k] += wx * lf;
      suml2_v[k] += w * lf * lf;
    }
  }
  float sumlx[kCandidateVectors * 4];
  float suml2[kCandidateVectors * 4];
  std::memcpy(sumlx, sumlx_v, sizeof(sumlx));
  std::memcpy(suml2, suml2_v, sizeof(suml2));
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

}  // namespace

float SymmetricScale(int n, int nmax, const float* x, const float* weights,
                     int8_t* levels) {
  return weights == nullptr
             ? SymmetricScaleOf<true>(n, nmax, x, nullptr, levels)
             : SymmetricScaleOf<false>(n, nmax, x, weights, levels);
}

float Q3Scale(int n, int nmax, const float* x, int8_t* levels) {
  float amax;
  const float max = SignedAbsMax(x, n, &amax);
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

// The candidates run four at a time, one per vector lane, each lane doing
// its candidate's scalar operations in ggml's order (so the same bits).
// They depend on each other only through `min`: a kept candidate whose
// refit moves the min invalidates the lanes after it, which are then run
// again from there. Kept candidates move the min ~2.75 times per search
// (Q4_K's 21 candidates, Gaussian weights), so a search takes ~7 batches
// instead of 21 sequential candidates.
float AffineScale(int n, int nmax, const float* x, const float* weights,
                  uint8_t* levels, float* the_min, float rmin, float rdelta,
                  int nstep, bool use_mad) {
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
  const float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    levels[i] = static_cast<uint8_t>(ClampLevel(l, 0, nmax));
    float diff = scale * levels[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  const F32x4 lane = {0.0f, 1.0f, 2.0f, 3.0f};
  const I32x4 lo = I32x4{};
  const I32x4 hi = I32x4{} + nmax;
  I32x4 aux[32];
  int is = 0;
  while (is <= nstep) {
    // Lane j tries candidate is + j (lanes past nstep are ignored).
    const F32x4 is_v = static_cast<float>(is) + lane;
    const F32x4 iscale_v =
        (rmin + rdelta * is_v + static_cast<float>(nmax)) / (max - min);
    F32x4 sum_l = F32x4{};
    F32x4 sum_l2 = F32x4{};
    F32x4 sum_xl = F32x4{};
    for (int i = 0; i < n; ++i) {
      const I32x4 l = NearestClampedLevels(iscale_v * (x[i] - min), lo, hi);
      aux[i] = l;
      const F32x4 lf = __builtin_convertvector(l, F32x4);
      const float w = weights[i];
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const F32x4 det = sum_w * sum_l2 - sum_l * sum_l;
    F32x4 this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    F32x4 this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    const auto positive = this_min > 0.0f;
    this_scale = positive ? sum_xl / sum_l2 : this_scale;
    this_min = positive ? F32x4{} : this_min;
    F32x4 error = F32x4{};
    for (int i = 0; i < n; ++i) {
      F32x4 diff =
          this_scale * __builtin_convertvector(aux[i], F32x4) + this_min - x[i];
      if (use_mad) {
        I32x4 bits;
        std::memcpy(&bits, &diff, sizeof(bits));
        bits &= 0x7fffffff;
        std::memcpy(&diff, &bits, sizeof(diff));
      } else {
        diff = diff * diff;
      }
      error += weights[i] * diff;
    }
    int next = is + 4;
    for (int j = 0; j < 4 && is + j <= nstep; ++j) {
      if (!(det[j] > 0) || !(error[j] < best_error)) continue;
      for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(aux[i][j]);
      best_error = error[j];
      scale = this_scale[j];
      const bool moved = this_min[j] != min;
      min = this_min[j];
      if (moved) {
        next = is + j + 1;
        break;
      }
    }
    is = next;
  }
  *the_min = -min;
  return scale;
}

float PositiveScale(int n, int nmax, const float* x, const float* weights,
                    uint8_t* levels) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  // Levels are bytes: a negative value (a negative sub-block scale) wraps
  // as it does in ggml.
  float iscale = nmax / max;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(NearestInt(iscale * x[i]));
  }
  const float scale = 1 / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * levels[i];
    best_error += weights[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * is + nmax) / max;
    const float scale_is = 1 / iscale_is;
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale_is * x[i]);
      l = nmax < l ? nmax : l;
      const float diff = x[i] - scale_is * l;
      error += weights[i] * diff * diff;
    }
    if (error < best_error) {
      best_error = error;
      iscale = iscale_is;
    }
  }
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = nmax < l ? nmax : l;
    levels[i] = static_cast<uint8_t>(l);
    const float w = weights[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      float slx = sumlx - w * x[i] * levels[i];
      float sl2 = suml2 - w * levels[i] * levels[i];
      if (slx > 0 && sl2 > 0) {
        int new_l = NearestInt(x[i] * sl2 / slx);
        new_l = nmax < new_l ? nmax : new_l;
        if (new_l != levels[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            levels[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace redline::quant::internal

// ggml's per-group scale searches, shared by the plain quantisers
// (row_quantize.cc) and the importance-weighted ones
// (weighted_quantize.cc). Each returns the group's scale and writes one
// level per element; the results are bit-identical to ggml's
// make_qx_quants / make_q3_quants / make_qkx2_quants / make_qkx3_quants /
// make_qp_quants, which is why this file (like every quantiser) is compiled
// with -ffp-contract=off and keeps ggml's operation order.
//
// Thread-safety: pure functions. Cost: O(n x candidates) per call, n <= 32.
#ifndef REDLINE_QUANT_SCALE_SEARCH_H_
#define REDLINE_QUANT_SCALE_SEARCH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace redline::quant::internal {

// Groups whose largest magnitude is below this quantise to all zeros.
inline constexpr float kGroupMaxEps = 1e-15f;

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

// The value of largest magnitude (the first one on ties); its magnitude in
// *amax (0 for an empty or all-zero group).
inline float SignedAbsMax(const float* x, int n, float* amax) {
  float max = 0.0f;
  *amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Symmetric search (make_qx_quants, rmse_type 1): levels in
// [-nmax, nmax - 1] stored as L + nmax; 19 scales around -nmax / max tried,
// scored by the weighted least-squares gain. `weights` (n values) are the
// importance of each element; nullptr means x^2.
float SymmetricScale(int n, int nmax, const float* x, const float* weights,
                     int8_t* levels);

// Q3_K's symmetric search without weights (make_q3_quants with do_rmse):
// start from -nmax / max, then up to 5 passes of coordinate descent on
// single levels while the x^2-weighted fit improves. Levels stored as
// L + nmax.
float Q3Scale(int n, int nmax, const float* x, int8_t* levels);

// Affine scale-and-min search (make_qkx2_quants, and make_qkx3_quants with
// weights, which is the same procedure): x ~ scale * L - min with L in
// [0, nmax]; nstep + 1 candidate scales (rmin + rdelta * k + nmax) /
// (max - min), each refit by weighted least squares and kept if its
// weighted error (absolute with use_mad, squared otherwise) is lower.
// Returns the scale and stores the (positive) min in *the_min. n <= 32.
float AffineScale(int n, int nmax, const float* x, const float* weights,
                  uint8_t* levels, float* the_min, float rmin, float rdelta,
                  int nstep, bool use_mad);

// Scale for non-negative values (make_qp_quants: the K-quants' sub-block
// scales and mins with an importance matrix): L in [0, nmax], 9 scales
// around nmax / max scored by weighted squared error, then up to 5 passes
// of coordinate descent; returns the least-squares scale of the final
// levels. `weights` must not be null.
float PositiveScale(int n, int nmax, const float* x, const float* weights,
                    uint8_t* levels);

}  // namespace redline::quant::internal

#endif  // REDLINE_QUANT_SCALE_SEARCH_H_

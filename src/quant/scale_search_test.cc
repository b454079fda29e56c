// The vectorised searches against plain sequential ports of ggml's
// make_qx_quants (rmse_type 1) and make_qkx2/3_quants: the same scale (and
// min), bit for bit, and the same levels on random groups of every size,
// level count and search grid the quantisers use, with and without
// importance weights.
#include "quant/scale_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace redline::quant::internal {
namespace {

// ggml's loop as written: one candidate after another.
float SequentialSymmetricScale(int n, int nmax, const float* x, const float* qw,
                               int8_t* levels) {
  float amax;
  const float max = SignedAbsMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  float iscale = -nmax / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = ClampLevel(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    levels[i] = static_cast<int8_t>(l + nmax);
    const float w = qw != nullptr ? qw[i] : x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = 0.0f;
    suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = ClampLevel(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = qw != nullptr ? qw[i] : x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = ClampLevel(NearestInt(iscale * x[i]), -nmax, nmax - 1);
        levels[i] = static_cast<int8_t>(l + nmax);
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// make_qkx2_quants / make_qkx3_quants as written: one candidate after
// another, each starting from the min the last kept one left.
float SequentialAffineScale(int n, int nmax, const float* x, const float* w,
                            uint8_t* levels, float* the_min, float rmin,
                            float rdelta, int nstep, bool use_mad) {
  uint8_t aux[32];
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(
        ClampLevel(NearestInt(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * levels[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best += w[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = ClampLevel(NearestInt(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
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
        error += w[i] * diff;
      }
      if (error < best) {
        for (int i = 0; i < n; ++i) levels[i] = aux[i];
        best = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

TEST(ScaleSearchTest, SymmetricScaleEqualsTheSequentialSearch) {
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  int groups = 0;
  for (int n : {16, 32}) {
    for (int nmax : {4, 8, 16, 32}) {
      for (int trial = 0; trial < 500; ++trial) {
        std::vector<float> x(n), w(n);
        const float spread = std::pow(10.0f, uniform(rng) * 8 - 6);
        for (int i = 0; i < n; ++i) {
          x[i] = gauss(rng) * spread;
          // Some groups with zeros, repeated values and zero weights.
          if (trial % 7 == 0 && i % 3 == 0) x[i] = 0.0f;
          if (trial % 11 == 0) x[i] = i % 2 == 0 ? spread : -spread;
          w[i] = trial % 5 == 0 && i < 4 ? 0.0f : uniform(rng) * 3;
        }
        for (const float* weights : {static_cast<const float*>(nullptr),
                                     static_cast<const float*>(w.data())}) {
          std::vector<int8_t> got(n), want(n);
          const float a =
              SymmetricScale(n, nmax, x.data(), weights, got.data());
          const float b =
              SequentialSymmetricScale(n, nmax, x.data(), weights, want.data());
          ASSERT_EQ(std::memcmp(&a, &b, sizeof(a)), 0)
              << "n " << n << " nmax " << nmax << " trial " << trial << ": "
              << a << " vs " << b;
          ASSERT_EQ(got, want)
              << "n " << n << " nmax " << nmax << " trial " << trial;
          ++groups;
        }
      }
    }
  }
  EXPECT_EQ(groups, 8000);
}

// The grids of Q2_K (16 elements, |x| weights, absolute error), Q4_K/Q5_K
// (32, rms + |x|, squared) and the weighted Q4_1/Q5_1/Q2_K/Q4_K/Q5_K
// search (37 candidates).
TEST(ScaleSearchTest, AffineScaleEqualsTheSequentialSearch) {
  struct Grid {
    int n, nmax;
    float rmin, rdelta;
    int nstep;
    bool use_mad;
  };
  const Grid grids[] = {
      {16, 3, -0.5f, 0.1f, 15, true},    {32, 15, -1.f, 0.1f, 20, false},
      {32, 31, -0.5f, 0.1f, 15, false},  {16, 3, -0.9f, 0.05f, 36, false},
      {32, 15, -0.9f, 0.05f, 36, false}, {32, 31, -0.9f, 0.05f, 36, false}};
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  int groups = 0;
  for (const Grid& g : grids) {
    for (int trial = 0; trial < 1000; ++trial) {
      std::vector<float> x(g.n), w(g.n);
      const float spread = std::pow(10.0f, uniform(rng) * 8 - 6);
      const float offset = trial % 4 == 0 ? spread * 2 : 0.0f;
      for (int i = 0; i < g.n; ++i) {
        x[i] = gauss(rng) * spread + offset;
        if (trial % 9 == 0 && i % 4 == 0) x[i] = 0.0f;
        w[i] = trial % 3 == 0 ? std::fabs(x[i]) : uniform(rng) * 2;
        if (trial % 13 == 0 && i < 5) w[i] = 0.0f;
      }
      std::vector<uint8_t> got(g.n), want(g.n);
      float got_min, want_min;
      const float a =
          AffineScale(g.n, g.nmax, x.data(), w.data(), got.data(), &got_min,
                      g.rmin, g.rdelta, g.nstep, g.use_mad);
      const float b = SequentialAffineScale(g.n, g.nmax, x.data(), w.data(),
                                            want.data(), &want_min, g.rmin,
                                            g.rdelta, g.nstep, g.use_mad);
      ASSERT_EQ(std::memcmp(&a, &b, sizeof(a)), 0)
          << "nmax " << g.nmax << " trial " << trial << ": " << a << " vs "
          << b;
      ASSERT_EQ(std::memcmp(&got_min, &want_min, sizeof(float)), 0)
          << "nmax " << g.nmax << " trial " << trial;
      ASSERT_EQ(got, want) << "nmax " << g.nmax << " trial " << trial;
      ++groups;
    }
  }
  EXPECT_EQ(groups, 6000);
}

}  // namespace
}  // namespace redline::quant::internal

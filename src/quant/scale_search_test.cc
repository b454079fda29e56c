// The vectorised symmetric search against a plain sequential port of ggml's
// make_qx_quants (rmse_type 1): the same scale, bit for bit, and the same
// levels on random groups of every size and level count the quantisers
// use, with and without importance weights.
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

}  // namespace
}  // namespace redline::quant::internal

#include "quant/row_quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/float16.h"
#include "kernels/blocks.h"

namespace redline::quant {
namespace {

const TensorType kTypes[] = {
    TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1,
    TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kIQ4_NL,
    TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
    TensorType::kQ5_K, TensorType::kQ6_K};

// Relative RMS error bound of quantise -> dequantise on Gaussian data: about
// 1.5x what each type's bit width gives.
double ErrorBound(TensorType t) {
  switch (t) {
    case TensorType::kQ8_0:
      return 0.01;
    case TensorType::kQ6_K:
      return 0.03;
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ5_K:
      return 0.06;
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ4_K:
    case TensorType::kIQ4_NL:
      return 0.13;
    case TensorType::kQ3_K:
      return 0.25;
    default:
      return 0.5;
  }
}

TEST(RowQuantizeTest, RoundTripErrorIsBoundedForEveryType) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(1024);
  for (float& v : x) v = dist(rng);
  double norm = 0;
  for (float v : x) norm += double(v) * v;
  for (TensorType t : kTypes) {
    SCOPED_TRACE(model::gguf::TensorTypeName(t));
    std::vector<uint8_t> q(RowBytes(t, 1024));
    QuantizeRow(t, x, q);
    std::vector<float> y(1024);
    DequantizeRow(t, q, y);
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i)
      err += std::pow(double(x[i]) - y[i], 2);
    EXPECT_LT(std::sqrt(err / norm), ErrorBound(t));
  }
}

TEST(RowQuantizeTest, ZeroRowsStayZero) {
  std::vector<float> x(256, 0.0f);
  for (TensorType t : kTypes) {
    SCOPED_TRACE(model::gguf::TensorTypeName(t));
    std::vector<uint8_t> q(RowBytes(t, 256));
    QuantizeRow(t, x, q);
    std::vector<float> y(256, 1.0f);
    DequantizeRow(t, q, y);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST(RowQuantizeTest, Q8_0MatchesHandComputedBlock) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.5f;  // amax 8 at i=0
  std::vector<uint8_t> q(RowBytes(TensorType::kQ8_0, 32));
  QuantizeRow(TensorType::kQ8_0, x, q);
  const auto* b = reinterpret_cast<const kernels::BlockQ8_0*>(q.data());
  EXPECT_EQ(b->d, Fp32ToFp16(8.0f / 127));
  EXPECT_EQ(b->qs[0], -127);
  EXPECT_EQ(b->qs[16], 0);
  EXPECT_EQ(b->qs[17], static_cast<int8_t>(std::roundf(0.5f * (127 / 8.0f))));
}

TEST(RowQuantizeTest, Q4_0UsesTheSignedMaximum) {
  std::vector<float> x(32, 0.0f);
  x[3] = -2.0f;  // the largest magnitude is negative: d = -2 / -8 > 0
  x[5] = 1.0f;
  std::vector<uint8_t> q(RowBytes(TensorType::kQ4_0, 32));
  QuantizeRow(TensorType::kQ4_0, x, q);
  std::vector<float> y(32);
  DequantizeRow(TensorType::kQ4_0, q, y);
  EXPECT_FLOAT_EQ(y[3], -2.0f);
  EXPECT_FLOAT_EQ(y[5], 1.0f);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
}

TEST(RowQuantizeTest, RowBytesNeedsWholeBlocks) {
  EXPECT_EQ(RowBytes(TensorType::kQ4_K, 512), 288);
  EXPECT_EQ(RowBytes(TensorType::kQ4_K, 128), 0);
  EXPECT_EQ(RowBytes(TensorType::kQ8_0, 64), 68);
  EXPECT_EQ(RowBytes(TensorType::kF16, 3), 6);
}

}  // namespace
}  // namespace redline::quant

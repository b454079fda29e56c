// Importance-weighted quantisation: the bytes equal ggml's (golden hashes of
// ggml's quantize_* with quant_weights on the inputs below, recorded from
// llama.cpp d32676d's libggml-base), the weights change the result where
// ggml's do, and they lower the weighted error they are meant to lower.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/row_quantize.h"

namespace redline::quant {
namespace {

// Deterministic inputs without libm: xorshift64*, bell-shaped values as
// sums of four uniforms.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float Uniform() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<float>((s * 0x2545F4914F6CDD1Dull) >> 40) *
           (1.0f / 16777216.0f);
  }
  float Bell() { return Uniform() + Uniform() + Uniform() + Uniform() - 2.0f; }
};

constexpr int kRows = 6;
constexpr int kCols = 512;

// Rows: plain; an all-zero block and an outlier; plain; all non-negative;
// all zero; every 64th value 40x. Importance: one column vector for all
// rows (as an imatrix is), a 16-column group at 0, hot columns at 100x.
void MakeRows(std::vector<float>& x, std::vector<float>& w) {
  x.assign(kRows * kCols, 0.0f);
  w.assign(kRows * kCols, 0.0f);
  Rng rng(14);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      float v = 0.05f * rng.Bell();
      if (r == 1 && c < 32) v = 0.0f;
      if (r == 1 && c == 300) v = 2.5f;
      if (r == 3) v = v < 0 ? -v : v;
      if (r == 4) v = 0.0f;
      if (r == 5) v = v * (c % 64 == 0 ? 40.f : 1.f);
      x[r * kCols + c] = v;
    }
  }
  for (int c = 0; c < kCols; ++c) {
    const float u = rng.Uniform();
    float v = u * u * 4.0f + 0.001f;
    if (c >= 64 && c < 80) v = 0.0f;
    if (c % 97 == 0) v *= 100.0f;
    for (int r = 0; r < kRows; ++r) w[r * kCols + c] = v;
  }
}

uint64_t Fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<uint8_t> Quantize(TensorType type, const std::vector<float>& x,
                              const std::vector<float>& w) {
  const int64_t row = RowBytes(type, kCols);
  std::vector<uint8_t> out(static_cast<size_t>(row * kRows));
  for (int r = 0; r < kRows; ++r) {
    std::span<const float> importance;
    if (!w.empty())
      importance = std::span<const float>(w).subspan(r * kCols, kCols);
    QuantizeRow(type, std::span<const float>(x).subspan(r * kCols, kCols),
                std::span<uint8_t>(out).subspan(r * row, row), importance);
  }
  return out;
}

struct Golden {
  TensorType type;
  uint64_t fnv1a;
};

// ggml_quantize_chunk(type, row, dst, 0, 1, 512, importance row), row by row.
constexpr Golden kGgml[] = {
    {TensorType::kQ4_0, 0x94be3998830e5376ull},
    {TensorType::kQ4_1, 0x813e2c3e4cb759d4ull},
    {TensorType::kQ5_0, 0xb43c71915e67ec75ull},
    {TensorType::kQ5_1, 0x44dbc18f326826e9ull},
    {TensorType::kIQ4_NL, 0xabae7e40579a5625ull},
    {TensorType::kQ2_K, 0xb7719bf4e450c90cull},
    {TensorType::kQ3_K, 0x41e75affd3e32cc4ull},
    {TensorType::kQ4_K, 0xb5b53d3a414c4ce7ull},
    {TensorType::kQ5_K, 0x081e629b9f713a46ull},
    {TensorType::kQ6_K, 0x4a886c8284a58a9dull},
};

TEST(WeightedQuantizeTest, BytesEqualGgmlsForEveryType) {
  std::vector<float> x, w;
  MakeRows(x, w);
  for (const Golden& g : kGgml) {
    EXPECT_EQ(Fnv1a(Quantize(g.type, x, w)), g.fnv1a)
        << model::gguf::TensorTypeName(g.type);
  }
}

TEST(WeightedQuantizeTest, ImportanceChangesEveryWeightedType) {
  std::vector<float> x, w;
  MakeRows(x, w);
  for (const Golden& g : kGgml) {
    EXPECT_NE(Quantize(g.type, x, w), Quantize(g.type, x, {}))
        << model::gguf::TensorTypeName(g.type);
  }
}

TEST(WeightedQuantizeTest, TypesWithoutASearchIgnoreImportance) {
  std::vector<float> x, w;
  MakeRows(x, w);
  for (TensorType t : {TensorType::kQ8_0, TensorType::kF16, TensorType::kBF16,
                       TensorType::kF32}) {
    EXPECT_EQ(Quantize(t, x, w), Quantize(t, x, {}))
        << model::gguf::TensorTypeName(t);
  }
}

// What the weights are for: the importance-weighted squared error (what the
// model's output feels) is lower than without them, on every type.
TEST(WeightedQuantizeTest, ImportanceLowersTheWeightedError) {
  std::vector<float> x, w;
  MakeRows(x, w);
  auto weighted_error = [&](TensorType type, const std::vector<uint8_t>& q) {
    const int64_t row = RowBytes(type, kCols);
    std::vector<float> back(kCols);
    double error = 0;
    for (int r = 0; r < kRows; ++r) {
      DequantizeRow(type, std::span<const uint8_t>(q).subspan(r * row, row),
                    back);
      for (int c = 0; c < kCols; ++c) {
        const double d = back[c] - x[r * kCols + c];
        error += w[r * kCols + c] * d * d;
      }
    }
    return error;
  };
  for (const Golden& g : kGgml) {
    const double with = weighted_error(g.type, Quantize(g.type, x, w));
    const double without = weighted_error(g.type, Quantize(g.type, x, {}));
    EXPECT_LT(with, without) << model::gguf::TensorTypeName(g.type);
  }
}

}  // namespace
}  // namespace redline::quant

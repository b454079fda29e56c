// Dequantisation of every block type against an independent per-element
// statement of ggml's formulas, exactly (the same IEEE operations, so the
// same floats); and the unpacked form the product kernels read against it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/float16.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace redline::kernels {
namespace {

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

// Nibble e of a 32-element block's 16 packed bytes: low nibbles hold
// elements 0-15, high nibbles 16-31.
int Nibble(const uint8_t* qs, int e) {
  return e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
}

int Bit(const uint8_t* bytes, int i) { return (bytes[i / 8] >> (i % 8)) & 1; }

// Q4_K/Q5_K: 8 6-bit scales and mins in 12 bytes.
void ScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K: 16 6-bit scales in 12 bytes, unshuffled through four 32-bit words.
int Q3Scale(const uint8_t* s, int g) {
  uint32_t aux[3];
  std::memcpy(aux, s, 12);
  const uint32_t lo = g < 8 ? aux[g / 4] : aux[(g - 8) / 4] >> 4;
  const int low = (lo >> (8 * (g % 4))) & 15;
  const int high = (aux[2] >> (8 * (g % 4) + 2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Element e of one block of `type` at p.
float Expected(DType type, const uint8_t* p, int e) {
  switch (type) {
    case DType::kQ8_0:
      return static_cast<float>(static_cast<int8_t>(p[2 + e])) * Half(p);
    case DType::kQ4_0:
      return static_cast<float>(Nibble(p + 2, e) - 8) * Half(p);
    case DType::kQ4_1:
      return static_cast<float>(Nibble(p + 4, e)) * Half(p) + Half(p + 2);
    case DType::kQ5_0:
      return static_cast<float>((Nibble(p + 6, e) | (Bit(p + 2, e) << 4)) -
                                16) *
             Half(p);
    case DType::kQ5_1:
      return static_cast<float>(Nibble(p + 8, e) | (Bit(p + 4, e) << 4)) *
                 Half(p) +
             Half(p + 2);
    case DType::kIQ4_NL:
      return Half(p) * static_cast<float>(kIq4NlValues[Nibble(p + 2, e)]);
    case DType::kQ2_K: {
      // scales[16] qs[64] d dmin; element e: 2 bits at shift 2 * (e % 128 /
      // 32) of qs[32 * (e / 128) + e % 32].
      const uint8_t sc = p[e / 16];
      const int q =
          (p[16 + 32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
      return Half(p + 80) * static_cast<float>(sc & 15) *
                 static_cast<float>(q) -
             Half(p + 82) * static_cast<float>(sc >> 4);
    }
    case DType::kQ3_K: {
      // hmask[32] qs[64] scales[12] d; the high bit of element e is bit
      // e / 32 of hmask[e % 32]; clear means -4.
      const int low =
          (p[32 + 32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
      const int q = low - (Bit(p + e % 32, e / 32) ? 0 : 4);
      return Half(p + 108) * static_cast<float>(Q3Scale(p + 96, e / 16)) *
             static_cast<float>(q);
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      // d dmin scales[12] (qh[32]) qs[128]: element e is nibble (e % 64 >=
      // 32) of qs[32 * (e / 64) + e % 32]; Q5_K's fifth bit is bit e / 32 of
      // qh[e % 32].
      const bool q5 = type == DType::kQ5_K;
      const uint8_t byte = p[(q5 ? 48 : 16) + 32 * (e / 64) + e % 32];
      int q = e % 64 < 32 ? (byte & 15) : (byte >> 4);
      if (q5) q |= Bit(p + 16 + e % 32, e / 32) << 4;
      int sc, m;
      ScaleMin(p + 4, e / 32, &sc, &m);
      return Half(p) * static_cast<float>(sc) * static_cast<float>(q) -
             Half(p + 2) * static_cast<float>(m);
    }
    case DType::kQ6_K: {
      // ql[128] qh[64] scales[16] d: e = 128 n + 32 k + l takes the low
      // (k < 2) or high nibble of ql[64 n + 32 (k % 2) + l] and bits 2k,
      // 2k + 1 of qh[32 n + l].
      const int n = e / 128, k = e % 128 / 32, l = e % 32;
      const uint8_t lo = p[64 * n + 32 * (k % 2) + l];
      const int q = ((k < 2 ? (lo & 15) : (lo >> 4)) |
                     (((p[128 + 32 * n + l] >> (2 * k)) & 3) << 4)) -
                    32;
      return Half(p + 208) *
             static_cast<float>(static_cast<int8_t>(p[192 + e / 16])) *
             static_cast<float>(q);
    }
    default:
      return std::nanf("");
  }
}

// Random blocks with finite scales (fp16 fields drawn from a range, not from
// raw bits, which could be inf/NaN).
std::vector<uint8_t> Blocks(DType type, int n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * BlockBytes(type)));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<size_t> halves;
  switch (type) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kIQ4_NL:
      halves = {0};
      break;
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      halves = {0, 2};
      break;
    case DType::kQ2_K:
      halves = {80, 82};
      break;
    case DType::kQ3_K:
      halves = {108};
      break;
    case DType::kQ6_K:
      halves = {208};
      break;
    default:
      break;
  }
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int b = 0; b < n_blocks; ++b) {
    for (size_t off : halves) {
      const uint16_t h = Fp32ToFp16(dist(rng) * 1e-2f);
      std::memcpy(bytes.data() + b * BlockBytes(type) + off, &h, 2);
    }
  }
  return bytes;
}

class DequantTest : public testing::TestWithParam<DType> {};

TEST_P(DequantTest, MatchesPerElementFormulaExactly) {
  const DType type = GetParam();
  const int n_blocks = 12;
  const int64_t elems = BlockElements(type);
  const std::vector<uint8_t> bytes = Blocks(type, n_blocks, 1);
  const int64_t cols = n_blocks * elems;
  std::vector<float> out(static_cast<size_t>(cols));
  DequantizeRow(WeightView{type, 1, cols, bytes.data()}, 0, out.data());
  for (int b = 0; b < n_blocks; ++b) {
    for (int e = 0; e < elems; ++e) {
      const float want = Expected(type, bytes.data() + b * BlockBytes(type), e);
      const float got = out[b * elems + e];
      ASSERT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
          << DTypeName(type) << " block " << b << " element " << e << ": "
          << got << " != " << want;
    }
  }
}

TEST_P(DequantTest, UnpackedFormGivesTheSameValues) {
  const DType type = GetParam();
  const int n_blocks = 12;
  const int64_t elems = BlockElements(type);
  const std::vector<uint8_t> bytes = Blocks(type, n_blocks, 2);
  std::vector<float> out(static_cast<size_t>(n_blocks * elems));
  ref::DequantizeBlocks(type, bytes.data(), n_blocks, out.data());
  const UnpackBlockFn unpack = ref::Unpacker(type);
  ASSERT_NE(unpack, nullptr);
  std::vector<int8_t> q(static_cast<size_t>(elems));
  std::vector<float> scale(static_cast<size_t>(elems / 16));
  std::vector<float> offset(static_cast<size_t>(elems / 16));
  for (int b = 0; b < n_blocks; ++b) {
    unpack(bytes.data() + b * BlockBytes(type), q.data(), scale.data(),
           offset.data());
    for (int e = 0; e < elems; ++e) {
      const float w = scale[e / 16] * static_cast<float>(q[e]) + offset[e / 16];
      ASSERT_EQ(w, out[b * elems + e])
          << DTypeName(type) << " block " << b << " element " << e;
      if (!HasOffset(type)) {
        ASSERT_EQ(offset[e / 16], 0.0f);
      }
    }
  }
}

std::vector<DType> BlockTypes() {
  std::vector<DType> out;
  for (DType t : kAllDTypes) {
    if (IsQuantized(t)) out.push_back(t);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllBlockTypes, DequantTest,
                         testing::ValuesIn(BlockTypes()),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(DTypeTest, BlockGeometryMatchesGgml) {
  EXPECT_EQ(BlockElements(DType::kQ4_K), 256);
  EXPECT_EQ(BlockBytes(DType::kQ4_K), 144);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 512), 2 * 210);
  EXPECT_EQ(RowBytes(DType::kQ5_0, 64), 2 * 22);
  EXPECT_EQ(RowBytes(DType::kIQ4_NL, 32), 18);
  EXPECT_EQ(RowBytes(DType::kQ2_K, 256), 84);
  EXPECT_EQ(RowBytes(DType::kQ3_K, 256), 110);
  EXPECT_EQ(RowBytes(DType::kQ5_K, 256), 176);
  EXPECT_EQ(RowBytes(DType::kQ4_1, 32), 20);
  EXPECT_EQ(RowBytes(DType::kQ5_1, 32), 24);
  for (int i = 0; i < kDTypeCount; ++i) {
    EXPECT_EQ(static_cast<int>(kAllDTypes[i]), i);
    EXPECT_NE(DTypeName(kAllDTypes[i]), "?");
  }
}

}  // namespace
}  // namespace redline::kernels

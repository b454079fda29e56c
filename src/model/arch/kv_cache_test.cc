// KvCache's two layouts: where each head's entry lands, what Store writes
// there, and copying a prefix between caches of different lengths.
#include "model/arch/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace redline::model {
namespace {

constexpr int64_t kLayers = 2;
constexpr int64_t kHeads = 3;
constexpr int64_t kHeadDim = 32;
constexpr int64_t kKvDim = kHeads * kHeadDim;
// Not a multiple of kKvBlockPositions: the last block is partial.
constexpr int64_t kCtx = 700;

// A value no other (layer, pos, element, K or V) has.
float Value(int64_t layer, int64_t pos, int64_t i, bool v) {
  return static_cast<float>(((layer * kCtx + pos) * kKvDim + i) * 2 + v) /
         1024.0f;
}

std::vector<float> Row(int64_t layer, int64_t pos, bool v) {
  std::vector<float> row(kKvDim);
  for (int64_t i = 0; i < kKvDim; ++i) row[i] = Value(layer, pos, i, v);
  return row;
}

// Positions on both sides of each block boundary, and the last one.
const std::vector<int64_t>& Positions() {
  static const std::vector<int64_t> p = {0,   1,   254, 255, 256,
                                         257, 511, 512, 698, kCtx - 1};
  return p;
}

void StoreAll(KvCache& cache) {
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t p : Positions()) {
      cache.Store(l, p, Row(l, p, false).data(), Row(l, p, true).data());
    }
  }
}

// Whether every head's K and V entry at (layer, pos) has the same bytes in
// a and b.
::testing::AssertionResult SameEntries(const KvCache& a, const KvCache& b,
                                       int64_t layer, int64_t pos) {
  for (int64_t g = 0; g < kHeads; ++g) {
    if (std::memcmp(a.KHead(layer, pos, g), b.KHead(layer, pos, g),
                    a.HeadBytes()) != 0 ||
        std::memcmp(a.VHead(layer, pos, g), b.VHead(layer, pos, g),
                    a.HeadBytes()) != 0) {
      return ::testing::AssertionFailure()
             << "layer " << layer << " position " << pos << " head " << g;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(KvCacheTest, EachHeadReadsBackWhatStoreWroteInBothLayouts) {
  for (KvLayout layout : {KvLayout::kRows, KvLayout::kHeadBlocks}) {
    KvCache cache(kLayers, kCtx, kKvDim, KvType::kF32, layout, kHeads);
    StoreAll(cache);
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t p : Positions()) {
        for (int64_t g = 0; g < kHeads; ++g) {
          std::vector<float> k(kHeadDim), v(kHeadDim);
          std::memcpy(k.data(), cache.KHead(l, p, g), kHeadDim * 4);
          std::memcpy(v.data(), cache.VHead(l, p, g), kHeadDim * 4);
          for (int64_t d = 0; d < kHeadDim; ++d) {
            ASSERT_EQ(k[d], Value(l, p, g * kHeadDim + d, false))
                << int(layout) << " " << l << " " << p << " " << g;
            ASSERT_EQ(v[d], Value(l, p, g * kHeadDim + d, true));
          }
        }
      }
    }
  }
}

TEST(KvCacheTest, PositionStrideStepsWithinABlock) {
  for (KvLayout layout : {KvLayout::kRows, KvLayout::kHeadBlocks}) {
    KvCache cache(kLayers, kCtx, kKvDim, KvType::kF16, layout, kHeads);
    EXPECT_EQ(cache.HeadBytes(), 2 * kHeadDim);
    EXPECT_EQ(cache.PositionStrideBytes(),
              layout == KvLayout::kRows ? cache.RowBytes() : cache.HeadBytes());
    for (int64_t g = 0; g < kHeads; ++g) {
      for (int64_t p : {0, 100, 256, 600}) {
        EXPECT_EQ(cache.KHead(1, p + 1, g) - cache.KHead(1, p, g),
                  cache.PositionStrideBytes());
      }
    }
    // Every (layer, position, head) entry is distinct and inside the cache.
    std::vector<const std::byte*> seen;
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t p = 0; p < kCtx; ++p) {
        for (int64_t g = 0; g < kHeads; ++g)
          seen.push_back(cache.KHead(l, p, g));
      }
    }
    std::sort(seen.begin(), seen.end());
    for (size_t i = 1; i < seen.size(); ++i) {
      ASSERT_GE(seen[i] - seen[i - 1], cache.HeadBytes());
    }
    EXPECT_LE(seen.back() + cache.HeadBytes() - seen.front(),
              cache.SizeBytes() / 2);
  }
}

// Head blocks store each head as a row of its own; q8_0 blocks never
// straddle heads, so the bytes are those of the whole row.
TEST(KvCacheTest, HalfAndQ8HeadsHoldTheRowsBytes) {
  for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
    KvCache rows(kLayers, kCtx, kKvDim, type, KvLayout::kRows, kHeads);
    KvCache blocks(kLayers, kCtx, kKvDim, type, KvLayout::kHeadBlocks, kHeads);
    StoreAll(rows);
    StoreAll(blocks);
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t p : Positions()) {
        ASSERT_TRUE(SameEntries(rows, blocks, l, p)) << KvTypeName(type);
      }
    }
  }
}

TEST(KvCacheTest, CopyPrefixBetweenLengthsKeepsEveryEntry) {
  for (KvLayout layout : {KvLayout::kRows, KvLayout::kHeadBlocks}) {
    KvCache from(kLayers, kCtx, kKvDim, KvType::kF32, layout, kHeads);
    StoreAll(from);
    // Longer and shorter than `from`, both ending inside a block.
    for (int64_t n_ctx : {1000, 520}) {
      KvCache to(kLayers, n_ctx, kKvDim, KvType::kF32, layout, kHeads);
      const int64_t n = 513;
      to.CopyPrefixFrom(from, n);
      EXPECT_EQ(to.n_used(), n);
      for (int64_t l = 0; l < kLayers; ++l) {
        for (int64_t p : Positions()) {
          if (p >= n) continue;
          ASSERT_TRUE(SameEntries(to, from, l, p))
              << int(layout) << " n_ctx=" << n_ctx;
        }
      }
    }
  }
}

TEST(KvCacheTest, SizeCoversWholeBlocks) {
  // 700 positions take three blocks of 256 rows: 768 rows of each layer.
  KvCache cache(kLayers, kCtx, kKvDim, KvType::kF32, KvLayout::kHeadBlocks,
                kHeads);
  const int64_t rows_bytes = kLayers * 768 * kKvDim * 4;
  EXPECT_GE(cache.SizeBytes(), 2 * rows_bytes);
  EXPECT_LT(cache.SizeBytes(), 2 * (rows_bytes + (int64_t{2} << 20)));
}

}  // namespace
}  // namespace redline::model

#include "kernels/packed.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "base/check.h"
#include "kernels/kernel_table.h"

namespace redline::kernels {
namespace {

constexpr int64_t kGroupBytes = 4;  // one vpdpbusd lane: 4 consecutive bytes

int64_t PackedBlockBytes(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return PackedBlock<DType::kQ8_0>::kBytes;
    case DType::kQ4_0:
      return PackedBlock<DType::kQ4_0>::kBytes;
    case DType::kQ4_1:
      return PackedBlock<DType::kQ4_1>::kBytes;
    case DType::kIQ4_NL:
      return PackedBlock<DType::kIQ4_NL>::kBytes;
    case DType::kQ5_0:
      return PackedBlock<DType::kQ5_0>::kBytes;
    case DType::kQ5_1:
      return PackedBlock<DType::kQ5_1>::kBytes;
    case DType::kQ2_K:
      return PackedBlock<DType::kQ2_K>::kBytes;
    case DType::kQ3_K:
      return PackedBlock<DType::kQ3_K>::kBytes;
    case DType::kQ4_K:
      return PackedBlock<DType::kQ4_K>::kBytes;
    case DType::kQ5_K:
      return PackedBlock<DType::kQ5_K>::kBytes;
    case DType::kQ6_K:
      return PackedBlock<DType::kQ6_K>::kBytes;
    case DType::kF16:
    case DType::kBF16:
      return kHalfColumnBytes;
    default:
      return 0;
  }
}

// Copies the 4-byte lane at src into lane (g, r) of a [groups][16][4] run.
void PutLane(const uint8_t* src, int64_t g, int64_t r, uint8_t* run) {
  std::memcpy(run + (g * kPackRows + r) * kGroupBytes, src, kGroupBytes);
}

// The frame of the super-block packers: zeroes the panel's super-block at
// dst (padding rows stay all zero bytes: weight 0 with scales 0), then
// calls put(b, r) with a copy b of super-block `i` of each row r of the
// panel whose rows start at row0.
template <DType kType, typename Block, typename Put>
void PackRows(const WeightView& w, int64_t row0, int64_t i, uint8_t* dst,
              Put&& put) {
  std::memset(dst, 0, PackedBlock<kType>::kBytes);
  for (int64_t r = 0; r < kPackRows && row0 + r < w.rows; ++r) {
    Block b;
    std::memcpy(&b, w.Row(row0 + r) + i * sizeof(Block), sizeof(b));
    put(b, r);
  }
}

// Super-block `i` of panel rows [row0, row0 + 16) as Q4_K or Q5_K panel
// bytes (see packed.h).
template <DType kType>
void PackQ4KQ5K(const WeightView& w, int64_t row0, int64_t i, uint8_t* dst) {
  using P = PackedBlock<kType>;
  using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
  PackRows<kType, Block>(w, row0, i, dst, [dst](const Block& b, int64_t r) {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t g = 0; g < 8; ++g)
        PutLane(b.qs + 32 * j + 4 * g, j * 8 + g, r, dst);
    }
    if constexpr (kType == DType::kQ5_K) {
      for (int64_t g = 0; g < 8; ++g) PutLane(b.qh + 4 * g, g, r, dst + P::kQh);
    }
    // The 12 scale bytes as ref/kquants.cc's ScaleMinK4 reads them.
    const uint8_t* s = b.scales;
    for (int k = 0; k < 8; ++k) {
      const int sc =
          k < 4 ? s[k] & 63 : (s[k + 4] & 0xf) | ((s[k - 4] >> 6) << 4);
      const int m =
          k < 4 ? s[k + 4] & 63 : (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
      dst[P::kScales + k * kPackRows + r] = static_cast<uint8_t>(sc);
      dst[P::kMins + k * kPackRows + r] = static_cast<uint8_t>(m);
    }
    std::memcpy(dst + P::kD + 2 * r, &b.d, 2);
    std::memcpy(dst + P::kDmin + 2 * r, &b.dmin, 2);
  });
}

void PackQ6K(const WeightView& w, int64_t row0, int64_t i, uint8_t* dst) {
  using P = PackedBlock<DType::kQ6_K>;
  PackRows<DType::kQ6_K, BlockQ6_K>(
      w, row0, i, dst, [dst](const BlockQ6_K& b, int64_t r) {
        for (int64_t n = 0; n < 2; ++n) {
          for (int64_t g = 0; g < 8; ++g) {
            for (int64_t c = 0; c < 2; ++c)
              PutLane(b.ql + 64 * n + 32 * c + 4 * g, (n * 2 + c) * 8 + g, r,
                      dst);
            PutLane(b.qh + 32 * n + 4 * g, n * 8 + g, r, dst + P::kQh);
          }
        }
        for (int64_t k = 0; k < 16; ++k)
          dst[P::kScales + k * kPackRows + r] =
              static_cast<uint8_t>(b.scales[k]);
        std::memcpy(dst + P::kD + 2 * r, &b.d, 2);
      });
}

// Super-block `i` of panel rows [row0, row0 + 16) as Q2_K or Q3_K panel
// bytes (see packed.h).
template <DType kType>
void PackQ2KQ3K(const WeightView& w, int64_t row0, int64_t i, uint8_t* dst) {
  using P = PackedBlock<kType>;
  using Block = std::conditional_t<kType == DType::kQ2_K, BlockQ2_K, BlockQ3_K>;
  PackRows<kType, Block>(w, row0, i, dst, [dst](const Block& b, int64_t r) {
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t g = 0; g < 8; ++g)
        PutLane(b.qs + 32 * n + 4 * g, n * 8 + g, r, dst);
    }
    if constexpr (kType == DType::kQ2_K) {
      for (int64_t k = 0; k < 16; ++k)
        dst[P::kScales + k * kPackRows + r] = b.scales[k];
      std::memcpy(dst + P::kD + 2 * r, &b.d, 2);
      std::memcpy(dst + P::kDmin + 2 * r, &b.dmin, 2);
    } else {
      for (int64_t g = 0; g < 8; ++g)
        PutLane(b.hmask + 4 * g, g, r, dst + P::kQh);
      int scales[16];
      ScalesQ3K(b.scales, scales);
      for (int64_t k = 0; k < 16; ++k) {
        dst[P::kScales + k * kPackRows + r] =
            static_cast<uint8_t>(static_cast<int8_t>(scales[k]));
      }
      std::memcpy(dst + P::kD + 2 * r, &b.d, 2);
    }
  });
}

// Q5_0 or Q5_1 panels [panel_begin, panel_end). Padding rows: all zero
// bytes (nibbles and high bits 0, scale and min 0).
template <DType kType>
void PackQ5(const WeightView& w, int64_t panel_begin, int64_t panel_end,
            uint8_t* out) {
  using P = PackedBlock<kType>;
  using Block = std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
  const int64_t n_blocks = w.cols / kQkBlock;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* panel = out + p * n_blocks * P::kBytes;
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* dst = panel + b * P::kBytes;
      std::memset(dst, 0, P::kBytes);
      for (int64_t r = 0; r < kPackRows && p * kPackRows + r < w.rows; ++r) {
        Block block;
        std::memcpy(&block, w.Row(p * kPackRows + r) + b * sizeof(Block),
                    sizeof(block));
        for (int64_t g = 0; g < 4; ++g) PutLane(block.qs + 4 * g, g, r, dst);
        // qh bit e is element e's fifth bit; operand g's byte i of lane r
        // holds element 4g + i (packed.h).
        const uint32_t qh = static_cast<uint32_t>(block.qh[0]) |
                            static_cast<uint32_t>(block.qh[1]) << 8 |
                            static_cast<uint32_t>(block.qh[2]) << 16 |
                            static_cast<uint32_t>(block.qh[3]) << 24;
        for (int64_t e = 0; e < kQkBlock; ++e) {
          if ((qh >> e & 1u) == 0) continue;
          const int64_t bit = 4 * r + e % 4;  // in mask g = e / 4
          dst[P::kQh + 8 * (e / 4) + bit / 8] |=
              static_cast<uint8_t>(1u << (bit % 8));
        }
        std::memcpy(dst + P::kQuantBytes + 2 * r, &block.d, 2);
        if constexpr (kType == DType::kQ5_1)
          std::memcpy(dst + P::kMin + 2 * r, &block.m, 2);
      }
    }
  }
}

// Panels [panel_begin, panel_end) of a 16-bit float matrix: column c of
// panel p is the 16 values w[16p .. 16p + 15][c] (padding rows +0), 32
// bytes. Rows are read in blocks of 16 columns, so each row's bytes are
// read sequentially and each 512-byte run of the panel written once.
void PackHalf(const WeightView& w, int64_t panel_begin, int64_t panel_end,
              uint8_t* out) {
  constexpr int64_t kBlockCols = 16;
  const int64_t panel_bytes = PackedPanelBytes(w.type, w.cols);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    auto* panel = reinterpret_cast<uint16_t*>(out + p * panel_bytes);
    const uint8_t* rows[kPackRows];
    for (int64_t r = 0; r < kPackRows; ++r) {
      const int64_t row = p * kPackRows + r;
      rows[r] = row < w.rows ? w.Row(row) : nullptr;
    }
    for (int64_t c0 = 0; c0 < w.cols; c0 += kBlockCols) {
      const int64_t n = std::min(kBlockCols, w.cols - c0);
      for (int64_t r = 0; r < kPackRows; ++r) {
        for (int64_t c = c0; c < c0 + n; ++c) {
          uint16_t v = 0;
          if (rows[r] != nullptr) std::memcpy(&v, rows[r] + 2 * c, sizeof(v));
          panel[c * kPackRows + r] = v;
        }
      }
    }
  }
}

}  // namespace

int64_t PackedPanels(int64_t rows) {
  return (rows + kPackRows - 1) / kPackRows;
}

int64_t PackedPanelBytes(DType type, int64_t cols) {
  return cols / BlockElements(type) * PackedBlockBytes(type);
}

int64_t PackedBytes(DType type, int64_t rows, int64_t cols) {
  return PackedPanels(rows) * PackedPanelBytes(type, cols);
}

bool PackedLayoutHelps(DType type) {
  return PackedBlockBytes(type) > 0 &&
         ActiveKernels().matmul_packed[static_cast<int>(type)] != nullptr;
}

void PackWeights(const WeightView& w, int64_t panel_begin, int64_t panel_end,
                 void* packed) {
  RL_CHECK(PackedBlockBytes(w.type) > 0)
      << "no packed layout for " << DTypeName(w.type);
  RL_DCHECK(panel_begin >= 0 && panel_end <= PackedPanels(w.rows));
  if (w.type == DType::kQ5_0) {
    PackQ5<DType::kQ5_0>(w, panel_begin, panel_end,
                         static_cast<uint8_t*>(packed));
    return;
  }
  if (w.type == DType::kQ5_1) {
    PackQ5<DType::kQ5_1>(w, panel_begin, panel_end,
                         static_cast<uint8_t*>(packed));
    return;
  }
  if (w.type == DType::kF16 || w.type == DType::kBF16) {
    PackHalf(w, panel_begin, panel_end, static_cast<uint8_t*>(packed));
    return;
  }
  if (BlockElements(w.type) == kQkSuper) {
    const int64_t n_super = w.cols / kQkSuper;
    const int64_t block_bytes = PackedBlockBytes(w.type);
    auto* out = static_cast<uint8_t*>(packed);
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      uint8_t* panel = out + p * PackedPanelBytes(w.type, w.cols);
      for (int64_t i = 0; i < n_super; ++i) {
        uint8_t* dst = panel + i * block_bytes;
        if (w.type == DType::kQ2_K) {
          PackQ2KQ3K<DType::kQ2_K>(w, p * kPackRows, i, dst);
        } else if (w.type == DType::kQ3_K) {
          PackQ2KQ3K<DType::kQ3_K>(w, p * kPackRows, i, dst);
        } else if (w.type == DType::kQ4_K) {
          PackQ4KQ5K<DType::kQ4_K>(w, p * kPackRows, i, dst);
        } else if (w.type == DType::kQ5_K) {
          PackQ4KQ5K<DType::kQ5_K>(w, p * kPackRows, i, dst);
        } else {
          PackQ6K(w, p * kPackRows, i, dst);
        }
      }
    }
    return;
  }
  // Q8_0, Q4_0, Q4_1 and IQ4_NL: d (and Q4_1's m) then the quants, one
  // 4-byte lane per group.
  const bool q8 = w.type == DType::kQ8_0;
  const bool q4_1 = w.type == DType::kQ4_1;
  const int64_t n_blocks = w.cols / kQkBlock;
  const int64_t block_bytes = PackedBlockBytes(w.type);
  const int64_t groups =
      q8 ? kQkBlock / kGroupBytes : kQkBlock / 2 / kGroupBytes;
  const int64_t file_block_bytes = BlockBytes(w.type);
  const int64_t qs_offset =
      q4_1 ? static_cast<int64_t>(offsetof(BlockQ4_1, qs)) : 2;
  // Padding rows: weight 0 (Q8_0 stores w + 128, Q4_0 nibbles w + 8; Q4_1
  // and IQ4_NL get the same bytes) and scale (and min) 0, so they add
  // exact zeros that the kernels never store anyway.
  const uint8_t pad = q8 ? 0x80 : 0x88;
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* panel = out + p * PackedPanelBytes(w.type, w.cols);
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* dst = panel + b * block_bytes;
      uint8_t* scales = dst + groups * kPackRows * kGroupBytes;
      uint8_t* mins = scales + 2 * kPackRows;  // Q4_1 only
      for (int64_t r = 0; r < kPackRows; ++r) {
        const int64_t row = p * kPackRows + r;
        if (row >= w.rows) {
          for (int64_t g = 0; g < groups; ++g)
            std::memset(dst + (g * kPackRows + r) * kGroupBytes, pad,
                        kGroupBytes);
          std::memset(scales + 2 * r, 0, 2);
          if (q4_1) std::memset(mins + 2 * r, 0, 2);
          continue;
        }
        const uint8_t* block = w.Row(row) + b * file_block_bytes;
        std::memcpy(scales + 2 * r, block, 2);  // binary16 d
        if (q4_1) std::memcpy(mins + 2 * r, block + offsetof(BlockQ4_1, m), 2);
        const uint8_t* qs = block + qs_offset;
        const uint32_t flip = q8 ? 0x80808080u : 0u;
        for (int64_t g = 0; g < groups; ++g) {
          uint32_t lane;
          std::memcpy(&lane, qs + g * kGroupBytes, kGroupBytes);
          lane ^= flip;
          std::memcpy(dst + (g * kPackRows + r) * kGroupBytes, &lane,
                      kGroupBytes);
        }
      }
    }
  }
}

}  // namespace redline::kernels

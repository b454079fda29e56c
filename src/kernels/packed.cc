#include "kernels/packed.h"

#include <cstring>

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
    default:
      return 0;
  }
}

}  // namespace

int64_t PackedPanels(int64_t rows) {
  return (rows + kPackRows - 1) / kPackRows;
}

int64_t PackedPanelBytes(DType type, int64_t cols) {
  return cols / kQkBlock * PackedBlockBytes(type);
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
  RL_CHECK(w.type == DType::kQ8_0 || w.type == DType::kQ4_0)
      << "no packed layout for " << DTypeName(w.type);
  RL_DCHECK(panel_begin >= 0 && panel_end <= PackedPanels(w.rows));
  const bool q8 = w.type == DType::kQ8_0;
  const int64_t n_blocks = w.cols / kQkBlock;
  const int64_t block_bytes = PackedBlockBytes(w.type);
  const int64_t groups =
      q8 ? kQkBlock / kGroupBytes : kQkBlock / 2 / kGroupBytes;
  const int64_t file_block_bytes = q8 ? static_cast<int64_t>(sizeof(BlockQ8_0))
                                      : static_cast<int64_t>(sizeof(BlockQ4_0));
  // Padding rows: weight 0 (Q8_0 stores w + 128, Q4_0 nibbles w + 8) and
  // scale 0, so they add exact zeros that the kernels never store anyway.
  const uint8_t pad = q8 ? 0x80 : 0x88;
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* panel = out + p * PackedPanelBytes(w.type, w.cols);
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* dst = panel + b * block_bytes;
      uint8_t* scales = dst + groups * kPackRows * kGroupBytes;
      for (int64_t r = 0; r < kPackRows; ++r) {
        const int64_t row = p * kPackRows + r;
        if (row >= w.rows) {
          for (int64_t g = 0; g < groups; ++g)
            std::memset(dst + (g * kPackRows + r) * kGroupBytes, pad,
                        kGroupBytes);
          std::memset(scales + 2 * r, 0, 2);
          continue;
        }
        const uint8_t* block = w.Row(row) + b * file_block_bytes;
        std::memcpy(scales + 2 * r, block, 2);  // binary16 d
        const uint8_t* qs = block + 2;
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

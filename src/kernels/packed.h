// Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, F16
// and BF16 weights repacked into row panels, the layout the AVX-512
// products read fastest (as llama.cpp repacks for its AMX/VNNI kernels),
// and the AVX2 products for every one of these types but Q2_K and Q3_K
// (x86/matmul_packed_avx2.cc, x86/matmul_kpacked_avx2.cc: a 64-byte group
// is two ymm of 8 rows each).
//
// Why: in GGUF's row layout a decode step reads each 34- or 18-byte block of
// one row, and its kernel needs horizontal sums to finish a block's dot
// product. In a panel, one block of 16 rows is one contiguous run of bytes,
// arranged so that a vpdpbusd against 4 broadcast activation bytes advances
// all 16 rows' dot products at once: a product is one sequential stream per
// thread, with no shuffles. Blocks are still summed in order, one fma each,
// so results are bit-identical to the row layout's reference (ref/matmul.cc).
//
// Layout: rows in panels of kPackRows (the last panel padded with zero
// rows); panel p starts at p * PackedPanelBytes(type, cols) and holds, for
// each block b in order, the block of its 16 rows and then their 16 scales
// (binary16, as stored in the file):
//   Q8_0: [8 groups][16 rows][4 bytes]: byte i of group g, row r is
//         w[r][32b + 4g + i] + 128 as u8;            512 + 32 = 544 bytes.
//   Q4_0: [4 groups][16 rows][4 bytes]: byte i of group g, row r is the
//         file's byte qs[4g + i] of that row's block: low nibble
//         w[32b + 4g + i] + 8, high nibble w[32b + 16 + 4g + i] + 8;
//                                                    256 + 32 = 288 bytes.
//   Q4_1: Q4_0's bytes (the nibble q, w = d q + m), then the 16 mins m
//         (binary16, as stored);                     288 + 32 = 320 bytes.
//   IQ4_NL: Q4_0's bytes (the nibble indexes the IQ4_NL value table);
//                                                    256 + 32 = 288 bytes.
//   Q5_0: the low 4 bits as Q4_0's [4 groups][16 rows][4 bytes], then
//         the fifth bits as one byte mask per operand ([8 groups] u64,
//         little-endian: bit 4r + i of mask g is the fifth bit of row r's
//         element 4g + i, the element of byte i of lane r of operand g),
//         then the 16 scales;                  256 + 64 + 32 = 352 bytes.
//   Q5_1: Q5_0's bytes (q = w's 5-bit value, no offset), then the 16
//         mins m (binary16, as stored);       352 + 32 = 384 bytes.
//   Q2_K (per 256-element super-block of the 16 rows):
//         qs [2 halves][8 groups][16 rows][4 bytes]: byte i of half n,
//            group g, row r is the file's qs[32n + 4g + i], whose bits
//            2j, 2j + 1 are element 128n + 32j + 4g + i;     1024 bytes;
//         scales [16 sub-blocks][16 rows] u8, as stored (scale in the low
//            nibble, min in the high);                         256 bytes;
//         d, dmin [16 rows] binary16 each, as stored;          64 bytes;
//                                                  1344 bytes (16 x 84).
//   Q3_K: Q2_K's qs, then
//         hmask [8 groups][16 rows][4 bytes]: the file's hmask[4g + i],
//            whose bit 4n + j is the high bit of element
//            128n + 32j + 4g + i;                              512 bytes;
//         scales [16 sub-blocks][16 rows] int8: the 6-bit scales minus
//            32;                                               256 bytes;
//         d [16 rows] binary16;               32 bytes; 1824 (16 x 114).
//   Q4_K (per 256-element super-block of the 16 rows):
//         qs [4 chunks][8 groups][16 rows][4 bytes]: byte i of chunk j,
//            group g, row r is the file's qs[32j + 4g + i] of that row's
//            block: low nibble element 64j + 4g + i, high nibble element
//            64j + 32 + 4g + i;                              2048 bytes;
//         sc [8 sub-blocks][16 rows] u8: the 6-bit scales;  128 bytes;
//         m  [8 sub-blocks][16 rows] u8: the 6-bit mins;    128 bytes;
//         d, dmin [16 rows] binary16 each, as stored;        64 bytes;
//                                                  2368 bytes (16 x 148).
//   Q5_K: Q4_K's qs, then
//         qh [8 groups][16 rows][4 bytes]: the file's qh[4g + i], whose
//            bit k is the fifth bit of element 32k + 4g + i;  512 bytes;
//         then Q4_K's sc, m, d and dmin;      2880 bytes (16 x 180).
//   Q6_K: ql [2 halves][2 chunks][8 groups][16 rows][4 bytes]: byte i of
//            half n, chunk c, group g, row r is the file's
//            ql[64n + 32c + 4g + i]: low nibble element 128n + 32c + 4g + i,
//            high nibble element 128n + 64 + 32c + 4g + i;   2048 bytes;
//         qh [2 halves][8 groups][16 rows][4 bytes]: the file's
//            qh[32n + 4g + i], whose bits 2k, 2k + 1 are the top bits of
//            element 128n + 32k + 4g + i;                    1024 bytes;
//         scales [16 groups of 16][16 rows] int8;            256 bytes;
//         d [16 rows] binary16;                               32 bytes;
//                                                  3360 bytes (16 x 210).
//   F16, BF16 (per column c): the 16 rows' values w[r][c] as stored
//         (2 bytes each, rows in order; padding rows +0);   32 bytes.
// The K-quant panels keep the file's bits (no precision is lost) and add
// only Q3_K's, Q4_K's and Q5_K's unpacked scale bytes; the kernels read one
// stream per panel and need no shuffles (x86/matmul_kpacked_avx512.cc;
// x86/matmul_kpacked_avx2.cc).
// Thread-safety: pure functions; PackWeights calls on disjoint panel ranges
// may run concurrently.
#ifndef REDLINE_KERNELS_PACKED_H_
#define REDLINE_KERNELS_PACKED_H_

#include <cstdint>

#include "kernels/dtype.h"

namespace redline::kernels {

inline constexpr int64_t kPackRows = 16;
// One column of a 16-bit float panel.
inline constexpr int64_t kHalfColumnBytes = 2 * kPackRows;

// The layout's constants per type, for the kernels that read it (plain data:
// no functions, see kernel_table.h). kOffset is what the stored u8 adds to
// each weight.
template <DType kType>
struct PackedBlock;
template <>
struct PackedBlock<DType::kQ8_0> {
  static constexpr int64_t kQuantBytes = kQkBlock * kPackRows;    // 512
  static constexpr int64_t kBytes = kQuantBytes + 2 * kPackRows;  // 544
  static constexpr int32_t kOffset = 128;
};
template <>
struct PackedBlock<DType::kQ4_0> {
  static constexpr int64_t kQuantBytes = kQkBlock / 2 * kPackRows;  // 256
  static constexpr int64_t kBytes = kQuantBytes + 2 * kPackRows;    // 288
  static constexpr int32_t kOffset = 8;
};

template <>
struct PackedBlock<DType::kQ4_1> {
  static constexpr int64_t kQuantBytes = kQkBlock / 2 * kPackRows;  // 256
  static constexpr int64_t kMin = kQuantBytes + 2 * kPackRows;      // 288
  static constexpr int64_t kBytes = kMin + 2 * kPackRows;           // 320
  static constexpr int32_t kOffset = 0;
};
// The kernels look each nibble up in the value table plus 128 (u8).
template <>
struct PackedBlock<DType::kIQ4_NL> {
  static constexpr int64_t kQuantBytes = kQkBlock / 2 * kPackRows;  // 256
  static constexpr int64_t kBytes = kQuantBytes + 2 * kPackRows;    // 288
  static constexpr int32_t kOffset = 128;
};

template <>
struct PackedBlock<DType::kQ5_0> {
  static constexpr int64_t kQh = kQkBlock / 2 * kPackRows;        // 256
  static constexpr int64_t kQuantBytes = kQh + 4 * kPackRows;     // 320
  static constexpr int64_t kBytes = kQuantBytes + 2 * kPackRows;  // 352
  static constexpr int32_t kOffset = 16;
};
template <>
struct PackedBlock<DType::kQ5_1> {
  static constexpr int64_t kQh = kQkBlock / 2 * kPackRows;      // 256
  static constexpr int64_t kQuantBytes = kQh + 4 * kPackRows;   // 320
  static constexpr int64_t kMin = kQuantBytes + 2 * kPackRows;  // 352
  static constexpr int64_t kBytes = kMin + 2 * kPackRows;       // 384
  static constexpr int32_t kOffset = 0;
};
template <>
struct PackedBlock<DType::kQ2_K> {
  static constexpr int64_t kQuantBytes = kQkSuper / 4 * kPackRows;  // 1024
  static constexpr int64_t kScales = kQuantBytes;                   // u8
  static constexpr int64_t kD = kScales + 16 * kPackRows;           // 1280
  static constexpr int64_t kDmin = kD + 2 * kPackRows;              // 1312
  static constexpr int64_t kBytes = kDmin + 2 * kPackRows;          // 1344
};
template <>
struct PackedBlock<DType::kQ3_K> {
  static constexpr int64_t kQh = kQkSuper / 4 * kPackRows;            // 1024
  static constexpr int64_t kScales = kQh + kQkSuper / 8 * kPackRows;  // 1536
  static constexpr int64_t kD = kScales + 16 * kPackRows;             // 1792
  static constexpr int64_t kBytes = kD + 2 * kPackRows;               // 1824
};
template <>
struct PackedBlock<DType::kQ4_K> {
  static constexpr int64_t kQuantBytes = kQkSuper / 2 * kPackRows;  // 2048
  static constexpr int64_t kScales = kQuantBytes;                   // u8 sc
  static constexpr int64_t kMins = kScales + 8 * kPackRows;         // u8 m
  static constexpr int64_t kD = kMins + 8 * kPackRows;              // fp16 d
  static constexpr int64_t kDmin = kD + 2 * kPackRows;              // fp16
  static constexpr int64_t kBytes = kDmin + 2 * kPackRows;          // 2368
};
template <>
struct PackedBlock<DType::kQ5_K> {
  static constexpr int64_t kQh = kQkSuper / 2 * kPackRows;            // 2048
  static constexpr int64_t kScales = kQh + kQkSuper / 8 * kPackRows;  // 2560
  static constexpr int64_t kMins = kScales + 8 * kPackRows;           // 2688
  static constexpr int64_t kD = kMins + 8 * kPackRows;                // 2816
  static constexpr int64_t kDmin = kD + 2 * kPackRows;                // 2848
  static constexpr int64_t kBytes = kDmin + 2 * kPackRows;            // 2880
};
template <>
struct PackedBlock<DType::kQ6_K> {
  static constexpr int64_t kQh = kQkSuper / 2 * kPackRows;            // 2048
  static constexpr int64_t kScales = kQh + kQkSuper / 4 * kPackRows;  // 3072
  static constexpr int64_t kD = kScales + 16 * kPackRows;             // 3328
  static constexpr int64_t kBytes = kD + 2 * kPackRows;               // 3360
};

// What a type's panels hold, for the kernels' compile-time branches.
// Q5_0, Q5_1: fifth bits as panel masks.
template <DType kType>
inline constexpr bool kFiveBits =
    kType == DType::kQ5_0 || kType == DType::kQ5_1;
// Q4_1, IQ4_NL and the 5-bit types: the reference scales each half block
// apart, so the kernels do too.
template <DType kType>
inline constexpr bool kHalfScaled =
    kFiveBits<kType> || kType == DType::kQ4_1 || kType == DType::kIQ4_NL;
// Q4_1, Q5_1: a min per row and block (PackedBlock::kMin).
template <DType kType>
inline constexpr bool kHasMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
// Q4_K, Q5_K: one 6-bit scale and min per 32-element sub-block, the
// sub-block's nibbles in one operand's low or high half.
template <DType kType>
inline constexpr bool kScaleMin =
    kType == DType::kQ4_K || kType == DType::kQ5_K;
// Q2_K, Q3_K: 2 bits per weight in qs (Q3_K a third in hmask), paired into
// sub-blocks as Q6_K's nibbles are.
template <DType kType>
inline constexpr bool kLowBit = kType == DType::kQ2_K || kType == DType::kQ3_K;
// Q2_K, Q4_K, Q5_K: a dmin per super-block (acc -= dmin * mn).
template <DType kType>
inline constexpr bool kHasDmin = kScaleMin<kType> || kType == DType::kQ2_K;
// Q6_K, Q3_K: the panels hold q + 32 (q + 4) as u8, so each 16-element
// half's dot of them with the activations is kHalfOffset x that half's
// activation sum too much; zero for the other K-quants.
template <DType kType>
inline constexpr int32_t kHalfOffset = kType == DType::kQ6_K   ? 32
                                       : kType == DType::kQ3_K ? 4
                                                               : 0;

// Panels of a matrix with `rows` rows: ceil(rows / kPackRows).
int64_t PackedPanels(int64_t rows);

// Bytes of one panel of `cols` columns; 0 for types without a packed layout
// (F32 and the other block types).
int64_t PackedPanelBytes(DType type, int64_t cols);

// Bytes of the whole packed matrix: PackedPanels(rows) * PackedPanelBytes.
int64_t PackedBytes(DType type, int64_t rows, int64_t cols);

// True when the active kernels (isa.h) multiply `type` faster from the
// packed layout, i.e. when repacking at load pays off. Never for F32.
bool PackedLayoutHelps(DType type);

// Writes panels [panel_begin, panel_end) of w (a matrix of one of the types
// above, read from w.data) into `packed`, which holds the whole matrix
// (PackedBytes bytes).
// Cost: one pass over those rows. Any alignment works; 64 bytes is fastest.
void PackWeights(const WeightView& w, int64_t panel_begin, int64_t panel_end,
                 void* packed);

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_PACKED_H_

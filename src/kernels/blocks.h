// Block layouts of the quantized weight types, byte compatible with GGUF and
// ggml (ggml-common.h). Every struct is packed by construction (members in
// decreasing alignment order, or uint16_t scales first with byte arrays
// after), and the static_asserts pin the sizes GGUF files use.
//
// Scales named `d`/`dmin` are IEEE binary16 bit patterns (see
// base/float16.h) except BlockQ8_K::d, which is a float.
#ifndef REDLINE_KERNELS_BLOCKS_H_
#define REDLINE_KERNELS_BLOCKS_H_

#include <array>
#include <cstdint>

namespace redline::kernels {

// Elements per block of the 32-element types (Q4_0 ... Q8_1, IQ4_NL).
inline constexpr int64_t kQkBlock = 32;
// Elements per super-block of the K-quants (Q2_K ... Q8_K).
inline constexpr int64_t kQkSuper = 256;
// Bytes of packed 6-bit scales and mins in Q4_K/Q5_K (and, differently
// arranged, the 16 6-bit scales of Q3_K).
inline constexpr int kKScaleBytes = 12;

// Q8_0: x[i] = d * qs[i]. 34 bytes.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQkBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q8_1: as Q8_0 plus s = d * sum(qs). 36 bytes (activation side of Q4_1/Q5_1).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQkBlock];
};
static_assert(sizeof(BlockQ8_1) == 36);

// Q4_0: x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8).
// 18 bytes.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQkBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: x[j] = d * (qs[j] & 15) + m, x[j + 16] = d * (qs[j] >> 4) + m.
// 20 bytes.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQkBlock / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: the low nibbles as Q4_0, bit 4 of element j in bit j of qh
// (little-endian uint32); x = d * (q - 16). 22 bytes.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQkBlock / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: as Q5_0 with a min: x = d * q + m. 24 bytes.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQkBlock / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// IQ4_NL: 4-bit indices into a fixed non-linear table of 16 int8 values;
// x[j] = d * table[qs[j] & 15], x[j + 16] = d * table[qs[j] >> 4]. 18 bytes.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQkBlock / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// Q2_K: 16 sub-blocks of 16; scales[i] holds a 4-bit scale (low) and a 4-bit
// min (high); 2-bit quants. x = d * sc * q - dmin * m. 84 bytes.
struct BlockQ2_K {
  uint8_t scales[kQkSuper / 16];
  uint8_t qs[kQkSuper / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 sub-blocks of 16; 2 low bits in qs, the high bit in hmask
// (set means +0, clear means -4); 16 6-bit scales packed in 12 bytes.
// 110 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQkSuper / 8];
  uint8_t qs[kQkSuper / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes;
// x = d * sc * q - dmin * m. 144 bytes.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQkSuper / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K with a fifth bit per element in qh. 176 bytes.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQkSuper / 8];
  uint8_t qs[kQkSuper / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 with int8 scales; 4 low bits in ql, 2 high bits
// in qh; x = d * scales[i] * (q - 32). 210 bytes.
struct BlockQ6_K {
  uint8_t ql[kQkSuper / 2];
  uint8_t qh[kQkSuper / 4];
  int8_t scales[kQkSuper / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: the activation side of the K-quant dot products: a float scale,
// 256 int8 quants and the sums of each group of 16. 292 bytes.
struct BlockQ8_K {
  float d;
  int8_t qs[kQkSuper];
  int16_t bsums[kQkSuper / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// The 16 6-bit Q3_K scales of BlockQ3_K::scales, minus their bias of 32.
// Scale i keeps its low 4 bits in byte i (i < 8, low nibble) or byte i - 8
// (high nibble), and its top 2 bits in bit pair i / 4 of byte 8 + i % 4.
inline void ScalesQ3K(const uint8_t* s, int* out) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (s[i] & 0xf) : (s[i - 8] >> 4);
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = (low | (high << 4)) - 32;
  }
}

// The IQ4_NL value table (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4NlValues[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// The same values plus 128, as u8 (every one fits: 1..241): the unsigned
// operand of the vpdpbusd panel kernels.
inline constexpr std::array<uint8_t, 16> kIq4NlValuesU8 = [] {
  std::array<uint8_t, 16> t{};
  for (int i = 0; i < 16; ++i)
    t[i] = static_cast<uint8_t>(kIq4NlValues[i] + 128);
  return t;
}();

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_BLOCKS_H_

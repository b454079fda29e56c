// Scalar dequantisation and unpacking of every quantized block type.
//
// DequantizeBlocks follows ggml's dequantize_row_* formulas operation for
// operation (the same products and differences, in the same order, no fused
// multiply-adds: the kernels library builds with -ffp-contract=off), so its
// floats are bit-identical to ggml's. The unpackers (kernel_table.h) give
// the same values as scale * q + offset for the integer product kernels.
#include <cstring>

#include "base/check.h"
#include "base/float16.h"
#include "kernels/kernel_table.h"

namespace redline::kernels {

bool HasOffset(DType type) {
  return type == DType::kQ4_1 || type == DType::kQ5_1 || type == DType::kQ2_K ||
         type == DType::kQ4_K || type == DType::kQ5_K;
}

namespace ref {
namespace {

template <typename Block>
Block Load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Sub-block j (0..7) of the 12 packed bytes of Q4_K/Q5_K: 6-bit scale and
// 6-bit min. Blocks 0-3 keep theirs in the low 6 bits of bytes j and j + 4;
// blocks 4-7 take 4 low bits from byte j + 4 and their top 2 bits from the
// spare high bits of bytes j - 4 and j.
void ScaleMinK4(int j, const uint8_t* s, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void DequantQ8_0(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ8_0>(p);
  const float d = Fp16ToFp32(b.d);
  for (int j = 0; j < kQkBlock; ++j) y[j] = b.qs[j] * d;
}

void DequantQ4_0(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ4_0>(p);
  const float d = Fp16ToFp32(b.d);
  for (int j = 0; j < kQkBlock / 2; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 15) - 8) * d;
    y[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void DequantQ4_1(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ4_1>(p);
  const float d = Fp16ToFp32(b.d);
  const float m = Fp16ToFp32(b.m);
  for (int j = 0; j < kQkBlock / 2; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 15) * d + m;
    y[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

void DequantQ5_0(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ5_0>(p);
  const float d = Fp16ToFp32(b.d);
  const uint32_t qh = Load32(b.qh);
  for (int j = 0; j < kQkBlock / 2; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10;
    const int h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>(((b.qs[j] & 15) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((b.qs[j] >> 4) | h1) - 16) * d;
  }
}

void DequantQ5_1(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ5_1>(p);
  const float d = Fp16ToFp32(b.d);
  const float m = Fp16ToFp32(b.m);
  const uint32_t qh = Load32(b.qh);
  for (int j = 0; j < kQkBlock / 2; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10;
    const int h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>((b.qs[j] & 15) | h0) * d + m;
    y[j + 16] = static_cast<float>((b.qs[j] >> 4) | h1) * d + m;
  }
}

void DequantIQ4_NL(const uint8_t* p, float* y) {
  const auto b = Load<BlockIQ4_NL>(p);
  const float d = Fp16ToFp32(b.d);
  for (int j = 0; j < kQkBlock / 2; ++j) {
    y[j] = d * kIq4NlValues[b.qs[j] & 15];
    y[j + 16] = d * kIq4NlValues[b.qs[j] >> 4];
  }
}

// Q2_K and Q3_K share the element order: 2 halves of 128, each 4 shifts of
// a 32-byte run of qs; in each shift the first 16 elements use one scale and
// the next 16 the following one.
void DequantQ2_K(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ2_K>(p);
  const float d = Fp16ToFp32(b.d);
  const float min = Fp16ToFp32(b.dmin);
  int is = 0;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = b.qs + 32 * n;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[is++];
        const float dl = d * static_cast<float>(sc & 0xf);
        const float ml = min * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void DequantQ3_K(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ3_K>(p);
  const float d_all = Fp16ToFp32(b.d);
  int scales[16];
  ScalesQ3K(b.scales, scales);
  int is = 0;
  int mask = 1;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = b.qs + 32 * n;
    for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * static_cast<float>(scales[is++]);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & mask) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

void DequantQ4_K(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ4_K>(p);
  const float d = Fp16ToFp32(b.d);
  const float min = Fp16ToFp32(b.dmin);
  for (int j = 0; j < 4; ++j) {
    const uint8_t* q = b.qs + 32 * j;
    int sc, m;
    ScaleMinK4(2 * j, b.scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = min * static_cast<float>(m);
    ScaleMinK4(2 * j + 1, b.scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * static_cast<float>(q[l] & 0xf) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

void DequantQ5_K(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ5_K>(p);
  const float d = Fp16ToFp32(b.d);
  const float min = Fp16ToFp32(b.dmin);
  int u1 = 1, u2 = 2;
  for (int j = 0; j < 4; ++j, u1 <<= 2, u2 <<= 2) {
    const uint8_t* q = b.qs + 32 * j;
    int sc, m;
    ScaleMinK4(2 * j, b.scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = min * static_cast<float>(m);
    ScaleMinK4(2 * j + 1, b.scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] & 0xf) + ((b.qh[l] & u1) ? 16 : 0);
      *y++ = d1 * static_cast<float>(v) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0);
      *y++ = d2 * static_cast<float>(v) - m2;
    }
  }
}

void DequantQ6_K(const uint8_t* p, float* y) {
  const auto b = Load<BlockQ6_K>(p);
  const float d = Fp16ToFp32(b.d);
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    const int8_t* sc = b.scales + 8 * n;
    float* yn = y + 128 * n;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      yn[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      yn[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      yn[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      yn[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// ---------------------------------------------------------------------------
// Unpackers: the same bit fields, as q with per-16 scale and offset.

void Fill2(float* a, float v) { a[0] = a[1] = v; }

void UnpackQ8_0(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ8_0>(p);
  std::memcpy(q, b.qs, kQkBlock);
  Fill2(scale, Fp16ToFp32(b.d));
  Fill2(offset, 0.0f);
}

void UnpackQ4_0(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ4_0>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((b.qs[j] & 15) - 8);
    q[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
  Fill2(scale, Fp16ToFp32(b.d));
  Fill2(offset, 0.0f);
}

void UnpackQ4_1(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ4_1>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(b.qs[j] & 15);
    q[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
  }
  Fill2(scale, Fp16ToFp32(b.d));
  Fill2(offset, Fp16ToFp32(b.m));
}

void UnpackQ5(const uint8_t* qs, uint32_t qh, int bias, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((qs[j] & 15) | (((qh >> j) & 1) << 4)) - bias);
    q[j + 16] = static_cast<int8_t>(
        ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - bias);
  }
}

void UnpackQ5_0(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ5_0>(p);
  UnpackQ5(b.qs, Load32(b.qh), 16, q);
  Fill2(scale, Fp16ToFp32(b.d));
  Fill2(offset, 0.0f);
}

void UnpackQ5_1(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ5_1>(p);
  UnpackQ5(b.qs, Load32(b.qh), 0, q);
  Fill2(scale, Fp16ToFp32(b.d));
  Fill2(offset, Fp16ToFp32(b.m));
}

void UnpackIQ4_NL(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockIQ4_NL>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = kIq4NlValues[b.qs[j] & 15];
    q[j + 16] = kIq4NlValues[b.qs[j] >> 4];
  }
  Fill2(scale, Fp16ToFp32(b.d));
  Fill2(offset, 0.0f);
}

void UnpackQ2_K(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ2_K>(p);
  const float d = Fp16ToFp32(b.d);
  const float min = Fp16ToFp32(b.dmin);
  for (int g = 0; g < 16; ++g) {
    scale[g] = d * static_cast<float>(b.scales[g] & 0xf);
    offset[g] = -(min * static_cast<float>(b.scales[g] >> 4));
  }
  for (int e = 0; e < kQkSuper; ++e) {
    const int n = e / 128, shift = 2 * (e % 128 / 32), l = e % 32;
    q[e] = static_cast<int8_t>((b.qs[32 * n + l] >> shift) & 3);
  }
}

void UnpackQ3_K(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ3_K>(p);
  const float d = Fp16ToFp32(b.d);
  int scales[16];
  ScalesQ3K(b.scales, scales);
  for (int g = 0; g < 16; ++g) {
    scale[g] = d * static_cast<float>(scales[g]);
    offset[g] = 0.0f;
  }
  for (int e = 0; e < kQkSuper; ++e) {
    const int n = e / 128, k = e % 128 / 32, l = e % 32;
    const int low = (b.qs[32 * n + l] >> (2 * k)) & 3;
    const bool high = (b.hmask[l] >> (4 * n + k)) & 1;
    q[e] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
}

void UnpackQ4_K(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ4_K>(p);
  const float d = Fp16ToFp32(b.d);
  const float min = Fp16ToFp32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    ScaleMinK4(s, b.scales, &sc, &m);
    Fill2(scale + 2 * s, d * static_cast<float>(sc));
    Fill2(offset + 2 * s, -(min * static_cast<float>(m)));
  }
  for (int e = 0; e < kQkSuper; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    q[e] = static_cast<int8_t>(e % 64 < 32 ? (byte & 0xf) : (byte >> 4));
  }
}

void UnpackQ5_K(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ5_K>(p);
  const float d = Fp16ToFp32(b.d);
  const float min = Fp16ToFp32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    ScaleMinK4(s, b.scales, &sc, &m);
    Fill2(scale + 2 * s, d * static_cast<float>(sc));
    Fill2(offset + 2 * s, -(min * static_cast<float>(m)));
  }
  for (int e = 0; e < kQkSuper; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    const int low = e % 64 < 32 ? (byte & 0xf) : (byte >> 4);
    const int high = (b.qh[e % 32] >> (e / 32)) & 1;
    q[e] = static_cast<int8_t>(low | (high << 4));
  }
}

void UnpackQ6_K(const uint8_t* p, int8_t* q, float* scale, float* offset) {
  const auto b = Load<BlockQ6_K>(p);
  const float d = Fp16ToFp32(b.d);
  for (int g = 0; g < 16; ++g) {
    scale[g] = d * static_cast<float>(b.scales[g]);
    offset[g] = 0.0f;
  }
  for (int e = 0; e < kQkSuper; ++e) {
    const int n = e / 128, k = e % 128 / 32, l = e % 32;
    const uint8_t lo = b.ql[64 * n + 32 * (k % 2) + l];
    const int low = k < 2 ? (lo & 0xf) : (lo >> 4);
    const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
    q[e] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace

void DequantizeBlocks(DType type, const uint8_t* src, int64_t n_blocks,
                      float* out) {
  void (*fn)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case DType::kQ8_0:
      fn = &DequantQ8_0;
      break;
    case DType::kQ4_0:
      fn = &DequantQ4_0;
      break;
    case DType::kQ4_1:
      fn = &DequantQ4_1;
      break;
    case DType::kQ5_0:
      fn = &DequantQ5_0;
      break;
    case DType::kQ5_1:
      fn = &DequantQ5_1;
      break;
    case DType::kIQ4_NL:
      fn = &DequantIQ4_NL;
      break;
    case DType::kQ2_K:
      fn = &DequantQ2_K;
      break;
    case DType::kQ3_K:
      fn = &DequantQ3_K;
      break;
    case DType::kQ4_K:
      fn = &DequantQ4_K;
      break;
    case DType::kQ5_K:
      fn = &DequantQ5_K;
      break;
    case DType::kQ6_K:
      fn = &DequantQ6_K;
      break;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      break;
  }
  RL_CHECK(fn != nullptr) << DTypeName(type) << " is not a block type";
  const int64_t bytes = BlockBytes(type);
  const int64_t elems = BlockElements(type);
  for (int64_t b = 0; b < n_blocks; ++b) fn(src + b * bytes, out + b * elems);
}

UnpackBlockFn Unpacker(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return &UnpackQ8_0;
    case DType::kQ4_0:
      return &UnpackQ4_0;
    case DType::kQ4_1:
      return &UnpackQ4_1;
    case DType::kQ5_0:
      return &UnpackQ5_0;
    case DType::kQ5_1:
      return &UnpackQ5_1;
    case DType::kIQ4_NL:
      return &UnpackIQ4_NL;
    case DType::kQ2_K:
      return &UnpackQ2_K;
    case DType::kQ3_K:
      return &UnpackQ3_K;
    case DType::kQ4_K:
      return &UnpackQ4_K;
    case DType::kQ5_K:
      return &UnpackQ5_K;
    case DType::kQ6_K:
      return &UnpackQ6_K;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      break;
  }
  return nullptr;
}

}  // namespace ref
}  // namespace redline::kernels

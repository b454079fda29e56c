// Scalar reference matrix products: the oracle for every SIMD variant and the
// portable fallback. Quantized weights use exactly the integer math of the
// SIMD paths (activations rounded to Q8_0, exact int32 block dot products).
// The f32 sum over blocks is defined here: in block order,
// acc = fma(dot_b, d_w,b * d_x,b, acc), which is how ggml's AMX and VNNI
// kernels (llama.cpp's default on AMX machines) accumulate; the AVX-512
// kernels reproduce it exactly, others to float rounding.
#include <cmath>
#include <cstring>
#include <vector>

#include "base/float16.h"
#include "kernels/kernel_table.h"

namespace redline::kernels::ref {
namespace {

// Activations to Q8_0 blocks the way ggml's x86 code does it (what
// llama.cpp runs on these CPUs): d = amax / 127 stored as fp16, and
// q = x * (127 / amax) rounded half to even. Matching it bit for bit keeps
// greedy outputs equal to that engine's on Q8_0/Q4_0 weights. (ggml's
// portable reference multiplies by 1/d and rounds half away from zero; the
// two differ only for values that land on a rounding boundary.)
void QuantizeQ8Activations(const float* x, int64_t cols, int8_t* qs, float* d) {
  for (int64_t b = 0; b < cols / kQkBlock; ++b) {
    const float* xb = x + b * kQkBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQkBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float scale = amax / 127.0f;
    const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kQkBlock; ++j) {
      qs[b * kQkBlock + j] = static_cast<int8_t>(std::nearbyint(xb[j] * inv));
    }
    d[b] = Fp16ToFp32(Fp32ToFp16(scale));
  }
}

void RoundF16(const float* x, int64_t n, float* rounded, uint16_t* bits) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    if (v > kF16Max) v = kF16Max;
    if (v < -kF16Max) v = -kF16Max;
    bits[i] = Fp32ToFp16(v);
    rounded[i] = Fp16ToFp32(bits[i]);
  }
}

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Float weight types: f64 accumulation makes the reference more accurate
// than any SIMD order of f32 sums, so tests measure the SIMD error alone.
template <DType kType>
void MatMulFloatRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = a.w + r * a.row_bytes;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* x = a.x + t * a.x_stride;
      double sum = 0.0;
      for (int64_t c = 0; c < a.cols; ++c) {
        float w;
        if constexpr (kType == DType::kF32) {
          w = LoadF32(row + 4 * c);
        } else if constexpr (kType == DType::kF16) {
          w = Fp16ToFp32(LoadU16(row + 2 * c));
        } else {
          w = Bf16ToFp32(LoadU16(row + 2 * c));
        }
        sum += static_cast<double>(w) * x[c];
      }
      a.y[t * a.y_stride + r] = static_cast<float>(sum);
    }
  }
}

// Integer dot product of one weight block with one Q8 activation block.
int32_t BlockDot(DType type, const uint8_t* block, const int8_t* xq) {
  int32_t sum = 0;
  if (type == DType::kQ8_0) {
    const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
    for (int j = 0; j < kQkBlock; ++j) sum += q[j] * xq[j];
  } else {
    const uint8_t* q = block + 2;
    for (int j = 0; j < kQkBlock / 2; ++j) {
      sum += ((q[j] & 15) - 8) * xq[j];
      sum += ((q[j] >> 4) - 8) * xq[j + kQkBlock / 2];
    }
  }
  return sum;
}

void MatMulQuantRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t block_bytes =
      a.type == DType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  const int64_t n_blocks = a.cols / kQkBlock;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = a.w + r * a.row_bytes;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const int8_t* xq = a.xq.qs + t * a.xq.qs_stride;
      const float* xd = a.xq.d + t * a.xq.d_stride;
      float sum = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = row + b * block_bytes;
        const float scale = Fp16ToFp32(LoadU16(block)) * xd[b];
        sum = std::fma(
            static_cast<float>(BlockDot(a.type, block, xq + b * kQkBlock)),
            scale, sum);
      }
      a.y[t * a.y_stride + r] = sum;
    }
  }
}

// The other block types through their unpacked form (kernel_table.h): per
// 32-element activation block b and its two groups of 16 (g = 2b, 2b + 1),
//   y += d_x,b * ((scale_g0 * dot_g0 + scale_g1 * dot_g1)
//                 + (offset_g0 * xsum_g0 + offset_g1 * xsum_g1))
// with exact int32 dot products and activation sums, one fma per block.
// The SIMD kernels sum the same terms in other orders (to float rounding).
void MatMulUnpackedRows(const MatMulArgs& a, int64_t row_begin,
                        int64_t row_end) {
  const UnpackBlockFn unpack = Unpacker(a.type);
  const int64_t block_elems = BlockElements(a.type);
  const int64_t block_bytes = BlockBytes(a.type);
  const int64_t n_blocks = a.cols / kQkBlock;
  const bool offsets = HasOffset(a.type);
  std::vector<int8_t> q(static_cast<size_t>(a.cols));
  std::vector<float> scale(static_cast<size_t>(a.cols / 16));
  std::vector<float> offset(static_cast<size_t>(a.cols / 16));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = a.w + r * a.row_bytes;
    for (int64_t i = 0; i < a.cols / block_elems; ++i) {
      unpack(row + i * block_bytes, q.data() + i * block_elems,
             scale.data() + i * block_elems / 16,
             offset.data() + i * block_elems / 16);
    }
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const int8_t* xq = a.xq.qs + t * a.xq.qs_stride;
      const float* xd = a.xq.d + t * a.xq.d_stride;
      float sum = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t dot[2] = {0, 0};
        int32_t xsum[2] = {0, 0};
        for (int j = 0; j < kQkBlock; ++j) {
          const int64_t c = b * kQkBlock + j;
          dot[j / 16] += q[c] * xq[c];
          xsum[j / 16] += xq[c];
        }
        const float* sc = scale.data() + 2 * b;
        float block = sc[0] * static_cast<float>(dot[0]) +
                      sc[1] * static_cast<float>(dot[1]);
        if (offsets) {
          const float* off = offset.data() + 2 * b;
          block += off[0] * static_cast<float>(xsum[0]) +
                   off[1] * static_cast<float>(xsum[1]);
        }
        sum = std::fma(block, xd[b], sum);
      }
      a.y[t * a.y_stride + r] = sum;
    }
  }
}

}  // namespace

void FillMatMulTable(KernelTable* table) {
  table->quantize_q8 = &QuantizeQ8Activations;
  table->round_f16 = &RoundF16;
  table->matmul[static_cast<int>(DType::kF32)] = &MatMulFloatRows<DType::kF32>;
  table->matmul[static_cast<int>(DType::kF16)] = &MatMulFloatRows<DType::kF16>;
  table->matmul[static_cast<int>(DType::kBF16)] =
      &MatMulFloatRows<DType::kBF16>;
  table->matmul[static_cast<int>(DType::kQ8_0)] = &MatMulQuantRows;
  table->matmul[static_cast<int>(DType::kQ4_0)] = &MatMulQuantRows;
  for (DType type : kAllDTypes) {
    if (IsQuantized(type) && type != DType::kQ8_0 && type != DType::kQ4_0)
      table->matmul[static_cast<int>(type)] = &MatMulUnpackedRows;
  }
}

}  // namespace redline::kernels::ref

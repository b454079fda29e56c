#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/float16.h"
#include "kernels/kernel_table.h"

namespace redline::kernels {
namespace {

constexpr int64_t kScratchAlign = 64;

bool IsQuantized(DType type) { return type == DType::kQ8_0 || type == DType::kQ4_0; }

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Below this many activation values, quantizing on one thread is cheaper
// than waking the pool for it.
constexpr int64_t kParallelQuantizeMin = 1 << 15;

// Rows per work unit of the row split. Small enough to balance 896-row
// matrices over a few threads, a multiple of every row tile (<= 8).
constexpr int64_t kRowGrain = 16;

}  // namespace

int64_t Q8QsStride(int64_t cols) { return RoundUp(cols + 64, 64); }
int64_t Q8DStride(int64_t cols) { return RoundUp(cols / kQkBlock + 16, 16); }

size_t MatMulScratchBytes(DType weight_type, int64_t cols, int64_t n_tokens) {
  if (!IsQuantized(weight_type)) return 0;
  const int64_t per_token = Q8QsStride(cols) + Q8DStride(cols) * static_cast<int64_t>(sizeof(float));
  return static_cast<size_t>(kScratchAlign + n_tokens * per_token);
}

void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y,
            std::span<std::byte> scratch, ThreadPool& pool) {
  RL_DCHECK(n_tokens >= 0);
  RL_DCHECK(w.cols % BlockElements(w.type) == 0) << "cols=" << w.cols;
  if (n_tokens == 0 || w.rows == 0) return;
  const KernelTable& kernels = ActiveKernels();
  MatMulArgs args;
  args.type = w.type;
  args.w = static_cast<const uint8_t*>(w.data);
  args.row_bytes = RowBytes(w.type, w.cols);
  args.cols = w.cols;
  args.n_tokens = n_tokens;
  args.x = x;
  args.y = y;
  args.y_stride = w.rows;

  if (IsQuantized(w.type)) {
    RL_DCHECK(scratch.size() >= MatMulScratchBytes(w.type, w.cols, n_tokens))
        << "scratch " << scratch.size() << " < " << MatMulScratchBytes(w.type, w.cols, n_tokens);
    const auto base = reinterpret_cast<uintptr_t>(scratch.data());
    const uintptr_t aligned = (base + kScratchAlign - 1) & ~static_cast<uintptr_t>(kScratchAlign - 1);
    auto* qs = reinterpret_cast<int8_t*>(aligned);
    const int64_t qs_stride = Q8QsStride(w.cols);
    const int64_t d_stride = Q8DStride(w.cols);
    auto* d = reinterpret_cast<float*>(qs + n_tokens * qs_stride);
    const int64_t n_blocks = w.cols / kQkBlock;
    auto quantize = [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
        int8_t* qs_t = qs + t * qs_stride;
        float* d_t = d + t * d_stride;
        kernels.quantize_q8(x + t * w.cols, w.cols, qs_t, d_t);
        std::memset(qs_t + w.cols, 0, static_cast<size_t>(qs_stride - w.cols));
        std::fill(d_t + n_blocks, d_t + d_stride, 0.0f);
      }
    };
    if (n_tokens * w.cols >= kParallelQuantizeMin && n_tokens > 1) {
      pool.ParallelFor(n_tokens, 1, quantize);
    } else {
      quantize(0, n_tokens, 0);
    }
    args.xq = Q8Activations{qs, d, qs_stride, d_stride};
  }

  const MatMulRowsFn rows_fn = kernels.matmul[static_cast<int>(w.type)];
  pool.ParallelFor(w.rows, kRowGrain,
                   [&](int64_t begin, int64_t end, int) { rows_fn(args, begin, end); });
}

void DequantizeRow(const WeightView& w, int64_t row, float* out) {
  RL_DCHECK(row >= 0 && row < w.rows) << "row=" << row;
  const uint8_t* p = w.Row(row);
  switch (w.type) {
    case DType::kF32:
      std::memcpy(out, p, static_cast<size_t>(w.cols) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t c = 0; c < w.cols; ++c) {
        uint16_t h;
        std::memcpy(&h, p + 2 * c, sizeof(h));
        out[c] = w.type == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
      return;
    case DType::kQ8_0:
      for (int64_t b = 0; b < w.cols / kQkBlock; ++b) {
        BlockQ8_0 block;
        std::memcpy(&block, p + b * sizeof(BlockQ8_0), sizeof(block));
        const float scale = Fp16ToFp32(block.d);
        for (int j = 0; j < kQkBlock; ++j) out[b * kQkBlock + j] = scale * block.qs[j];
      }
      return;
    case DType::kQ4_0:
      for (int64_t b = 0; b < w.cols / kQkBlock; ++b) {
        BlockQ4_0 block;
        std::memcpy(&block, p + b * sizeof(BlockQ4_0), sizeof(block));
        const float scale = Fp16ToFp32(block.d);
        float* o = out + b * kQkBlock;
        for (int j = 0; j < kQkBlock / 2; ++j) {
          o[j] = scale * static_cast<float>((block.qs[j] & 15) - 8);
          o[j + kQkBlock / 2] = scale * static_cast<float>((block.qs[j] >> 4) - 8);
        }
      }
      return;
  }
}

void QuantizeRow(DType type, const float* src, int64_t n, void* dst) {
  RL_DCHECK(n % BlockElements(type) == 0) << "n=" << n;
  auto* out = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == DType::kF16 ? Fp32ToFp16(src[i]) : Fp32ToBf16(src[i]);
        std::memcpy(out + 2 * i, &h, sizeof(h));
      }
      return;
    case DType::kQ8_0:
      // ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x * (1 / d)).
      for (int64_t b = 0; b < n / kQkBlock; ++b) {
        const float* x = src + b * kQkBlock;
        float amax = 0.0f;
        for (int j = 0; j < kQkBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float scale = amax / 127.0f;
        const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        BlockQ8_0 block;
        block.d = Fp32ToFp16(scale);
        for (int j = 0; j < kQkBlock; ++j) block.qs[j] = static_cast<int8_t>(std::roundf(x[j] * inv));
        std::memcpy(out + b * sizeof(BlockQ8_0), &block, sizeof(block));
      }
      return;
    case DType::kQ4_0:
      // ggml's quantize_row_q4_0_ref: the value of largest magnitude m maps
      // to -8 (d = m / -8); q = min(15, trunc(x / d + 8.5)).
      for (int64_t b = 0; b < n / kQkBlock; ++b) {
        const float* x = src + b * kQkBlock;
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < kQkBlock; ++j) {
          if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float scale = max / -8.0f;
        const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        BlockQ4_0 block;
        block.d = Fp32ToFp16(scale);
        for (int j = 0; j < kQkBlock / 2; ++j) {
          const auto q0 = static_cast<int8_t>(x[j] * inv + 8.5f);
          const auto q1 = static_cast<int8_t>(x[j + kQkBlock / 2] * inv + 8.5f);
          const auto lo = static_cast<uint8_t>(std::min<int>(15, q0));
          const auto hi = static_cast<uint8_t>(std::min<int>(15, q1));
          block.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
        std::memcpy(out + b * sizeof(BlockQ4_0), &block, sizeof(block));
      }
      return;
  }
}

}  // namespace redline::kernels

// libFuzzer target for the importance-matrix reader (GGUF and legacy .dat)
// and the weighted quantisers it feeds: every accepted file's entries are
// finite, and each is used as the importance of a fixed row for every
// weighted type (hostile but finite values — huge, negative, denormal —
// must quantise without a crash or an out-of-bounds access), the result
// dequantised back.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target imatrix_fuzz
//   ./build/fuzz/fuzz/imatrix_fuzz -max_total_time=30 tests/data/imatrix_seeds
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"
#include "quant/imatrix.h"
#include "quant/row_quantize.h"

namespace {

using redline::quant::Imatrix;
using redline::quant::TensorType;

constexpr TensorType kWeighted[] = {TensorType::kQ4_0,   TensorType::kQ4_1,
                                    TensorType::kQ5_0,   TensorType::kQ5_1,
                                    TensorType::kIQ4_NL, TensorType::kQ2_K,
                                    TensorType::kQ3_K,   TensorType::kQ4_K,
                                    TensorType::kQ5_K,   TensorType::kQ6_K};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = Imatrix::Parse(std::span<const uint8_t>(data, size));
  if (!m.ok()) {
    RL_CHECK(!m.status().message().empty());
    return 0;
  }
  RL_CHECK(m->size() > 0);
  int used = 0;
  for (const auto& [name, values] : m->entries()) {
    for (float v : values) RL_CHECK(std::isfinite(v)) << name;
    if (used++ == 4) break;
    // The longest whole number of 256-element super-blocks, at most 1024.
    const size_t n = std::min<size_t>(values.size(), 1024) / 256 * 256;
    if (n == 0) continue;
    std::vector<float> row(n);
    for (size_t i = 0; i < n; ++i) {
      row[i] =
          static_cast<float>(static_cast<int>(i * 2654435761u % 2001) - 1000) *
          1e-3f;
    }
    const std::span<const float> importance(values.data(), n);
    std::vector<float> back(n);
    for (TensorType t : kWeighted) {
      std::vector<uint8_t> q(static_cast<size_t>(
          redline::quant::RowBytes(t, static_cast<int64_t>(n))));
      redline::quant::QuantizeRow(t, row, q, importance);
      redline::quant::DequantizeRow(t, q, back);
    }
  }
  return 0;
}

#include "kernels/dtype.h"

#include "base/check.h"

namespace redline::kernels {

std::string_view DTypeName(DType type) {
  switch (type) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

int64_t BlockElements(DType type) {
  return (type == DType::kQ8_0 || type == DType::kQ4_0) ? kQkBlock : 1;
}

int64_t RowBytes(DType type, int64_t cols) {
  RL_DCHECK(cols % BlockElements(type) == 0) << "cols=" << cols;
  switch (type) {
    case DType::kF32:
      return cols * 4;
    case DType::kF16:
    case DType::kBF16:
      return cols * 2;
    case DType::kQ8_0:
      return cols / kQkBlock * static_cast<int64_t>(sizeof(BlockQ8_0));
    case DType::kQ4_0:
      return cols / kQkBlock * static_cast<int64_t>(sizeof(BlockQ4_0));
  }
  return 0;
}

}  // namespace redline::kernels

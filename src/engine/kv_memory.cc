#include "engine/kv_memory.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>

namespace redline::engine {

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB", "GiB",
                                           "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return value < 10.0 ? fmt::format("{:.1f} {}", value, kUnits[unit])
                      : fmt::format("{:.0f} {}", value, kUnits[unit]);
}

std::optional<int64_t> ReadMemAvailableBytes(const std::string& meminfo_path) {
  std::FILE* f = std::fopen(meminfo_path.c_str(), "r");
  if (f == nullptr) return std::nullopt;
  std::optional<int64_t> result;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long kib = 0;
    if (std::strncmp(line, "MemAvailable:", 13) == 0 &&
        std::sscanf(line + 13, "%lld", &kib) == 1 && kib >= 0) {
      result = static_cast<int64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(f);
  return result;
}

Status CheckKvCacheFits(const model::ModelConfig& config, int64_t n_ctx,
                        int slots, model::KvType type,
                        std::optional<int64_t> available_bytes) {
  RL_RETURN_IF_ERROR(model::CheckKvType(config, type));
  if (!available_bytes) return Status::Ok();
  const int64_t per_slot = model::KvCacheBytes(config, n_ctx, type);
  int64_t need = 0;
  if (__builtin_mul_overflow(per_slot, static_cast<int64_t>(slots), &need))
    need = INT64_MAX;
  if (need <= *available_bytes) return Status::Ok();
  return Status::ResourceExhausted(fmt::format(
      "the KV cache for {} slot{} x {} tokens needs {}; this machine has {} "
      "available (MemAvailable); lower --ctx{}",
      slots, slots == 1 ? "" : "s", n_ctx, FormatBytes(need),
      FormatBytes(*available_bytes), slots == 1 ? "" : " or --parallel"));
}

}  // namespace redline::engine

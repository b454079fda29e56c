#include "model/arch/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/float16.h"
#include "model/arch/model_config.h"

namespace redline::model {

std::string_view KvTypeName(KvType type) {
  return type == KvType::kF16 ? "f16" : "f32";
}

Result<KvType> ParseKvType(std::string_view name) {
  if (name == "f32") return KvType::kF32;
  if (name == "f16") return KvType::kF16;
  return Status::InvalidArgument(
      fmt::format("KV cache type \"{}\" is not one of f16, f32", name));
}

int64_t KvTypeBytes(KvType type) { return type == KvType::kF16 ? 2 : 4; }

int64_t KvCacheBytes(const ModelConfig& config, int64_t n_ctx, KvType type) {
  if (n_ctx <= 0) return 0;
  const int64_t factors[] = {2, config.block_count, n_ctx, config.kv_dim(),
                             KvTypeBytes(type)};
  int64_t bytes = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (__builtin_mul_overflow(bytes, f, &bytes)) return INT64_MAX;
  }
  return bytes;
}

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, KvType type)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      type_(type),
      // new std::byte[] without value-init: pages are only touched when used.
      // operator new[] aligns to at least 16 bytes, enough for float rows.
      k_(new std::byte[n_layer * n_ctx * kv_dim * KvTypeBytes(type)]),
      v_(new std::byte[n_layer * n_ctx * kv_dim * KvTypeBytes(type)]) {}

void KvCache::Store(int64_t layer, int64_t pos, const float* k,
                    const float* v) {
  RL_DCHECK(layer >= 0 && layer < n_layer_ && pos >= 0 && pos < n_ctx_);
  const int64_t offset = Offset(layer, pos);
  if (type_ == KvType::kF32) {
    std::copy_n(k, kv_dim_, reinterpret_cast<float*>(k_.get()) + offset);
    std::copy_n(v, kv_dim_, reinterpret_cast<float*>(v_.get()) + offset);
    return;
  }
  uint16_t* kh = reinterpret_cast<uint16_t*>(k_.get()) + offset;
  uint16_t* vh = reinterpret_cast<uint16_t*>(v_.get()) + offset;
  for (int64_t i = 0; i < kv_dim_; ++i) {
    kh[i] = Fp32ToFp16(k[i]);
    vh[i] = Fp32ToFp16(v[i]);
  }
}

void KvCache::CopyPrefixFrom(const KvCache& other, int64_t n) {
  RL_CHECK(other.n_layer_ == n_layer_ && other.kv_dim_ == kv_dim_ &&
           other.type_ == type_ && n <= n_ctx_ && n <= other.n_ctx_);
  const int64_t elem = KvTypeBytes(type_);
  for (int64_t l = 0; l < n_layer_; ++l) {
    const int64_t offset = Offset(l, 0) * elem;
    const int64_t other_offset = other.Offset(l, 0) * elem;
    std::memcpy(k_.get() + offset, other.k_.get() + other_offset,
                n * kv_dim_ * elem);
    std::memcpy(v_.get() + offset, other.v_.get() + other_offset,
                n * kv_dim_ * elem);
  }
  n_used_ = n;
}

}  // namespace redline::model

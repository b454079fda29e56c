// KvCache: the keys and values of one sequence, for every layer and position.
//
// Layout: keys and values each [n_layer, n_ctx, kv_dim] elements of the
// cache type (f32, or binary16 as llama.cpp stores them by default); the head
// g of position p in layer l starts at element (l * n_ctx + p) * kv_dim +
// g * head_dim.
// Ownership: owns its buffers (allocated once, zero-filled lazily by the OS).
// Thread-safety: thread-compatible; the forward pass writes positions it
// runs and reads positions before them.
#ifndef REDLINE_MODEL_ARCH_KV_CACHE_H_
#define REDLINE_MODEL_ARCH_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/check.h"
#include "base/result.h"
#include "base/status.h"

namespace redline::model {

// Element type of a KV cache.
enum class KvType : uint8_t {
  kF32,  // exact: attention in f32 over the values the forward pass computed
  kF16,  // half the memory; attention with ggml's F16 arithmetic (ops.h)
};

std::string_view KvTypeName(KvType type);  // "f32", "f16"
// Parses "f32" / "f16"; InvalidArgument naming the accepted values otherwise.
Result<KvType> ParseKvType(std::string_view name);
int64_t KvTypeBytes(KvType type);  // bytes per element: 4 or 2

struct ModelConfig;

// Bytes one KvCache of `config`'s shape holds for n_ctx positions:
// 2 (K and V) * block_count * n_ctx * kv_dim * KvTypeBytes(type), what
// KvCache::SizeBytes() reports once allocated. Lets callers refuse a context
// that cannot fit before allocating it. 0 for n_ctx <= 0; INT64_MAX when the
// product overflows int64. Cost: O(1), allocates nothing.
int64_t KvCacheBytes(const ModelConfig& config, int64_t n_ctx, KvType type);

class KvCache {
 public:
  // Cost: 2 * n_layer * n_ctx * kv_dim * KvTypeBytes(type) bytes.
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim,
          KvType type = KvType::kF32);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  KvType type() const { return type_; }
  int64_t SizeBytes() const {
    return 2 * n_layer_ * n_ctx_ * kv_dim_ * KvTypeBytes(type_);
  }

  // Positions [0, n_used) hold valid entries. The forward pass does not track
  // this; owners (generator, scheduler) do, e.g. to reuse a shared prefix.
  int64_t n_used() const { return n_used_; }
  void set_n_used(int64_t n) { n_used_ = n; }

  // Writes k, v [kv_dim] at (layer, pos), rounded to the cache type.
  void Store(int64_t layer, int64_t pos, const float* k, const float* v);

  // [kv_dim] at (layer, pos) of an f32 cache.
  const float* K(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF32);
    return reinterpret_cast<const float*>(k_.get()) + Offset(layer, pos);
  }
  const float* V(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF32);
    return reinterpret_cast<const float*>(v_.get()) + Offset(layer, pos);
  }
  // [kv_dim] binary16 at (layer, pos) of an f16 cache.
  const uint16_t* KHalf(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF16);
    return reinterpret_cast<const uint16_t*>(k_.get()) + Offset(layer, pos);
  }
  const uint16_t* VHalf(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF16);
    return reinterpret_cast<const uint16_t*>(v_.get()) + Offset(layer, pos);
  }

  // Copies positions [0, n) of `other` (same shape and type) into this cache.
  void CopyPrefixFrom(const KvCache& other, int64_t n);

 private:
  int64_t Offset(int64_t layer, int64_t pos) const {
    return (layer * n_ctx_ + pos) * kv_dim_;
  }

  int64_t n_layer_, n_ctx_, kv_dim_;
  KvType type_;
  int64_t n_used_ = 0;
  // Raw storage; float or uint16_t elements by type_.
  std::unique_ptr<std::byte[]> k_;
  std::unique_ptr<std::byte[]> v_;
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_KV_CACHE_H_

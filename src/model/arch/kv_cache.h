// KvCache: the keys and values of one sequence, for every layer and position.
//
// Layout: keys and values each [n_layer, n_ctx] rows of kv_dim elements of
// the cache type (f32; binary16 as llama.cpp stores them by default; or
// q8_0 blocks of 32); row (l, p) starts at byte (l * n_ctx + p) * RowBytes()
// and head g of it at byte g * RowBytes() / n_head_kv.
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
  kF32,   // exact: attention in f32 over the values the forward pass computed
  kF16,   // half the memory; attention in f32 over binary16 K/V (ops.h)
  kQ8_0,  // 34 bytes per 32 elements (ggml's q8_0); head_dim % 32 == 0
};

std::string_view KvTypeName(KvType type);  // "f32", "f16", "q8_0"
// Parses "f32" / "f16" / "q8_0"; InvalidArgument naming the accepted values
// otherwise.
Result<KvType> ParseKvType(std::string_view name);
// Bytes of kv_dim elements (kv_dim % 32 == 0 for q8_0).
int64_t KvRowBytes(KvType type, int64_t kv_dim);

struct ModelConfig;

// InvalidArgument when `config`'s heads cannot be stored as `type` (q8_0
// needs head_dim divisible by its 32-element blocks); Ok otherwise.
Status CheckKvType(const ModelConfig& config, KvType type);

// Bytes one KvCache of `config`'s shape commits at most for n_ctx
// positions: K and V each block_count * n_ctx * KvRowBytes(type, kv_dim),
// rounded up to whole 2 MiB huge pages; what KvCache::SizeBytes() reports
// once allocated. Lets callers refuse a context
// that cannot fit before allocating it. 0 for n_ctx <= 0; INT64_MAX when the
// product overflows int64. Cost: O(1), allocates nothing.
int64_t KvCacheBytes(const ModelConfig& config, int64_t n_ctx, KvType type);

class KvCache {
 public:
  // Cost: SizeBytes(), K and V each n_layer * n_ctx * KvRowBytes(type,
  // kv_dim) bytes rounded up to whole 2 MiB pages, committed as positions
  // are written (in huge pages where the kernel gives them).
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim,
          KvType type = KvType::kF32);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  KvType type() const { return type_; }
  // The most the cache commits (KvCacheBytes).
  int64_t SizeBytes() const;
  int64_t RowBytes() const { return row_bytes_; }

  // Positions [0, n_used) hold valid entries. The forward pass does not track
  // this; owners (generator, scheduler) do, e.g. to reuse a shared prefix.
  int64_t n_used() const { return n_used_; }
  void set_n_used(int64_t n) { n_used_ = n; }

  // Writes k, v [kv_dim] at (layer, pos), rounded to the cache type (q8_0:
  // ggml's reference quantiser, per 32 elements).
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

  // The row at (layer, pos) of any type: RowBytes() bytes.
  const std::byte* KBytes(int64_t layer, int64_t pos) const {
    return k_.get() + (layer * n_ctx_ + pos) * row_bytes_;
  }
  const std::byte* VBytes(int64_t layer, int64_t pos) const {
    return v_.get() + (layer * n_ctx_ + pos) * row_bytes_;
  }

  // Copies positions [0, n) of `other` (same shape and type) into this cache.
  void CopyPrefixFrom(const KvCache& other, int64_t n);

 private:
  int64_t Offset(int64_t layer, int64_t pos) const {
    return (layer * n_ctx_ + pos) * kv_dim_;
  }

  int64_t n_layer_, n_ctx_, kv_dim_;
  KvType type_;
  int64_t row_bytes_;
  int64_t n_used_ = 0;
  // Anonymous pages of at least `bytes`, whole 2 MiB pages aligned to 2 MiB
  // (kv_cache.cc says why, and why not the heap; under
  // AddressSanitizer the heap, so that its redzones guard the cache), given
  // back when the owner goes. Throws std::bad_alloc when allocation fails.
  struct Release {
    size_t bytes = 0;
    bool heap = false;
    void operator()(std::byte* p) const;
  };
  using Pages = std::unique_ptr<std::byte[], Release>;
  static Pages AllocatePages(int64_t bytes);

  // Raw storage; float, uint16_t or BlockQ8_0 elements by type_.
  Pages k_;
  Pages v_;
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_KV_CACHE_H_

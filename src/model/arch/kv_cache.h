// KvCache: the keys and values of one sequence, for every layer and position.
//
// Layout (KvLayout): keys and values each hold n_layer x n_ctx entries of
// kv_dim elements of the cache type (f32; binary16 as llama.cpp stores them
// by default; or q8_0 blocks of 32), n_ctx rounded up to whole blocks of
// kKvBlockPositions. Rows: position p of layer l is one row of RowBytes()
// at byte (l * n_alloc + p) * RowBytes(), head g of it g * HeadBytes() on.
// Head blocks: each block of kKvBlockPositions positions of a layer keeps
// each head's entries together, [n_head_kv][kKvBlockPositions][head], so
// one head's keys over an attention chunk are one run of bytes.
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

// Positions per block of a cache: its size is rounded up to whole blocks,
// and a head-blocks cache keeps a head's entries of one block together.
// Equal to the attention chunk, so a chunk is one block.
inline constexpr int64_t kKvBlockPositions = 256;

// Where a cache keeps a position's heads (the file comment says how).
enum class KvLayout : uint8_t {
  kRows,        // a position's heads together (ggml's layout)
  kHeadBlocks,  // a head's positions together, a block at a time
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
// n_ctx rounded up to whole kKvBlockPositions, the bytes to whole 2 MiB
// huge pages; what KvCache::SizeBytes() reports once allocated, whatever
// its layout. Lets callers refuse a context that cannot fit before
// allocating it. 0 for n_ctx <= 0; INT64_MAX when the
// product overflows int64. Cost: O(1), allocates nothing.
int64_t KvCacheBytes(const ModelConfig& config, int64_t n_ctx, KvType type);

class KvCache {
 public:
  // Cost: SizeBytes(), K and V each n_layer * n_ctx * KvRowBytes(type,
  // kv_dim) bytes (n_ctx rounded up to whole kKvBlockPositions, the bytes to
  // whole 2 MiB pages), committed as positions are written (in huge pages
  // where the kernel gives them). n_head_kv divides kv_dim (and, for q8_0,
  // kv_dim / n_head_kv % 32 == 0).
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim,
          KvType type = KvType::kF32, KvLayout layout = KvLayout::kRows,
          int64_t n_head_kv = 1);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  KvType type() const { return type_; }
  KvLayout layout() const { return layout_; }
  // The most the cache commits (KvCacheBytes).
  int64_t SizeBytes() const;
  int64_t RowBytes() const { return row_bytes_; }
  // Bytes of one head's entry at one position: RowBytes() / n_head_kv.
  int64_t HeadBytes() const { return head_bytes_; }
  // Bytes from a head's entry at position p to its entry at p + 1 when both
  // lie in one block of kKvBlockPositions: RowBytes() (rows) or HeadBytes()
  // (head blocks).
  int64_t PositionStrideBytes() const {
    return layout_ == KvLayout::kRows ? row_bytes_ : head_bytes_;
  }

  // Positions [0, n_used) hold valid entries. The forward pass does not track
  // this; owners (generator, scheduler) do, e.g. to reuse a shared prefix.
  int64_t n_used() const { return n_used_; }
  void set_n_used(int64_t n) { n_used_ = n; }

  // Writes k, v [kv_dim] at (layer, pos), rounded to the cache type (q8_0:
  // ggml's reference quantiser, per 32 elements).
  void Store(int64_t layer, int64_t pos, const float* k, const float* v);

  // [kv_dim] at (layer, pos) of an f32 cache in rows.
  const float* K(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF32 && layout_ == KvLayout::kRows);
    return reinterpret_cast<const float*>(k_.get() + RowOffset(layer, pos));
  }
  const float* V(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF32 && layout_ == KvLayout::kRows);
    return reinterpret_cast<const float*>(v_.get() + RowOffset(layer, pos));
  }
  // [kv_dim] binary16 at (layer, pos) of an f16 cache in rows.
  const uint16_t* KHalf(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF16 && layout_ == KvLayout::kRows);
    return reinterpret_cast<const uint16_t*>(k_.get() + RowOffset(layer, pos));
  }
  const uint16_t* VHalf(int64_t layer, int64_t pos) const {
    RL_DCHECK(type_ == KvType::kF16 && layout_ == KvLayout::kRows);
    return reinterpret_cast<const uint16_t*>(v_.get() + RowOffset(layer, pos));
  }

  // Head `head`'s entry at (layer, pos), any type and layout: HeadBytes()
  // bytes; the next position's is PositionStrideBytes() on within a block.
  const std::byte* KHead(int64_t layer, int64_t pos, int64_t head) const {
    return k_.get() + HeadOffset(layer, pos, head);
  }
  const std::byte* VHead(int64_t layer, int64_t pos, int64_t head) const {
    return v_.get() + HeadOffset(layer, pos, head);
  }

  // Copies positions [0, n) of `other` (same shape, type, layout and heads;
  // any n_ctx >= n) into this cache.
  void CopyPrefixFrom(const KvCache& other, int64_t n);

 private:
  int64_t RowOffset(int64_t layer, int64_t pos) const {
    return (layer * n_alloc_ + pos) * row_bytes_;
  }
  int64_t HeadOffset(int64_t layer, int64_t pos, int64_t head) const {
    RL_DCHECK(layer >= 0 && layer < n_layer_ && pos >= 0 && pos < n_ctx_ &&
              head >= 0 && head < n_head_kv_);
    if (layout_ == KvLayout::kRows)
      return RowOffset(layer, pos) + head * head_bytes_;
    const int64_t block =
        layer * (n_alloc_ / kKvBlockPositions) + pos / kKvBlockPositions;
    return (block * n_head_kv_ + head) * kKvBlockPositions * head_bytes_ +
           pos % kKvBlockPositions * head_bytes_;
  }

  int64_t n_layer_, n_ctx_, kv_dim_;
  KvType type_;
  KvLayout layout_;
  int64_t n_head_kv_;
  int64_t n_alloc_;  // n_ctx rounded up to whole kKvBlockPositions
  int64_t row_bytes_, head_bytes_;
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

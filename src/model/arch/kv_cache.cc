#include "model/arch/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

#include "base/huge_pages.h"
#include "kernels/blocks.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/arch/model_config.h"

namespace redline::model {

// An attention chunk (transformer.cc) is one block of a head-blocks cache.
static_assert(kKvBlockPositions == kernels::kAttentionChunkKeys);

std::string_view KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF32:
      return "f32";
    case KvType::kF16:
      return "f16";
    case KvType::kQ8_0:
      return "q8_0";
  }
  return "?";
}

Result<KvType> ParseKvType(std::string_view name) {
  if (name == "f32") return KvType::kF32;
  if (name == "f16") return KvType::kF16;
  if (name == "q8_0") return KvType::kQ8_0;
  return Status::InvalidArgument(
      fmt::format("KV cache type \"{}\" is not one of f16, f32, q8_0", name));
}

int64_t KvRowBytes(KvType type, int64_t kv_dim) {
  switch (type) {
    case KvType::kF32:
      return 4 * kv_dim;
    case KvType::kF16:
      return 2 * kv_dim;
    case KvType::kQ8_0:
      return kv_dim / kernels::kQkBlock * int64_t{sizeof(kernels::BlockQ8_0)};
  }
  return 4 * kv_dim;
}

Status CheckKvType(const ModelConfig& config, KvType type) {
  if (type == KvType::kQ8_0 && config.head_dim % kernels::kQkBlock != 0) {
    return Status::InvalidArgument(fmt::format(
        "KV cache type q8_0 stores heads in blocks of {} values; this model's "
        "heads have {} (use --kv-type f16)",
        kernels::kQkBlock, config.head_dim));
  }
  return Status::Ok();
}

namespace {

// Blocks of kKvBlockPositions that n >= 0 positions reach (no overflow).
int64_t BlocksOf(int64_t n) {
  return n / kKvBlockPositions + (n % kKvBlockPositions != 0 ? 1 : 0);
}

// K's (or V's) bytes of n_layer x n_ctx rows, n_ctx rounded up to whole
// kKvBlockPositions, in whole huge pages; INT64_MAX on overflow, 0 when a
// factor is not positive.
int64_t HalfBytes(int64_t n_layer, int64_t n_ctx, int64_t row_bytes) {
  if (n_ctx <= 0) return 0;
  int64_t bytes = 1;
  for (int64_t f : {n_layer, BlocksOf(n_ctx), kKvBlockPositions, row_bytes}) {
    if (f <= 0) return 0;
    if (__builtin_mul_overflow(bytes, f, &bytes)) return INT64_MAX;
  }
  return bytes > INT64_MAX - kHugePageBytes ? INT64_MAX : HugePagesOf(bytes);
}

}  // namespace

int64_t KvCacheBytes(const ModelConfig& config, int64_t n_ctx, KvType type) {
  const int64_t half =
      HalfBytes(config.block_count, n_ctx, KvRowBytes(type, config.kv_dim()));
  return half > INT64_MAX / 2 ? INT64_MAX : 2 * half;
}

int64_t KvCache::SizeBytes() const {
  return 2 * HalfBytes(n_layer_, n_ctx_, row_bytes_);
}

// Anonymous pages, touched (and so committed) only where positions are
// written; transparent huge pages where the kernel allows them. Why: each
// new 4 KiB page of the cache cost a page fault in the middle of a decode
// step (a row of llama3.2-1b's K is 1 KiB, so every fourth position faulted
// in each layer's K and V). Decode into a pre-touched cache against a lazily
// touched one, same process alternating (Zen 5 VM, 20 rounds of 32 steps):
// qwen2.5-0.5b Q4_0 1.018x, llama3.2-1b Q8_0 1.010x; with huge pages one
// llama3.2-1b layer's Store took 5.6 us instead of 17.4 (a 512-position
// cache, positions written in order between the layer's products).
// The mapping is whole huge pages, aligned to them: a huge page can only
// back an aligned 2 MiB range, so the rest of a cache that is not a multiple
// of 2 MiB (all of one under 2 MiB) faulted 4 KiB at a time, and these
// faults cost ~25 us each on a VM. Fresh against pre-touched caches, decode
// steps' RoPE + KV store stage (where the faults land): llama3.2-1b Q8_0
// with 200 positions (3.2 MB) 154 against 51 us per step, qwen2.5-0.5b Q4_0
// with 80 positions 83 against 39 us; at 512 positions (whole huge pages)
// both alike.
KvCache::Pages KvCache::AllocatePages(int64_t bytes) {
  const auto want = static_cast<size_t>(std::max<int64_t>(bytes, 1));
#if defined(__SANITIZE_ADDRESS__)
  return Pages(new std::byte[want], Release{want, true});
#else
  const auto size =
      static_cast<size_t>(HugePagesOf(static_cast<int64_t>(want)));
  auto* pages = static_cast<std::byte*>(MapHugePages(size));
  if (pages == nullptr) throw std::bad_alloc();
  return Pages(pages, Release{size, false});
#endif
}

void KvCache::Release::operator()(std::byte* p) const {
  if (heap) {
    delete[] p;
  } else {
    UnmapHugePages(p, bytes);
  }
}

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, KvType type,
                 KvLayout layout, int64_t n_head_kv)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      type_(type),
      layout_(layout),
      n_head_kv_(n_head_kv),
      n_alloc_(BlocksOf(n_ctx) * kKvBlockPositions),
      row_bytes_(KvRowBytes(type, kv_dim)),
      head_bytes_(KvRowBytes(type, kv_dim / std::max<int64_t>(n_head_kv, 1))),
      k_(AllocatePages(n_layer * n_alloc_ * row_bytes_)),
      v_(AllocatePages(n_layer * n_alloc_ * row_bytes_)) {
  RL_CHECK(n_head_kv >= 1 && kv_dim % n_head_kv == 0)
      << "kv_dim=" << kv_dim << " n_head_kv=" << n_head_kv;
  RL_CHECK(type != KvType::kQ8_0 || kv_dim / n_head_kv % kernels::kQkBlock == 0)
      << "kv_dim=" << kv_dim << " n_head_kv=" << n_head_kv;
}

void KvCache::Store(int64_t layer, int64_t pos, const float* k,
                    const float* v) {
  RL_DCHECK(layer >= 0 && layer < n_layer_ && pos >= 0 && pos < n_ctx_);
  // Rows store a position's heads as one; head blocks one head at a time
  // (q8_0 blocks never straddle heads, so the bytes per head are the same).
  const bool rows = layout_ == KvLayout::kRows;
  const int64_t heads = rows ? 1 : n_head_kv_;
  const int64_t n = kv_dim_ / heads;
  for (int64_t g = 0; g < heads; ++g) {
    const int64_t at = HeadOffset(layer, pos, g);
    const float* kg = k + g * n;
    const float* vg = v + g * n;
    std::byte* kd = k_.get() + at;
    std::byte* vd = v_.get() + at;
    switch (type_) {
      case KvType::kF32:
        std::copy_n(kg, n, reinterpret_cast<float*>(kd));
        std::copy_n(vg, n, reinterpret_cast<float*>(vd));
        break;
      case KvType::kQ8_0:
        kernels::QuantizeRow(kernels::DType::kQ8_0, kg, n, kd);
        kernels::QuantizeRow(kernels::DType::kQ8_0, vg, n, vd);
        break;
      case KvType::kF16:
        kernels::ToF16(kg, n, reinterpret_cast<uint16_t*>(kd));
        kernels::ToF16(vg, n, reinterpret_cast<uint16_t*>(vd));
        break;
    }
  }
}

void KvCache::CopyPrefixFrom(const KvCache& other, int64_t n) {
  RL_CHECK(other.n_layer_ == n_layer_ && other.kv_dim_ == kv_dim_ &&
           other.type_ == type_ && other.layout_ == layout_ &&
           other.n_head_kv_ == n_head_kv_ && n <= n_ctx_ && n <= other.n_ctx_);
  // Rows: n rows per layer. Head blocks: the blocks n reaches, whole (past
  // n they hold positions neither cache has valid yet).
  const int64_t bytes =
      (layout_ == KvLayout::kRows ? n : BlocksOf(n) * kKvBlockPositions) *
      row_bytes_;
  for (int64_t l = 0; l < n_layer_; ++l) {
    std::memcpy(k_.get() + l * n_alloc_ * row_bytes_,
                other.k_.get() + l * other.n_alloc_ * row_bytes_, bytes);
    std::memcpy(v_.get() + l * n_alloc_ * row_bytes_,
                other.v_.get() + l * other.n_alloc_ * row_bytes_, bytes);
  }
  n_used_ = n;
}

}  // namespace redline::model

// KvCache: the keys and values of one sequence, for every layer and position.
//
// Layout (f32): keys and values each [n_layer, n_ctx, kv_dim]; the head g of
// position p in layer l starts at (l * n_ctx + p) * kv_dim + g * head_dim.
// Ownership: owns its buffers (allocated once, zero-filled lazily by the OS).
// Thread-safety: thread-compatible; the forward pass writes positions it
// runs and reads positions before them.
#ifndef REDLINE_MODEL_ARCH_KV_CACHE_H_
#define REDLINE_MODEL_ARCH_KV_CACHE_H_

#include <cstdint>
#include <memory>

namespace redline::model {

class KvCache {
 public:
  // Cost: n_layer * n_ctx * kv_dim * 8 bytes.
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  int64_t SizeBytes() const { return 2 * n_layer_ * n_ctx_ * kv_dim_ * static_cast<int64_t>(sizeof(float)); }

  // Positions [0, n_used) hold valid entries. The forward pass does not track
  // this; owners (generator, scheduler) do, e.g. to reuse a shared prefix.
  int64_t n_used() const { return n_used_; }
  void set_n_used(int64_t n) { n_used_ = n; }

  // [kv_dim] at (layer, pos).
  float* K(int64_t layer, int64_t pos) { return k_.get() + (layer * n_ctx_ + pos) * kv_dim_; }
  float* V(int64_t layer, int64_t pos) { return v_.get() + (layer * n_ctx_ + pos) * kv_dim_; }
  const float* K(int64_t layer, int64_t pos) const { return k_.get() + (layer * n_ctx_ + pos) * kv_dim_; }
  const float* V(int64_t layer, int64_t pos) const { return v_.get() + (layer * n_ctx_ + pos) * kv_dim_; }

  // Copies positions [0, n) of `other` (same shape) into this cache.
  void CopyPrefixFrom(const KvCache& other, int64_t n);

 private:
  int64_t n_layer_, n_ctx_, kv_dim_;
  int64_t n_used_ = 0;
  std::unique_ptr<float[]> k_;
  std::unique_ptr<float[]> v_;
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_KV_CACHE_H_

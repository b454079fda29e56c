#include "model/arch/kv_cache.h"

#include <cstring>

#include "base/check.h"

namespace redline::model {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      // new float[] without value-init: pages are only touched when used.
      k_(new float[n_layer * n_ctx * kv_dim]),
      v_(new float[n_layer * n_ctx * kv_dim]) {}

void KvCache::CopyPrefixFrom(const KvCache& other, int64_t n) {
  RL_CHECK(other.n_layer_ == n_layer_ && other.kv_dim_ == kv_dim_ && n <= n_ctx_ && n <= other.n_ctx_);
  for (int64_t l = 0; l < n_layer_; ++l) {
    std::memcpy(K(l, 0), other.K(l, 0), n * kv_dim_ * sizeof(float));
    std::memcpy(V(l, 0), other.V(l, 0), n * kv_dim_ * sizeof(float));
  }
  n_used_ = n;
}

}  // namespace redline::model

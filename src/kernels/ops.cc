#include "kernels/ops.h"

#include "base/check.h"
#include "kernels/kernel_table.h"

namespace redline::kernels {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  RL_DCHECK(n > 0) << "n=" << n;
  ActiveKernels().rms_norm(x, weight, n, eps, out);
}

void Softmax(float* x, int64_t n) {
  RL_DCHECK(n > 0) << "n=" << n;
  ActiveKernels().softmax(x, n);
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  ActiveKernels().silu_mul(gate, up, n, out);
}

void Add(const float* x, int64_t n, float* y) { ActiveKernels().add(x, n, y); }

void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const float* inv_freq,
          RopeStyle style) {
  RL_DCHECK(head_dim % 2 == 0) << "head_dim=" << head_dim;
  ActiveKernels().rope(x, n_heads, head_dim, pos, inv_freq, style);
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale, float* scores,
                   float* out) {
  RL_DCHECK(n_kv > 0) << "n_kv=" << n_kv;
  RL_DCHECK(kv_stride >= head_dim) << "kv_stride=" << kv_stride << " head_dim=" << head_dim;
  ActiveKernels().attention_head(q, k, v, n_kv, head_dim, kv_stride, scale, scores, out);
}

}  // namespace redline::kernels

// Element-wise and row-wise operations of the transformer layers. All are
// plain functions over caller-owned buffers; none allocates.
#ifndef REDLINE_KERNELS_OPS_H_
#define REDLINE_KERNELS_OPS_H_

#include <cstdint>

namespace redline::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], i < n. out may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out);

// In place: x = exp(x - max) / sum(exp(x - max)).
void Softmax(float* x, int64_t n);

// out[i] = gate[i] / (1 + e^-gate[i]) * up[i]. out may alias gate or up.
// Every ISA evaluates e^x with the same scheme as ggml's vectorised expf
// (x = n ln2 + b, a degree-5 polynomial in b, scaled by 2^n), so results
// are bit-identical across ISAs and to llama.cpp's SwiGLU.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// y[i] += x[i].
void Add(const float* x, int64_t n, float* y);

// out[i] = x[i] as binary16 bits (f16 KV cache rows): round to nearest
// even, overflow to +-inf, NaN to the quiet NaN 0x7e00 with x's sign —
// base/float16.h's Fp32ToFp16, bit for bit on every ISA.
void ToF16(const float* x, int64_t n, uint16_t* out);

// The index of the largest value of x [n] (greedy sampling over logits):
// the lowest index among equal maxima, NaNs skipped; 0 when n == 0 or every
// value is NaN (when the other values are all -inf, the first of them).
// Identical on every ISA.
int64_t Argmax(const float* x, int64_t n);

// How pairs of dimensions are rotated.
enum class RopeStyle {
  // Pairs (2i, 2i+1): llama-family GGUF files (q/k permuted by the
  // converter).
  kNorm,
  // Pairs (i, i + head_dim/2): qwen2.
  kNeox,
};

// The rotation angles of position `pos`, rounded as ggml computes them (so
// that rotated q and k are bit-identical to llama.cpp's): theta_0 = pos,
// theta_{i+1} = theta_i * theta_scale in f32, angle_i = theta_i /
// freq_factors[i] (rope_freqs; null: 1).
//   cos_sin: [2 * n_pairs] = cos(angle_0), sin(angle_0), cos(angle_1), ...
// Scalar (libm sin/cos); not dispatched.
void RopeCosSin(int64_t pos, int64_t n_pairs, float theta_scale,
                const float* freq_factors, float* cos_sin);

// Rotates x [n_heads, head_dim] in place by cos_sin [head_dim] (RopeCosSin
// with n_pairs = head_dim / 2): pair i becomes
//   (x0 cos_i - x1 sin_i, x0 sin_i + x1 cos_i),
// each an fma of the first product with the second product rounded, which is
// how GCC contracts ggml's rope.
void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin,
          RopeStyle style);

// Attention of one query head over n_kv cached positions:
//   q:   [head_dim]
//   k,v: n_kv rows of head_dim floats, row i at k + i * kv_stride
//   scores: scratch [n_kv]
//   out: [head_dim] = sum_i softmax(scale * q.k_i)_i * v_i
void AttentionHead(const float* q, const float* k, const float* v, int64_t n_kv,
                   int64_t head_dim, int64_t kv_stride, float scale,
                   float* scores, float* out);

// Attention of one query head over n_kv positions of a binary16 KV cache,
// with the arithmetic of ggml's CPU flash-attention kernel for F16 caches
// (llama.cpp's default), so that greedy decoding matches llama.cpp run with
// its defaults:
//   q is rounded to binary16; s_i = scale * (q16 . k_i), products and sums
//   in f32 (the ISA variants sum in the order of ggml's for that ISA; the
//   reference sums in f64);
//   one pass in key order with a running max M and f32 sum S; the output is
//   accumulated in binary16: on a new max acc = f16(acc * exp(M_old - M)),
//   then acc = f16(fma(v_i, exp(s_i - M), acc)); out = f32(acc) * (1 / S).
//   k,v:  n_kv rows of head_dim binary16 values, row i at k + i * kv_stride
//   work: scratch [2 * head_dim] floats
//   out:  [head_dim]
void AttentionHeadF16(const float* q, const uint16_t* k, const uint16_t* v,
                      int64_t n_kv, int64_t head_dim, int64_t kv_stride,
                      float scale, float* work, float* out);

// Element type of cached keys and values, as AttentionChunk reads them.
// Head g of position i starts at byte i * row_bytes + g * (head bytes):
enum class KvElement : uint8_t {
  kF16,   // head_dim binary16 values per head
  kQ8_0,  // head_dim / 32 BlockQ8_0 blocks per head (head_dim % 32 == 0)
};

// Cached positions per chunk: a sequence's n_kv positions split into
// ceil(n_kv / kAttentionChunkKeys) chunks at these fixed boundaries whatever
// the thread count or batch, so a token's attention does not depend on how
// the work was spread (speculative verification equals plain decoding).
inline constexpr int64_t kAttentionChunkKeys = 256;

// Floats of one chunk's partial result for n_q query heads:
// acc [n_q, head_dim], then max [n_q], then sum [n_q].
constexpr int64_t AttentionPartialFloats(int64_t n_q, int64_t head_dim) {
  return n_q * (head_dim + 2);
}

// Query heads whose scores over a whole chunk AttentionChunk's work area
// holds; more heads are taken in blocks of this many.
inline constexpr int64_t kAttentionWorkHeads = 16;

// Scratch floats AttentionChunk needs: a tile of 16 keys widened to f32 and
// transposed (head_dim rounded up to 16), the scores of kAttentionWorkHeads
// heads over a chunk, and the chunk's values widened to f32 (rows rounded
// up to 16).
constexpr int64_t AttentionChunkWorkFloats(int64_t head_dim) {
  return 16 * head_dim + 16 * 16 * ((head_dim + 15) / 16) +
         kAttentionWorkHeads * kAttentionChunkKeys +
         kAttentionChunkKeys * 16 * ((head_dim + 15) / 16);
}

// Partial attention of n_q query heads that share one KV head, over n_kv
// (1..kAttentionChunkKeys) consecutive cached positions, in f32: for head h
//   s_hi  = scale * q_h . k_i,   max_h = max_i s_hi,
//   sum_h = sum_i e^(s_hi - max_h),   acc_h = sum_i e^(s_hi - max_h) v_i.
// Keys are widened to f32 a tile at a time (16 keys on AVX-512, 8 on
// AVX2), shared by the n_q heads. Both ISAs compute a block of heads'
// scores over the whole chunk, then each head's maximum and sum, then the
// weighted values; each head's arithmetic is the same whatever n_q and the
// other heads are. Unlike AttentionHeadF16 this is not ggml's arithmetic:
// sums stay in f32 (no binary16 rounding of the accumulator), so results
// differ from it by rounding, and differ across ISAs by f32 rounding
// (ops_test bounds both).
//   q:       [n_q, head_dim]
//   k, v:    the chunk's first position; position i at byte i * row_bytes
//   work:    AttentionChunkWorkFloats(head_dim) floats
//   partial: AttentionPartialFloats(n_q, head_dim) floats, written
// Cost: about 4 * n_q * n_kv * head_dim flops; reads each K/V row once.
void AttentionChunk(KvElement type, const float* q, int64_t n_q, const void* k,
                    const void* v, int64_t n_kv, int64_t head_dim,
                    int64_t row_bytes, float scale, float* work,
                    float* partial);

// out [n_q, head_dim] = the attention the n_chunks consecutive partials
// (AttentionPartialFloats(n_q, head_dim) floats each, in key order) give
// together: with M = max_c max_c,h and w_c = e^(max_c,h - M),
//   out_h = (sum_c w_c acc_c,h) * (1 / sum_c w_c sum_c,h),
// summed in chunk order. One chunk gives acc * (1 / sum) exactly. Scalar;
// not dispatched. Cost: O(n_chunks * n_q * head_dim).
void MergeAttention(const float* partials, int64_t n_chunks, int64_t n_q,
                    int64_t head_dim, float* out);

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_OPS_H_

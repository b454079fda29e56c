// RepackWeights: copies the matrices that products read out of the file's
// memory map into anonymous memory on huge pages, at load, as llama.cpp
// repacks weights for its CPU kernels.
//   - Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, Q2_K ... Q6_K, F16 and BF16
//     where the active kernels have a packed product
//     (kernels::PackedLayoutHelps: AVX2 and up) go into the panel layout
//     of kernels/packed.h, set as WeightView::packed; `data` keeps pointing at
//     the file's rows (DequantizeRow and other ISAs read those).
//   - Every other matrix is copied as is and `data` points at the copy.
// Why: a decode step streams every matrix once. In huge pages it takes far
// fewer TLB misses than in the file's 4 KiB page-cache pages (measured
// +10-15 % decode on llama3.2-1b F16), and the panels add one sequential
// stream per 16 rows with no horizontal sums (Q8_0/Q4_0 decode 1.3-1.6x,
// prefill 1.7-2.6x). Results are bit-identical to the file's layout for
// Q8_0/Q4_0 (and to the scalar reference for Q4_1/IQ4_NL/Q5_0/Q5_1), and
// equal to f32 rounding for Q2_K ... Q6_K, whose panel kernels apply the
// scales in another order (kernels/packed.h).
//
// Ownership: the copies live in one allocation that `weights` then owns
// (packed_storage).
// Cost: one pass over the matrices, split over `pool`; memory: their size
// again, unless the caller releases the file pages of each matrix once it
// is copied (Model::Load does, from on_copied). The first touch of huge
// pages may make the kernel compact memory (seen: 2.4 s once for 1.25 GB,
// 0.3-0.5 s per GB otherwise).
// Thread-safety: not thread-safe; call before sharing the weights.
#ifndef REDLINE_MODEL_ARCH_REPACK_H_
#define REDLINE_MODEL_ARCH_REPACK_H_

#include <functional>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/arch/weights.h"

namespace redline::model {

// Called after each matrix with its view as it was before (pointing into
// the file) and the fraction of copied bytes done so far, in (0, 1].
using OnCopiedFn =
    std::function<void(const kernels::WeightView& file_matrix, double done)>;

// Copies every matrix products read (the layers' and `output`; a tied
// output is copied for products, token_embd stays in the file for
// embedding lookups). `on_copied` may be empty. Errors: ResourceExhausted
// when the memory cannot be had (or, with `lock`, pinned); the weights are
// then unchanged.
Status RepackWeights(ModelWeights* weights, ThreadPool& pool, bool lock,
                     const OnCopiedFn& on_copied);

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_REPACK_H_

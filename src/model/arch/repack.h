// RepackWeights: copies a model's Q8_0/Q4_0 matrices into the panel layout
// of kernels/packed.h where the active kernels read it faster (AVX-512 VNNI:
// decode at or above the row layout's rate, prefill ~3x), as llama.cpp
// repacks weights for its CPU kernels at load.
//
// Ownership: the copies go into one anonymous allocation that `weights`
// then owns (packed_storage); each repacked WeightView keeps `data` (the
// file's rows, still read by DequantizeRow and by ISAs without packed
// kernels) and gains `packed`.
// Cost: one pass over the repacked matrices, split over `pool`; memory:
// their size again, unless the caller releases the file pages of each
// matrix once it is copied (Model::Load does, from on_packed).
// Thread-safety: not thread-safe; call before sharing the weights.
#ifndef REDLINE_MODEL_ARCH_REPACK_H_
#define REDLINE_MODEL_ARCH_REPACK_H_

#include <functional>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/arch/weights.h"

namespace redline::model {

// Repacks every matrix whose type kernels::PackedLayoutHelps. After each
// matrix, `on_packed` (may be empty) gets its view (with `packed` not yet
// set) and the fraction of repacked bytes done so far, in (0, 1].
// Errors: ResourceExhausted when the memory cannot be had (or, with
// `lock`, pinned).
using OnPackedFn =
    std::function<void(const kernels::WeightView& matrix, double done)>;
Status RepackWeights(ModelWeights* weights, ThreadPool& pool, bool lock,
                     const OnPackedFn& on_packed);

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_REPACK_H_

// ModelWeights: typed views of a transformer's tensors inside a GGUF file.
//
// Ownership: 2-D weights point into the GgufFile's memory map (not copied);
// 1-D tensors (norms, biases, rope factors) are converted to owned f32
// vectors at load. The GgufFile must outlive the weights. RepackWeights
// may then point matrices at copies (WeightView::packed, or `data` itself
// for the file's layout) that live in packed_storage, owned here.
// Thread-safety: immutable after LoadWeights.
#ifndef REDLINE_MODEL_ARCH_WEIGHTS_H_
#define REDLINE_MODEL_ARCH_WEIGHTS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"
#include "kernels/dtype.h"
#include "model/arch/model_config.h"
#include "model/gguf/gguf.h"

namespace redline::model {

struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  kernels::WeightView wq;        // [q_dim, n_embd]
  kernels::WeightView wk;        // [kv_dim, n_embd]
  kernels::WeightView wv;        // [kv_dim, n_embd]
  kernels::WeightView wo;        // [n_embd, q_dim]
  std::vector<float> bq, bk,
      bv;  // [q_dim], [kv_dim], [kv_dim]; empty without biases
  std::vector<float> ffn_norm;  // [n_embd]
  kernels::WeightView w_gate;   // [n_ff, n_embd]
  kernels::WeightView w_up;     // [n_ff, n_embd]
  kernels::WeightView w_down;   // [n_embd, n_ff]

  // The seven matrices, for code that treats them alike.
  std::array<const kernels::WeightView*, 7> Matrices() const {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
  std::array<kernels::WeightView*, 7> Matrices() {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
};

struct ModelWeights {
  kernels::WeightView token_embd;  // [vocab, n_embd]
  std::vector<float> output_norm;  // [n_embd]
  kernels::WeightView output;      // [vocab, n_embd]; == token_embd when tied
  std::vector<float> rope_freqs;   // [head_dim / 2] divisors; empty = all 1
  std::vector<LayerWeights> layers;
  // Holds the copies made by RepackWeights; null when none was made.
  std::shared_ptr<const uint8_t> packed_storage;
  int64_t packed_bytes = 0;  // size of packed_storage

  // Bytes of weights read by one decode step (every matrix once plus one
  // embedding row): the numerator of the roofline share.
  int64_t DecodeBytesPerToken() const;
  // Total bytes of all matrices (embedding counted once when tied).
  int64_t MatrixBytes() const;
};

// Finds, type-checks and shape-checks every tensor the architecture needs.
// Fills config->vocab_size and config->tied_embeddings. Errors name the
// tensor: "tensor blk.3.attn_k.weight has shape [896, 256], expected [896,
// 128]".
Result<ModelWeights> LoadWeights(const gguf::GgufFile& file,
                                 ModelConfig* config);

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_WEIGHTS_H_

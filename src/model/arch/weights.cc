#include "model/arch/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/matmul.h"

namespace redline::model {
namespace {

using gguf::TensorType;

Result<kernels::DType> ToDType(const gguf::TensorInfo& t) {
  switch (t.type) {
    case TensorType::kF32:
      return kernels::DType::kF32;
    case TensorType::kF16:
      return kernels::DType::kF16;
    case TensorType::kBF16:
      return kernels::DType::kBF16;
    case TensorType::kQ8_0:
      return kernels::DType::kQ8_0;
    case TensorType::kQ4_0:
      return kernels::DType::kQ4_0;
    case TensorType::kQ4_1:
      return kernels::DType::kQ4_1;
    case TensorType::kQ5_0:
      return kernels::DType::kQ5_0;
    case TensorType::kQ5_1:
      return kernels::DType::kQ5_1;
    case TensorType::kIQ4_NL:
      return kernels::DType::kIQ4_NL;
    case TensorType::kQ2_K:
      return kernels::DType::kQ2_K;
    case TensorType::kQ3_K:
      return kernels::DType::kQ3_K;
    case TensorType::kQ4_K:
      return kernels::DType::kQ4_K;
    case TensorType::kQ5_K:
      return kernels::DType::kQ5_K;
    case TensorType::kQ6_K:
      return kernels::DType::kQ6_K;
    default:
      return Status::Unimplemented(
          fmt::format("tensor {} has type {}, not supported yet", t.name,
                      gguf::TensorTypeName(t.type)));
  }
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

class Loader {
 public:
  explicit Loader(const gguf::GgufFile& f) : file_(f) {}

  const gguf::TensorInfo* Find(const std::string& name) const {
    return file_.FindTensor(name);
  }

  // A matrix [rows, cols] (ggml dims {cols, rows}).
  Result<kernels::WeightView> Matrix(const std::string& name, int64_t rows,
                                     int64_t cols) const {
    const gguf::TensorInfo* t = Find(name);
    if (t == nullptr) return Status::NotFound("missing tensor " + name);
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      return Status::InvalidArgument(
          fmt::format("tensor {} has shape {}, expected [{}, {}]", name,
                      ShapeString(t->dims), cols, rows));
    }
    RL_ASSIGN_OR_RETURN(kernels::DType type, ToDType(*t));
    if (cols % kernels::BlockElements(type) != 0) {
      return Status::InvalidArgument(fmt::format(
          "tensor {}: row length {} is not a multiple of the {} block", name,
          cols, kernels::DTypeName(type)));
    }
    if (t->data == nullptr)
      return Status::InvalidArgument("tensor " + name + " has no data");
    return kernels::WeightView{type, rows, cols, t->data};
  }

  // A vector [n] converted to f32.
  Result<std::vector<float>> Vector(const std::string& name, int64_t n) const {
    const gguf::TensorInfo* t = Find(name);
    if (t == nullptr) return Status::NotFound("missing tensor " + name);
    if (t->dims.size() != 1 || t->dims[0] != n) {
      return Status::InvalidArgument(
          fmt::format("tensor {} has shape {}, expected [{}]", name,
                      ShapeString(t->dims), n));
    }
    RL_ASSIGN_OR_RETURN(kernels::DType type, ToDType(*t));
    if (n % kernels::BlockElements(type) != 0) {
      return Status::InvalidArgument("tensor " + name +
                                     ": length is not a multiple of its block");
    }
    std::vector<float> out(n);
    kernels::DequantizeRow(kernels::WeightView{type, 1, n, t->data}, 0,
                           out.data());
    return out;
  }

 private:
  const gguf::GgufFile& file_;
};

}  // namespace

int64_t ModelWeights::MatrixBytes() const {
  auto bytes = [](const kernels::WeightView& w) {
    return w.rows * kernels::RowBytes(w.type, w.cols);
  };
  int64_t total = bytes(token_embd);
  if (output.data != token_embd.data) total += bytes(output);
  for (const LayerWeights& l : layers) {
    for (const kernels::WeightView* m : l.Matrices()) total += bytes(*m);
  }
  return total;
}

int64_t ModelWeights::DecodeBytesPerToken() const {
  auto bytes = [](const kernels::WeightView& w) {
    return w.rows * kernels::RowBytes(w.type, w.cols);
  };
  int64_t total =
      kernels::RowBytes(token_embd.type, token_embd.cols) + bytes(output);
  for (const LayerWeights& l : layers) {
    for (const kernels::WeightView* m : l.Matrices()) total += bytes(*m);
  }
  return total;
}

Result<ModelWeights> LoadWeights(const gguf::GgufFile& file,
                                 ModelConfig* config) {
  ModelConfig& c = *config;
  Loader ld(file);
  ModelWeights w;
  const gguf::TensorInfo* embd = ld.Find("token_embd.weight");
  if (embd == nullptr)
    return Status::NotFound("missing tensor token_embd.weight");
  if (embd->dims.size() != 2 || embd->dims[0] != c.embedding_length ||
      embd->dims[1] < 1) {
    return Status::InvalidArgument(fmt::format(
        "tensor token_embd.weight has shape {}, expected [{}, n_vocab]",
        ShapeString(embd->dims), c.embedding_length));
  }
  c.vocab_size = embd->dims[1];
  const int64_t n_embd = c.embedding_length;
  RL_ASSIGN_OR_RETURN(w.token_embd,
                      ld.Matrix("token_embd.weight", c.vocab_size, n_embd));
  RL_ASSIGN_OR_RETURN(w.output_norm, ld.Vector("output_norm.weight", n_embd));
  if (ld.Find("output.weight") != nullptr) {
    c.tied_embeddings = false;
    RL_ASSIGN_OR_RETURN(w.output,
                        ld.Matrix("output.weight", c.vocab_size, n_embd));
  } else {
    c.tied_embeddings = true;
    w.output = w.token_embd;
  }
  if (ld.Find("rope_freqs.weight") != nullptr) {
    RL_ASSIGN_OR_RETURN(w.rope_freqs,
                        ld.Vector("rope_freqs.weight", c.head_dim / 2));
    for (float f : w.rope_freqs) {
      if (!(f > 0.0f) || f > 1e6f)
        return Status::InvalidArgument(
            "rope_freqs.weight holds a non-positive factor");
    }
  }
  w.layers.resize(c.block_count);
  for (int64_t i = 0; i < c.block_count; ++i) {
    LayerWeights& l = w.layers[i];
    const std::string b = fmt::format("blk.{}.", i);
    RL_ASSIGN_OR_RETURN(l.attn_norm, ld.Vector(b + "attn_norm.weight", n_embd));
    RL_ASSIGN_OR_RETURN(l.wq,
                        ld.Matrix(b + "attn_q.weight", c.q_dim(), n_embd));
    RL_ASSIGN_OR_RETURN(l.wk,
                        ld.Matrix(b + "attn_k.weight", c.kv_dim(), n_embd));
    RL_ASSIGN_OR_RETURN(l.wv,
                        ld.Matrix(b + "attn_v.weight", c.kv_dim(), n_embd));
    RL_ASSIGN_OR_RETURN(l.wo,
                        ld.Matrix(b + "attn_output.weight", n_embd, c.q_dim()));
    if (c.has_qkv_bias) {
      RL_ASSIGN_OR_RETURN(l.bq, ld.Vector(b + "attn_q.bias", c.q_dim()));
      RL_ASSIGN_OR_RETURN(l.bk, ld.Vector(b + "attn_k.bias", c.kv_dim()));
      RL_ASSIGN_OR_RETURN(l.bv, ld.Vector(b + "attn_v.bias", c.kv_dim()));
    }
    RL_ASSIGN_OR_RETURN(l.ffn_norm, ld.Vector(b + "ffn_norm.weight", n_embd));
    RL_ASSIGN_OR_RETURN(l.w_gate, ld.Matrix(b + "ffn_gate.weight",
                                            c.feed_forward_length, n_embd));
    RL_ASSIGN_OR_RETURN(
        l.w_up, ld.Matrix(b + "ffn_up.weight", c.feed_forward_length, n_embd));
    RL_ASSIGN_OR_RETURN(l.w_down, ld.Matrix(b + "ffn_down.weight", n_embd,
                                            c.feed_forward_length));
  }
  return w;
}

}  // namespace redline::model

#include "model/arch/model_config.h"

#include <fmt/format.h>

namespace redline::model {
namespace {

Result<int64_t> RequiredInt(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.GetInt(key);
  if (!v.ok())
    return Status::InvalidArgument("missing or invalid metadata key " + key +
                                   ": " + v.status().message());
  return *v;
}

}  // namespace

std::string_view ArchName(Arch arch) {
  return arch == Arch::kQwen2 ? "qwen2" : "llama";
}

Result<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& file) {
  ModelConfig c;
  auto arch = file.GetString("general.architecture");
  if (!arch.ok())
    return Status::InvalidArgument("missing metadata key general.architecture");
  c.arch_name = *arch;
  if (c.arch_name == "llama" || c.arch_name == "mistral") {
    c.arch = Arch::kLlama;
    c.rope_style = kernels::RopeStyle::kNorm;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::kQwen2;
    c.rope_style = kernels::RopeStyle::kNeox;
    c.has_qkv_bias = true;
  } else {
    return Status::Unimplemented(fmt::format(
        "architecture '{}' is not supported (supported: llama, mistral, qwen2)",
        c.arch_name));
  }
  if (auto name = file.GetString("general.name"); name.ok()) c.name = *name;
  const std::string p = c.arch_name + ".";
  RL_ASSIGN_OR_RETURN(c.embedding_length,
                      RequiredInt(file, p + "embedding_length"));
  RL_ASSIGN_OR_RETURN(c.block_count, RequiredInt(file, p + "block_count"));
  RL_ASSIGN_OR_RETURN(c.feed_forward_length,
                      RequiredInt(file, p + "feed_forward_length"));
  RL_ASSIGN_OR_RETURN(c.head_count,
                      RequiredInt(file, p + "attention.head_count"));
  c.head_count_kv = c.head_count;
  if (auto v = file.GetInt(p + "attention.head_count_kv"); v.ok())
    c.head_count_kv = *v;
  if (auto v = file.GetInt(p + "context_length"); v.ok())
    c.context_length_train = *v;
  if (auto v = file.GetFloat(p + "attention.layer_norm_rms_epsilon"); v.ok()) {
    c.rms_norm_eps = static_cast<float>(*v);
  }
  if (auto v = file.GetFloat(p + "rope.freq_base"); v.ok())
    c.rope_freq_base = static_cast<float>(*v);

  // Sizes beyond these are not plausible models; they protect the
  // allocations sized from them (KV cache, scratch) from hostile files.
  constexpr int64_t kMaxDim = 1 << 17;
  constexpr int64_t kMaxLayers = 1024;
  auto in_range = [](int64_t v, int64_t hi) { return v >= 1 && v <= hi; };
  if (!in_range(c.embedding_length, kMaxDim) ||
      !in_range(c.block_count, kMaxLayers) ||
      !in_range(c.feed_forward_length, 8 * kMaxDim) ||
      !in_range(c.head_count, 4096) || !in_range(c.head_count_kv, 4096)) {
    return Status::InvalidArgument(
        fmt::format("implausible model sizes: embedding_length={} "
                    "block_count={} feed_forward_length={} "
                    "head_count={} head_count_kv={}",
                    c.embedding_length, c.block_count, c.feed_forward_length,
                    c.head_count, c.head_count_kv));
  }
  if (c.head_count % c.head_count_kv != 0) {
    return Status::InvalidArgument(
        fmt::format("head_count {} is not a multiple of head_count_kv {}",
                    c.head_count, c.head_count_kv));
  }
  c.head_dim = c.embedding_length / c.head_count;
  if (auto v = file.GetInt(p + "attention.key_length"); v.ok()) c.head_dim = *v;
  if (auto v = file.GetInt(p + "attention.value_length");
      v.ok() && *v != c.head_dim) {
    return Status::Unimplemented(
        "attention.value_length != attention.key_length is not supported");
  }
  if (c.head_dim < 2 || c.head_dim % 2 != 0 || c.head_dim > 1024) {
    return Status::InvalidArgument(fmt::format(
        "head dimension {} must be even and in [2, 1024]", c.head_dim));
  }
  c.rope_dimension_count = c.head_dim;
  if (auto v = file.GetInt(p + "rope.dimension_count"); v.ok())
    c.rope_dimension_count = *v;
  if (c.rope_dimension_count != c.head_dim) {
    return Status::Unimplemented(
        fmt::format("partial RoPE (rope.dimension_count {} != head dim {}) is "
                    "not supported",
                    c.rope_dimension_count, c.head_dim));
  }
  if (!(c.rms_norm_eps > 0.0f && c.rms_norm_eps < 1.0f)) {
    return Status::InvalidArgument(
        fmt::format("rms epsilon {} out of range", c.rms_norm_eps));
  }
  if (!(c.rope_freq_base > 1.0f)) {
    return Status::InvalidArgument(
        fmt::format("rope.freq_base {} out of range", c.rope_freq_base));
  }
  if (auto scaling = file.GetString(p + "rope.scaling.type");
      scaling.ok() && *scaling != "none") {
    return Status::Unimplemented("rope scaling type '" + *scaling +
                                 "' is not supported");
  }
  return c;
}

}  // namespace redline::model

#include "model/gguf/gguf_test_util.h"

#include <bit>
#include <cstring>
#include <memory>

namespace redline::model::gguf::testing {

bool ValuesEqual(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type == ValueType::kArray) {
    if (a.array_type != b.array_type) return false;
    const Array& x = a.AsArray();
    const Array& y = b.AsArray();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!ValuesEqual(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_float()) {
    return std::bit_cast<uint64_t>(std::get<double>(a.data)) ==
           std::bit_cast<uint64_t>(std::get<double>(b.data));
  }
  if (a.is_integer()) return a.AsInt() == b.AsInt();
  return a.data == b.data;
}

std::vector<uint8_t> PatternBytes(uint32_t seed, size_t n) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

std::function<void(std::span<uint8_t>)> PatternFill(uint32_t seed) {
  return [seed](std::span<uint8_t> dst) {
    const std::vector<uint8_t> src = PatternBytes(seed, dst.size());
    std::memcpy(dst.data(), src.data(), src.size());
  };
}

GgufWriter CopyToWriter(const GgufFile& file) {
  GgufWriter w;
  for (const auto& [key, value] : file.metadata()) w.Set(key, value);
  w.SetAlignment(file.alignment());
  for (const TensorInfo& t : file.tensors()) {
    const uint8_t* src = t.data;
    w.AddTensor(t.name, t.type, t.dims, [src](std::span<uint8_t> dst) {
      std::memcpy(dst.data(), src, dst.size());
    });
  }
  return w;
}

namespace {

void AddSmallVocab(GgufWriter& w) {
  w.Set("tokenizer.ggml.model", Value::Str("gpt2"));
  w.Set("tokenizer.ggml.tokens", Value::StrArray({"<s>", "</s>", "a", "b", "ab",
                                                  "\xc4\xa0"
                                                  "a"}));
  w.Set("tokenizer.ggml.scores",
        Value::F32Array({0.f, 0.f, -1.f, -2.f, -3.f, -4.f}));
  w.Set("tokenizer.ggml.token_type", Value::I32Array({3, 3, 1, 1, 1, 1}));
  w.Set("tokenizer.ggml.merges", Value::StrArray({"a b", "\xc4\xa0 a"}));
  w.Set("tokenizer.ggml.bos_token_id", Value::U32(0));
  w.Set("tokenizer.ggml.eos_token_id", Value::U32(1));
}

}  // namespace

std::vector<std::pair<std::string, GgufWriter>> SeedWriters() {
  std::vector<std::pair<std::string, GgufWriter>> seeds;
  {
    GgufWriter w;
    w.Set("general.architecture", Value::Str("llama"));
    w.Set("general.name", Value::Str("seed"));
    w.Set("llama.context_length", Value::U32(128));
    w.Set("llama.embedding_length", Value::U32(32));
    w.Set("llama.block_count", Value::U32(1));
    w.Set("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5f));
    AddSmallVocab(w);
    w.AddTensor("token_embd.weight", TensorType::kF32, {32, 6}, PatternFill(1));
    w.AddTensor("output_norm.weight", TensorType::kF32, {32}, PatternFill(2));
    w.AddTensor("blk.0.attn_q.weight", TensorType::kF16, {32, 8},
                PatternFill(3));
    seeds.emplace_back("tiny_llama.bin", std::move(w));
  }
  {
    GgufWriter w;
    w.Set("u8", Value::U8(200));
    w.Set("i8", Value::I8(-100));
    w.Set("u16", Value::U16(60000));
    w.Set("i16", Value::I16(-30000));
    w.Set("u32", Value::U32(4000000000u));
    w.Set("i32", Value::I32(-2000000000));
    w.Set("f32", Value::F32(3.5f));
    w.Set("bool", Value::Bool(true));
    w.Set("str", Value::Str("h\xc3\xa9llo"));
    w.Set("u64", Value::U64(~uint64_t{0}));
    w.Set("i64", Value::I64(-(int64_t{1} << 62)));
    w.Set("f64", Value::F64(-0.125));
    w.Set("arr.u8",
          Value::ArrayOf(ValueType::kUint8, {Value::U8(1), Value::U8(2)}));
    w.Set("arr.bool", Value::ArrayOf(ValueType::kBool,
                                     {Value::Bool(false), Value::Bool(true)}));
    w.Set("arr.f64", Value::ArrayOf(ValueType::kFloat64, {Value::F64(1.5)}));
    w.Set("arr.empty", Value::ArrayOf(ValueType::kInt64, {}));
    w.Set("arr.nested",
          Value::ArrayOf(ValueType::kArray,
                         {Value::ArrayOf(ValueType::kUint16, {Value::U16(7)}),
                          Value::StrArray({"x", ""})}));
    w.AddTensor("t", TensorType::kBF16, {8}, PatternFill(4));
    seeds.emplace_back("all_value_types.bin", std::move(w));
  }
  {
    GgufWriter w;
    w.Set("general.architecture", Value::Str("qwen2"));
    w.SetAlignment(64);
    w.AddTensor("blk.0.ffn_up.weight", TensorType::kQ8_0, {64, 2},
                PatternFill(5));
    w.AddTensor("blk.0.ffn_down.weight", TensorType::kQ4_0, {32, 3},
                PatternFill(6));
    w.AddTensor("blk.0.attn_q.bias", TensorType::kBF16, {16, 2},
                PatternFill(7));
    seeds.emplace_back("quantized_align64.bin", std::move(w));
  }
  {
    GgufWriter w;
    w.Set("general.architecture", Value::Str("llama"));
    w.SetAlignment(16);
    w.AddTensor("blk.0.ffn_down.weight", TensorType::kQ4_K, {256},
                PatternFill(8));
    w.AddTensor("blk.0.ffn_gate.weight", TensorType::kQ6_K, {256},
                PatternFill(9));
    w.AddTensor("ids", TensorType::kI32, {4}, PatternFill(10));
    w.AddTensor("f64", TensorType::kF64, {2, 1, 1}, PatternFill(11));
    seeds.emplace_back("unsupported_types_align16.bin", std::move(w));
  }
  {
    GgufWriter w;
    w.Set("general.architecture", Value::Str("llama"));
    AddSmallVocab(w);
    w.Set("tokenizer.ggml.add_bos_token", Value::Bool(true));
    w.Set("tokenizer.chat_template",
          Value::Str("{% for m in messages %}{{ m.content }}{% endfor %}"));
    seeds.emplace_back("vocab_only.bin", std::move(w));
  }
  return seeds;
}

RawBytes& RawBytes::U8(uint8_t v) {
  bytes_.push_back(v);
  return *this;
}

RawBytes& RawBytes::U32(uint32_t v) {
  for (int i = 0; i < 4; ++i)
    bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return *this;
}

RawBytes& RawBytes::U64(uint64_t v) {
  for (int i = 0; i < 8; ++i)
    bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return *this;
}

RawBytes& RawBytes::I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }

RawBytes& RawBytes::Str(std::string_view s) {
  U64(s.size());
  bytes_.insert(bytes_.end(), s.begin(), s.end());
  return *this;
}

RawBytes& RawBytes::Bytes(size_t n, uint8_t fill) {
  bytes_.insert(bytes_.end(), n, fill);
  return *this;
}

RawBytes& RawBytes::Header(uint32_t version, uint64_t tensor_count,
                           uint64_t kv_count) {
  bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
  return U32(version).U64(tensor_count).U64(kv_count);
}

}  // namespace redline::model::gguf::testing

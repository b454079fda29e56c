// The fast forward pass against a plain float reference kept here: naive
// loops, weights dequantized to float, no batching, no SIMD.
#include "model/arch/transformer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "base/float16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "model/arch/model.h"
#include "model/arch/synthetic.h"

namespace redline::model {
namespace {

using kernels::DType;

// How the reference holds K and V and attends over them.
enum class RefKv {
  kExact,     // f32 values, exact f64 attention
  kHalf,      // rounded to binary16, exact f64 attention (the f16 cache)
  kQ8_0,      // rounded to q8_0 blocks, exact f64 attention (the q8_0 cache)
  kGgmlHalf,  // binary16, kernels::AttentionHeadF16's arithmetic written out
};

// Reference transformer over dequantized weights.
class ReferenceModel {
 public:
  // round_activations: round the input of every Q8_0/Q4_0 product to Q8_0
  // blocks, and of every F16 product to binary16, first, as ggml and
  // Redline's fast path do; otherwise pure float.
  // kv: how the cache holds K and V, and the attention over them.
  ReferenceModel(const Model& m, bool round_activations,
                 RefKv kv = RefKv::kExact)
      : c_(m.config()),
        w_(m.weights()),
        round_activations_(round_activations),
        kv_(kv) {}

  // Logits [n_tokens][vocab] for every position of `tokens` from position 0.
  std::vector<std::vector<float>> Run(const std::vector<int32_t>& tokens) {
    const int64_t d = c_.embedding_length, hd = c_.head_dim,
                  n = static_cast<int64_t>(tokens.size());
    std::vector<std::vector<float>> x(n, std::vector<float>(d));
    for (int64_t t = 0; t < n; ++t) x[t] = Row(w_.token_embd, tokens[t]);
    for (int64_t li = 0; li < c_.block_count; ++li) {
      const LayerWeights& l = w_.layers[li];
      std::vector<std::vector<float>> q(n), k(n), v(n), att(n);
      for (int64_t t = 0; t < n; ++t) {
        auto xn = Norm(x[t], l.attn_norm);
        q[t] = MatVec(l.wq, xn, l.bq);
        k[t] = MatVec(l.wk, xn, l.bk);
        v[t] = MatVec(l.wv, xn, l.bv);
        RopeRef(q[t], c_.head_count, t);
        RopeRef(k[t], c_.head_count_kv, t);
        if (kv_ == RefKv::kHalf || kv_ == RefKv::kQ8_0) {
          RoundToCache(k[t]);
          RoundToCache(v[t]);
        }
      }
      const int64_t group = c_.head_count / c_.head_count_kv;
      for (int64_t t = 0; t < n; ++t) {
        att[t].assign(c_.q_dim(), 0.0f);
        for (int64_t h = 0; h < c_.head_count; ++h) {
          const int64_t g = h / group;
          if (kv_ == RefKv::kGgmlHalf) {
            HalfAttention(q[t].data() + h * hd, k, v, g * hd, t + 1,
                          att[t].data() + h * hd);
            continue;
          }
          std::vector<double> s(t + 1);
          double mx = -1e300;
          for (int64_t p = 0; p <= t; ++p) {
            double dot = 0;
            for (int64_t i = 0; i < hd; ++i)
              dot += double(q[t][h * hd + i]) * k[p][g * hd + i];
            s[p] = dot / std::sqrt(double(hd));
            mx = std::max(mx, s[p]);
          }
          double sum = 0;
          for (auto& e : s) sum += (e = std::exp(e - mx));
          for (int64_t p = 0; p <= t; ++p) {
            for (int64_t i = 0; i < hd; ++i)
              att[t][h * hd + i] += float(s[p] / sum * v[p][g * hd + i]);
          }
        }
        auto o = MatVec(l.wo, att[t], {});
        for (int64_t i = 0; i < d; ++i) x[t][i] += o[i];
        auto xn = Norm(x[t], l.ffn_norm);
        auto gate = MatVec(l.w_gate, xn, {});
        auto up = MatVec(l.w_up, xn, {});
        for (size_t i = 0; i < gate.size(); ++i)
          gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
        auto down = MatVec(l.w_down, gate, {});
        for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
      }
    }
    std::vector<std::vector<float>> logits(n);
    for (int64_t t = 0; t < n; ++t)
      logits[t] = MatVec(w_.output, Norm(x[t], w_.output_norm), {});
    return logits;
  }

 private:
  std::vector<float> Row(const kernels::WeightView& w, int64_t r) {
    auto key = std::make_pair(w.data, r);
    auto it = rows_.find(key);
    if (it != rows_.end()) return it->second;
    std::vector<float> out(w.cols);
    kernels::DequantizeRow(w, r, out.data());
    return rows_[key] = out;
  }
  // x rounded to Q8_0 blocks as ggml's x86 code does: d = max|x|/127 stored
  // as binary16, q = x * (127 / max|x|) rounded half to even.
  // The input of an F16 product, as kernels::MatMul documents it.
  static std::vector<float> RoundToHalf(const std::vector<float>& x) {
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      out[i] = Half(std::clamp(x[i], -65504.0f, 65504.0f));
    return out;
  }
  static std::vector<float> RoundToQ8(const std::vector<float>& x) {
    std::vector<float> out(x.size());
    for (size_t b = 0; b < x.size(); b += 32) {
      float amax = 0;
      for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::abs(x[i]));
      const float d = amax / 127.0f;
      const float id = amax != 0 ? 127.0f / amax : 0.0f;
      const float d16 = Fp16ToFp32(Fp32ToFp16(d));
      for (size_t i = b; i < b + 32; ++i)
        out[i] = std::nearbyint(x[i] * id) * d16;
    }
    return out;
  }
  std::vector<float> MatVec(const kernels::WeightView& w,
                            const std::vector<float>& x_in,
                            const std::vector<float>& b) {
    const bool quantized = kernels::IsQuantized(w.type);
    const bool half = w.type == kernels::DType::kF16;
    const std::vector<float> x = !round_activations_ ? x_in
                                 : quantized         ? RoundToQ8(x_in)
                                 : half              ? RoundToHalf(x_in)
                                                     : x_in;
    std::vector<float> y(w.rows);
    for (int64_t r = 0; r < w.rows; ++r) {
      auto row = Row(w, r);
      double acc = 0;
      for (int64_t c = 0; c < w.cols; ++c) acc += double(row[c]) * x[c];
      y[r] = float(acc) + (b.empty() ? 0.0f : b[r]);
    }
    return y;
  }
  std::vector<float> Norm(const std::vector<float>& x,
                          const std::vector<float>& w) {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + c_.rms_norm_eps);
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = float(x[i] * inv) * w[i];
    return out;
  }
  static float Half(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

  // One head over positions [0, n_kv): q, k, v rounded to binary16; one
  // pass with a running max and a binary16 output accumulator.
  void HalfAttention(const float* q, const std::vector<std::vector<float>>& k,
                     const std::vector<std::vector<float>>& v, int64_t offset,
                     int64_t n_kv, float* out) {
    const int64_t hd = c_.head_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> acc(hd, 0.0f);
    float max = -INFINITY, sum = 0.0f;
    for (int64_t p = 0; p < n_kv; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < hd; ++i)
        dot += double(Half(q[i])) * Half(k[p][offset + i]);
      const float s = static_cast<float>(dot) * scale;
      float ms = 1.0f, vs = 1.0f;
      if (s > max) {
        ms = std::exp(max - s);
        max = s;
        for (float& a : acc) a = Half(a * ms);
      } else {
        vs = std::exp(s - max);
      }
      for (int64_t i = 0; i < hd; ++i)
        acc[i] = Half(std::fma(Half(v[p][offset + i]), vs, acc[i]));
      sum = sum * ms + vs;
    }
    for (int64_t i = 0; i < hd; ++i) out[i] = acc[i] * (1.0f / sum);
  }

  // x rounded to the cache's binary16 values or q8_0 blocks.
  void RoundToCache(std::vector<float>& x) {
    if (kv_ == RefKv::kHalf) {
      for (float& f : x) f = Half(f);
      return;
    }
    std::vector<std::byte> blocks(x.size() / 32 * 34);
    kernels::QuantizeRow(DType::kQ8_0, x.data(), int64_t(x.size()),
                         blocks.data());
    kernels::WeightView w;
    w.type = DType::kQ8_0;
    w.rows = 1;
    w.cols = int64_t(x.size());
    w.data = blocks.data();
    kernels::DequantizeRow(w, 0, x.data());
  }

  void RopeRef(std::vector<float>& x, int64_t heads, int64_t pos) {
    const int64_t hd = c_.head_dim;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < hd / 2; ++i) {
        double freq = std::pow(double(c_.rope_freq_base), -2.0 * i / hd);
        if (!w_.rope_freqs.empty()) freq /= w_.rope_freqs[i];
        const double a = pos * freq;
        const int64_t i0 =
            c_.rope_style == kernels::RopeStyle::kNorm ? 2 * i : i;
        const int64_t i1 =
            c_.rope_style == kernels::RopeStyle::kNorm ? 2 * i + 1 : i + hd / 2;
        const double x0 = x[h * hd + i0], x1 = x[h * hd + i1];
        x[h * hd + i0] = float(x0 * std::cos(a) - x1 * std::sin(a));
        x[h * hd + i1] = float(x0 * std::sin(a) + x1 * std::cos(a));
      }
    }
  }

  const ModelConfig& c_;
  const ModelWeights& w_;
  bool round_activations_;
  RefKv kv_;
  std::map<std::pair<const void*, int64_t>, std::vector<float>> rows_;
};

// The models TempModel wrote, removed when the test process exits (each
// process writes its own, so nothing else reads them then).
struct TempModels {
  std::vector<std::string> paths;
  ~TempModels() {
    std::error_code ec;
    for (const std::string& p : paths) std::filesystem::remove(p, ec);
  }
};
TempModels& WrittenModels() {
  static TempModels models;
  return models;
}

std::string TempModel(const std::string& preset, DType type) {
  // One file per process: ctest runs the tests of this binary in parallel
  // processes, which must not write the same file at once.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("redline_transformer_test_" + preset + "_" +
                             std::string(kernels::DTypeName(type)) + "_" +
                             std::to_string(::getpid()) + ".gguf"))
                               .string();
  if (!std::filesystem::exists(path)) {
    ThreadPool pool(2);
    // tiny-hd32: tiny with two heads of 32 sharing one KV head;
    // tiny-hd32-kv2: the same with a KV head each.
    const bool hd32 = preset == "tiny-hd32" || preset == "tiny-hd32-kv2";
    auto spec = SyntheticPreset(hd32 ? "tiny" : preset);
    EXPECT_TRUE(spec.ok());
    if (hd32) {
      spec->head_count = 2;
      spec->head_count_kv = preset == "tiny-hd32" ? 1 : 2;
    }
    EXPECT_TRUE(WriteSyntheticModel(*spec, type, 7, path, pool).ok());
    WrittenModels().paths.push_back(path);
  }
  return path;
}

// Max |logit difference| allowed, per weight type. Logits have a standard
// deviation of ~8 in synthetic models. Against the reference that rounds
// activations the same way, only summation order differs — except that an
// activation within ~1e-6 of a rounding boundary can round the other way:
// one 8-bit step, which moved logits by up to 0.34 (tiny, q4_0). Typical
// runs differ by ~2e-6.
double Tolerance(DType t) {
  switch (t) {
    case DType::kF32:
      return 2e-3;
    case DType::kF16:
      // F16 products round their input to binary16 (11 bits): an activation
      // at a rounding boundary flips one binary16 step with summation order,
      // moving logits by ~0.01 (measured 0.0126 on tiny, every SIMD ISA).
      return 0.05;
    case DType::kBF16:
      return 2e-3;
    case DType::kQ8_0:
      return 0.5;
    default:  // block types
      return 0.5;
  }
}
// Against the pure float reference, Q8_0/Q4_0 also carry the error of
// rounding every product's input to 8 bits (~1/254 of each block's max):
// measured ~0.4-0.6 on the tiny models; bound 1.0 (1/8 of a logit's std).
// F16 likewise carries binary16 input rounding (measured 0.016-0.019).
double FloatTolerance(DType t) {
  return (t == DType::kQ8_0 || t == DType::kQ4_0) ? 1.0 : Tolerance(t);
}

struct Case {
  std::string preset;
  DType type;
  kernels::Isa isa;
  KvType kv_type = KvType::kF32;
  bool ggml_attention = false;  // Transformer::set_ggml_f16_attention
};

RefKv RefKvOf(const Case& tc) {
  switch (tc.kv_type) {
    case KvType::kF32:
      return RefKv::kExact;
    case KvType::kF16:
      return tc.ggml_attention ? RefKv::kGgmlHalf : RefKv::kHalf;
    case KvType::kQ8_0:
      return RefKv::kQ8_0;
  }
  return RefKv::kExact;
}

class TransformerVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(TransformerVsReference, LogitsMatchForPrefillAndDecode) {
  const Case& tc = GetParam();
  ASSERT_TRUE(kernels::SetActiveIsa(tc.isa));
  auto m = Model::Load(TempModel(tc.preset, tc.type));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  const std::vector<int32_t> tokens = {1,   300, 301, 17,  455, 262, 263,
                                       390, 5,   499, 270, 271, 272};
  ReferenceModel ref(**m, /*round_activations=*/true, RefKvOf(tc));
  auto expected = ref.Run(tokens);
  ReferenceModel float_ref(**m, /*round_activations=*/false, RefKvOf(tc));
  auto expected_float = float_ref.Run(tokens);

  ThreadPool pool(2);
  // A batch limit of 5 splits the 13-token prefill into chunks.
  Transformer tf(c, (*m)->weights(), pool, 5);
  tf.set_ggml_f16_attention(tc.ggml_attention);
  KvCache cache = tf.NewCache(64, tc.kv_type);
  std::vector<float> logits(c.vocab_size);
  // Prefill the first 9 tokens at once, then decode the rest one by one.
  double max_diff = 0, max_float_diff = 0;
  auto compare = [&](size_t t) {
    for (int64_t i = 0; i < c.vocab_size; ++i) {
      max_diff =
          std::max<double>(max_diff, std::abs(logits[i] - expected[t][i]));
      max_float_diff = std::max<double>(
          max_float_diff, std::abs(logits[i] - expected_float[t][i]));
    }
  };
  ASSERT_TRUE(
      tf.ForwardSequence(std::span(tokens).first(9), 0, cache, logits).ok());
  compare(8);
  for (size_t t = 9; t < tokens.size(); ++t) {
    ASSERT_TRUE(
        tf.ForwardSequence(std::span(&tokens[t], 1), t, cache, logits).ok());
    compare(t);
  }
  RecordProperty("maxdiff", std::to_string(max_diff));
  std::printf(
      "%s %s %s kv %s: max |logit diff| = %.3g vs reference (tolerance %.3g), "
      "%.3g vs float reference (%.3g)\n",
      tc.preset.c_str(), std::string(kernels::DTypeName(tc.type)).c_str(),
      std::string(kernels::IsaName(tc.isa)).c_str(),
      std::string(KvTypeName(tc.kv_type)).c_str(), max_diff, Tolerance(tc.type),
      max_float_diff, FloatTolerance(tc.type));
  EXPECT_LE(max_diff, Tolerance(tc.type));
  EXPECT_LE(max_float_diff, FloatTolerance(tc.type));
  kernels::SetActiveIsa(kernels::AvailableIsas().back());
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const char* preset : {"tiny", "tiny-qwen2"}) {
    for (DType t :
         {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
      for (kernels::Isa isa : kernels::AvailableIsas())
        cases.push_back({preset, t, isa});
    }
    for (DType t : {DType::kF32, DType::kQ8_0}) {
      for (kernels::Isa isa : kernels::AvailableIsas()) {
        cases.push_back({preset, t, isa, KvType::kF16});
        cases.push_back({preset, t, isa, KvType::kF16, true});
      }
    }
  }
  // q8_0 caches need heads of 32 (tiny's are 16).
  for (DType t : {DType::kF32, DType::kQ8_0}) {
    for (kernels::Isa isa : kernels::AvailableIsas())
      cases.push_back({"tiny-hd32", t, isa, KvType::kQ8_0});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, TransformerVsReference, ::testing::ValuesIn(AllCases()),
    [](const auto& info) {
      std::string name =
          info.param.preset + "_" +
          std::string(kernels::DTypeName(info.param.type)) + "_" +
          std::string(kernels::IsaName(info.param.isa)) +
          (info.param.kv_type == KvType::kF32
               ? ""
               : "_kv" + std::string(KvTypeName(info.param.kv_type))) +
          (info.param.ggml_attention ? "_ggml" : "");
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// Two sequences in one batch give the same logits as each run alone.
TEST(TransformerTest, MixedBatchEqualsSeparateRuns) {
  auto m = Model::Load(TempModel("tiny-qwen2", DType::kQ8_0));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  ThreadPool pool(2);
  Transformer tf(c, (*m)->weights(), pool, 16);
  const std::vector<int32_t> a = {1, 300, 301, 302}, b = {1, 400, 401};
  KvCache ca = tf.NewCache(32), cb = tf.NewCache(32);
  std::vector<float> la(c.vocab_size), lb(c.vocab_size);
  ASSERT_TRUE(tf.ForwardSequence(a, 0, ca, la).ok());
  ASSERT_TRUE(tf.ForwardSequence(b, 0, cb, lb).ok());

  KvCache ca2 = tf.NewCache(32), cb2 = tf.NewCache(32);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < a.size(); ++i)
    batch.push_back({a[i], int64_t(i), &ca2, i + 1 == a.size()});
  for (size_t i = 0; i < b.size(); ++i)
    batch.push_back({b[i], int64_t(i), &cb2, i + 1 == b.size()});
  std::vector<float> both(2 * c.vocab_size);
  ASSERT_TRUE(tf.Forward(batch, both).ok());
  for (int64_t i = 0; i < c.vocab_size; ++i) {
    ASSERT_NEAR(both[i], la[i], 1e-3);
    ASSERT_NEAR(both[c.vocab_size + i], lb[i], 1e-3);
  }
}

// A context of several attention chunks (kernels::kAttentionChunkKeys) in
// f16 and q8_0 caches: prefill in batches, then decode, against exact
// attention over the rounded cache values; and bit-identical logits whatever
// the thread count (the chunks are fixed by position, not by the pool).
TEST(TransformerTest, LongContextAttentionMatchesTheReferenceAcrossChunks) {
  auto m = Model::Load(TempModel("tiny-hd32", DType::kF32));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  std::vector<int32_t> tokens(603);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = int32_t((i * 7919 + 13) % c.vocab_size);
  }
  const size_t prefill = 600;
  for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
    ReferenceModel ref(**m, /*round_activations=*/true,
                       type == KvType::kF16 ? RefKv::kHalf : RefKv::kQ8_0);
    const auto expected = ref.Run(tokens);
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      Transformer tf(c, (*m)->weights(), pool, 128);
      KvCache cache = tf.NewCache(1024, type);
      std::vector<float> logits(c.vocab_size), all;
      ASSERT_TRUE(
          tf.ForwardSequence(std::span(tokens).first(prefill), 0, cache, logits)
              .ok());
      all = logits;
      double max_diff = 0;
      auto compare = [&](size_t t) {
        for (int64_t i = 0; i < c.vocab_size; ++i) {
          max_diff =
              std::max<double>(max_diff, std::abs(logits[i] - expected[t][i]));
        }
      };
      compare(prefill - 1);
      for (size_t t = prefill; t < tokens.size(); ++t) {
        ASSERT_TRUE(tf.ForwardSequence(std::span(&tokens[t], 1), int64_t(t),
                                       cache, logits)
                        .ok());
        compare(t);
        all.insert(all.end(), logits.begin(), logits.end());
      }
      EXPECT_LE(max_diff, Tolerance(DType::kF32))
          << KvTypeName(type) << " threads=" << threads;
      runs.push_back(all);
    }
    EXPECT_EQ(runs[0], runs[1]) << KvTypeName(type);
  }
}

// A pass of consecutive tokens (a verification pass, a prompt chunk) deep in
// the context shares its chunks' attention calls across tokens; each
// token's logits must still be those of decoding it alone. 20 tokens: more
// than one group of tokens, and chunks shared and not.
TEST(TransformerTest, AMultiTokenPassAtDepthEqualsDecodingEachToken) {
  auto m = Model::Load(TempModel("tiny-hd32", DType::kQ8_0));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  std::vector<int32_t> tokens(620);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = int32_t((i * 6151 + 5) % c.vocab_size);
  }
  const int64_t prefill = 600, n = 20;
  ThreadPool pool(2);
  for (kernels::Isa isa : kernels::AvailableIsas()) {
    ASSERT_TRUE(kernels::SetActiveIsa(isa));
    for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
      Transformer tf(c, (*m)->weights(), pool, 128);
      KvCache batched = tf.NewCache(1024, type),
              single = tf.NewCache(1024, type);
      std::vector<float> logits(c.vocab_size);
      const auto head = std::span(tokens).first(prefill);
      ASSERT_TRUE(tf.ForwardSequence(head, 0, batched, logits).ok());
      ASSERT_TRUE(tf.ForwardSequence(head, 0, single, logits).ok());
      std::vector<BatchToken> batch;
      for (int64_t i = 0; i < n; ++i)
        batch.push_back({tokens[prefill + i], prefill + i, &batched, true});
      std::vector<float> rows(n * c.vocab_size);
      ASSERT_TRUE(tf.Forward(batch, rows).ok());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(tf.ForwardSequence(std::span(&tokens[prefill + i], 1),
                                       prefill + i, single, logits)
                        .ok());
        double max_diff = 0;
        for (int64_t v = 0; v < c.vocab_size; ++v) {
          max_diff = std::max<double>(
              max_diff, std::abs(rows[i * c.vocab_size + v] - logits[v]));
        }
        EXPECT_EQ(max_diff, 0.0) << kernels::IsaName(isa) << " "
                                 << KvTypeName(type) << " token " << i;
      }
    }
  }
  kernels::SetActiveIsa(kernels::AvailableIsas().back());
}

// NewCache lays f16 and q8_0 caches out in head blocks for the chunked
// attention; the same attention over a cache in rows must give the same
// logits bit for bit, across chunks, and a prefix copied into a cache of
// another length must carry on as the original does.
TEST(TransformerTest, HeadBlocksCacheEqualsRowsCache) {
  auto m = Model::Load(TempModel("tiny-hd32-kv2", DType::kQ8_0));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  ASSERT_EQ(c.head_count_kv, 2);
  std::vector<int32_t> tokens(606);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = int32_t((i * 4099 + 3) % c.vocab_size);
  }
  const int64_t prefill = 600;
  ThreadPool pool(2);
  Transformer tf(c, (*m)->weights(), pool, 128);
  EXPECT_EQ(tf.NewCache(8, KvType::kF32).layout(), KvLayout::kRows);
  for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
    KvCache blocks = tf.NewCache(700, type);
    ASSERT_EQ(blocks.layout(), KvLayout::kHeadBlocks);
    KvCache rows(c.block_count, 700, c.kv_dim(), type, KvLayout::kRows,
                 c.head_count_kv);
    std::vector<float> a(c.vocab_size), b(c.vocab_size);
    const auto head = std::span(tokens).first(prefill);
    ASSERT_TRUE(tf.ForwardSequence(head, 0, blocks, a).ok());
    ASSERT_TRUE(tf.ForwardSequence(head, 0, rows, b).ok());
    EXPECT_EQ(a, b) << KvTypeName(type) << " prefill";
    std::vector<std::vector<float>> decoded;
    for (int64_t t = prefill; t < int64_t(tokens.size()); ++t) {
      ASSERT_TRUE(
          tf.ForwardSequence(std::span(&tokens[t], 1), t, blocks, a).ok());
      ASSERT_TRUE(
          tf.ForwardSequence(std::span(&tokens[t], 1), t, rows, b).ok());
      EXPECT_EQ(a, b) << KvTypeName(type) << " position " << t;
      decoded.push_back(a);
    }
    // Positions [0, 602) into a longer cache: its blocks lie elsewhere.
    const int64_t kept = prefill + 2;
    KvCache copy = tf.NewCache(1000, type);
    copy.CopyPrefixFrom(blocks, kept);
    for (int64_t t = kept; t < int64_t(tokens.size()); ++t) {
      ASSERT_TRUE(
          tf.ForwardSequence(std::span(&tokens[t], 1), t, copy, a).ok());
      EXPECT_EQ(a, decoded[t - prefill]) << KvTypeName(type) << " copy " << t;
    }
  }
  // Attention in ggml's arithmetic reads one head over all positions with
  // one stride: its f16 caches stay in rows.
  tf.set_ggml_f16_attention(true);
  EXPECT_EQ(tf.NewCache(8, KvType::kF16).layout(), KvLayout::kRows);
  EXPECT_EQ(tf.NewCache(8, KvType::kQ8_0).layout(), KvLayout::kHeadBlocks);
}

TEST(TransformerTest, Q8KvCacheNeedsHeadsOfWholeBlocks) {
  auto tiny = Model::Load(TempModel("tiny", DType::kF32));
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  const Status s = CheckKvType((*tiny)->config(), KvType::kQ8_0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("heads have 16"), std::string::npos)
      << s.ToString();
  EXPECT_TRUE(CheckKvType((*tiny)->config(), KvType::kF16).ok());
  auto hd32 = Model::Load(TempModel("tiny-hd32", DType::kF32));
  ASSERT_TRUE(hd32.ok()) << hd32.status().ToString();
  EXPECT_TRUE(CheckKvType((*hd32)->config(), KvType::kQ8_0).ok());
}

TEST(TransformerTest, BadInputsAreErrors) {
  auto m = Model::Load(TempModel("tiny", DType::kF32));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  ThreadPool pool(1);
  Transformer tf(c, (*m)->weights(), pool, 8);
  KvCache cache = tf.NewCache(4);
  std::vector<float> logits(c.vocab_size);
  const std::vector<int32_t> bad_id = {1, int32_t(c.vocab_size)};
  EXPECT_EQ(tf.ForwardSequence(bad_id, 0, cache, logits).code(),
            StatusCode::kInvalidArgument);
  const std::vector<int32_t> too_long = {1, 2, 3, 4, 5};
  EXPECT_EQ(tf.ForwardSequence(too_long, 0, cache, logits).code(),
            StatusCode::kOutOfRange);
  std::vector<float> small(3);
  EXPECT_EQ(tf.ForwardSequence(std::vector<int32_t>{1}, 0, cache, small).code(),
            StatusCode::kInvalidArgument);
}

TEST(TransformerTest, GreedyDecodingIsDeterministic) {
  auto m = Model::Load(TempModel("tiny", DType::kQ4_0));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  auto generate = [&](int threads) {
    ThreadPool pool(threads);
    Transformer tf(c, (*m)->weights(), pool, 8);
    KvCache cache = tf.NewCache(64);
    std::vector<float> logits(c.vocab_size);
    std::vector<int32_t> out;
    std::vector<int32_t> prompt = {1, 290, 291, 292};
    EXPECT_TRUE(tf.ForwardSequence(prompt, 0, cache, logits).ok());
    for (int i = 0; i < 24; ++i) {
      int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) -
                             logits.begin());
      out.push_back(next);
      EXPECT_TRUE(tf.ForwardSequence(std::span(&next, 1), prompt.size() + i,
                                     cache, logits)
                      .ok());
    }
    return out;
  };
  auto first = generate(1);
  EXPECT_EQ(first, generate(1));
  EXPECT_EQ(first, generate(2));
}

}  // namespace
}  // namespace redline::model

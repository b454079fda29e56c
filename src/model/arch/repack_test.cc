// Repacked weights (repack.h): the same logits as the file's layout (bit for
// bit for the quantized types), with panels only where the active kernels
// read them.
#include "model/arch/repack.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/packed.h"
#include "model/arch/model.h"
#include "model/arch/synthetic.h"
#include "model/arch/transformer.h"

namespace redline::model {
namespace {

using kernels::DType;
using kernels::Isa;

class RepackTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    path_ =
        (std::filesystem::temp_directory_path() /
         ("redline_repack_test_" + std::string(kernels::DTypeName(GetParam())) +
          "_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    ThreadPool pool(2);
    auto spec = SyntheticPreset("tiny-qwen2");  // biases, GQA, tied output
    ASSERT_TRUE(spec.ok());
    ASSERT_TRUE(WriteSyntheticModel(*spec, GetParam(), 11, path_, pool).ok());
  }
  void TearDown() override {
    std::filesystem::remove(path_);
    kernels::SetActiveIsa(kernels::AvailableIsas().back());
  }

  std::unique_ptr<Model> Load(bool repack) {
    LoadOptions o;
    o.repack = repack;
    o.load_tokenizer = false;
    auto m = Model::Load(path_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  // Logits of a 9-token prefill and 4 decode steps, concatenated.
  static std::vector<float> Run(const Model& m) {
    ThreadPool pool(2);
    Transformer tf(m.config(), m.weights(), pool, 16);
    KvCache cache = tf.NewCache(32, KvType::kF16);
    const std::vector<int32_t> tokens = {1,   300, 301, 17,  455, 262, 263,
                                         390, 5,   499, 270, 271, 272};
    std::vector<float> logits(m.config().vocab_size), all;
    EXPECT_TRUE(
        tf.ForwardSequence(std::span(tokens).first(9), 0, cache, logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
    for (size_t t = 9; t < tokens.size(); ++t) {
      EXPECT_TRUE(
          tf.ForwardSequence(std::span(&tokens[t], 1), t, cache, logits).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }

  std::string path_;
};

// On every ISA: the same logits as the file's layout (bit for bit where
// both layouts sum in the same order: not for F16 panels, nor for AVX2's
// Q8_0/Q4_0 panels, which keep the reference's block order where its row
// tiles do not), Q8_0/Q4_0/F16 in panels where the ISA has packed kernels,
// everything else copied as is.
TEST_P(RepackTest, LogitsMatchTheFileLayout) {
  for (Isa isa : kernels::AvailableIsas()) {
    SCOPED_TRACE(kernels::IsaName(isa));
    ASSERT_TRUE(kernels::SetActiveIsa(isa));
    auto rows = Load(false);
    auto packed = Load(true);
    ASSERT_TRUE(rows && packed);
    EXPECT_EQ(rows->weights().packed_bytes, 0);
    const ModelWeights& w = packed->weights();
    ASSERT_GT(w.packed_bytes, 0);
    const uint8_t* lo = w.packed_storage.get();
    const uint8_t* hi = lo + w.packed_bytes;
    auto in_copy = [&](const void* p) {
      const auto* b = static_cast<const uint8_t*>(p);
      return b >= lo && b < hi;
    };
    const bool panels = kernels::PackedLayoutHelps(GetParam());
    std::vector<const kernels::WeightView*> matrices = {&w.output};
    for (const LayerWeights& l : w.layers) {
      for (const auto* m : l.Matrices()) matrices.push_back(m);
    }
    for (const kernels::WeightView* m : matrices) {
      if (panels) {
        EXPECT_TRUE(in_copy(m->packed));
        EXPECT_FALSE(in_copy(m->data));  // the file's rows, for DequantizeRow
      } else {
        EXPECT_EQ(m->packed, nullptr);
        EXPECT_TRUE(in_copy(m->data));
      }
    }
    // Tied output: copied for products; embeddings are read from the file.
    EXPECT_FALSE(in_copy(w.token_embd.data));
    EXPECT_EQ(w.token_embd.packed, nullptr);
    const std::vector<float> a = Run(*rows), b = Run(*packed);
    ASSERT_EQ(a.size(), b.size());
    const bool same_order =
        !panels || (GetParam() != DType::kF16 && isa != Isa::kAvx2 &&
                    isa != Isa::kAvxVnni);
    if (same_order) {
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
      continue;
    }
    // F16 panels sum each output as one chain over the columns, the file's
    // rows in 16 column lanes added at the end (docs/NUMERICS.md); AVX2's
    // quantized panels sum blocks in order, its row tiles in 8 lanes added
    // at the end: the same products in another order. The next product's
    // activations are rounded (to binary16, or to Q8_0 blocks), which can
    // turn an f32 difference into a rounding step (~5e-4 relative for
    // binary16), so the logits agree to 1e-3 of their largest (measured:
    // 0.0093 of 30 on this model for F16), and every token's argmax.
    const int64_t vocab = packed->config().vocab_size;
    float scale = 0.0f;
    for (float v : a) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-3f * scale) << i;
    for (size_t t = 0; t < a.size() / vocab; ++t) {
      auto first = [&](const std::vector<float>& v) {
        return std::max_element(v.begin() + t * vocab,
                                v.begin() + (t + 1) * vocab) -
               v.begin();
      };
      EXPECT_EQ(first(a), first(b)) << "step " << t;
    }
  }
}

// Weights repacked under one ISA still work when another is active (its
// kernels read the rows).
TEST_P(RepackTest, PackedModelRunsOnEveryIsa) {
  auto packed = Load(true);
  ASSERT_TRUE(packed);
  std::vector<float> reference;
  {
    ASSERT_TRUE(kernels::SetActiveIsa(Isa::kScalar));
    reference = Run(*packed);
  }
  for (Isa isa : kernels::AvailableIsas()) {
    ASSERT_TRUE(kernels::SetActiveIsa(isa));
    const std::vector<float> got = Run(*packed);
    ASSERT_EQ(got.size(), reference.size());
    double max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i)
      max_diff = std::max<double>(max_diff, std::abs(got[i] - reference[i]));
    // TransformerVsReference's bounds: 0.5 for quantized types, whose
    // activation rounding may flip with summation order; 0.05 for F16,
    // whose binary16 input rounding may flip by one step.
    const bool quantized = GetParam() != DType::kF16;
    EXPECT_LE(max_diff, quantized ? 0.5 : 0.05) << kernels::IsaName(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0,
                                           DType::kF16),
                         [](const auto& info) {
                           return std::string(kernels::DTypeName(info.param));
                         });

}  // namespace
}  // namespace redline::model

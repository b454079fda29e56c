// Repacked weights (repack.h): the same logits as the file's row layout, bit
// for bit, and only where the active kernels read the packed layout.
#include "model/arch/repack.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

TEST_P(RepackTest, PackedLogitsAreBitIdenticalToRowLayout) {
  bool any_packed_isa = false;
  for (Isa isa : kernels::AvailableIsas()) {
    ASSERT_TRUE(kernels::SetActiveIsa(isa));
    if (!kernels::PackedLayoutHelps(GetParam())) continue;
    any_packed_isa = true;
    auto rows = Load(false);
    auto packed = Load(true);
    ASSERT_TRUE(rows && packed);
    EXPECT_EQ(rows->weights().packed_bytes, 0);
    const ModelWeights& w = packed->weights();
    EXPECT_GT(w.packed_bytes, 0);
    for (const LayerWeights& l : w.layers) {
      for (const auto* m :
           {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
        ASSERT_NE(m->packed, nullptr);
        ASSERT_NE(m->data, nullptr);  // still there for DequantizeRow
      }
    }
    // Tied output: packed for products; the embedding view keeps the rows.
    EXPECT_NE(w.output.packed, nullptr);
    EXPECT_EQ(w.token_embd.packed, nullptr);
    const std::vector<float> a = Run(*rows), b = Run(*packed);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << kernels::IsaName(isa);
  }
  if (!any_packed_isa) GTEST_SKIP() << "no ISA here has packed kernels";
}

// Where no kernel reads the packed layout, nothing is copied.
TEST_P(RepackTest, NoCopyWithoutPackedKernels) {
  ASSERT_TRUE(kernels::SetActiveIsa(Isa::kScalar));
  auto m = Load(true);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->weights().packed_bytes, 0);
  EXPECT_EQ(m->weights().output.packed, nullptr);
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
    // Same bound as TransformerVsReference's quantized cases.
    EXPECT_LE(max_diff, 0.5) << kernels::IsaName(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(Quantized, RepackTest,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) {
                           return std::string(kernels::DTypeName(info.param));
                         });

}  // namespace
}  // namespace redline::model

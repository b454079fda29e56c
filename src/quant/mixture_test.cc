#include "quant/mixture.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redline::quant {
namespace {

// A llama-shaped model of n layers with rows of `cols` elements.
std::vector<std::string> LlamaNames(int n_layer, bool tied) {
  std::vector<std::string> names = {"token_embd.weight", "output_norm.weight"};
  if (!tied) names.insert(names.begin(), "output.weight");
  for (int i = 0; i < n_layer; ++i) {
    for (const char* t :
         {"attn_k", "attn_norm", "attn_output", "attn_q", "attn_v", "ffn_down",
          "ffn_gate", "ffn_norm", "ffn_up"}) {
      names.push_back("blk." + std::to_string(i) + "." + t + ".weight");
    }
  }
  return names;
}

std::vector<int64_t> DimsFor(const std::string& name, int64_t cols) {
  if (name.find("_norm") != std::string::npos) return {cols};
  return {cols, 512};
}

TEST(MixtureTest, Q4KMGivesAttnVAndFfnDownMoreBitsOnChosenLayers) {
  const int n = 32;
  const auto names = LlamaNames(n, /*tied=*/false);
  MixturePlanner planner(FileType::kQ4_K_M, {"llama", n, 32, 8, 0}, names);
  std::vector<int> q6_layers;
  for (const auto& name : names) {
    const TensorPlan p =
        planner.Plan(name, DimsFor(name, 4096), TensorType::kF16);
    if (name.find("attn_v") != std::string::npos &&
        p.type == TensorType::kQ6_K) {
      q6_layers.push_back(std::stoi(name.substr(4)));
    }
    if (name == "output.weight") {
      EXPECT_EQ(p.type, TensorType::kQ6_K);
    }
    if (name == "token_embd.weight") {
      EXPECT_EQ(p.type, TensorType::kQ4_K);
    }
    if (name.find("_norm") != std::string::npos) {
      EXPECT_EQ(p.type, TensorType::kF16);
    }
  }
  // First and last eighth, plus every third layer in between.
  EXPECT_EQ(q6_layers, (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24,
                                         27, 28, 29, 30, 31}));
}

// llama.cpp's two rules that depend on an importance matrix, on the
// ffn_down of the first n_layer / 8 layers: Q4_0/Q5_0 move to Q4_1/Q5_1
// only with one, IQ4_NL moves to Q5_K only without one.
TEST(MixtureTest, AnImatrixChangesTheFirstFfnDownLayers) {
  const int n = 16;
  const auto names = LlamaNames(n, /*tied=*/false);
  auto ffn_down_types = [&](FileType f, bool has_imatrix) {
    MixturePlanner planner(f, {"llama", n, 32, 8, 0}, names, has_imatrix);
    std::vector<TensorType> types;
    for (const auto& name : names) {
      const TensorPlan p =
          planner.Plan(name, DimsFor(name, 4096), TensorType::kF16);
      if (name.find("ffn_down") != std::string::npos) types.push_back(p.type);
    }
    return types;
  };
  auto expect = [&](TensorType first_two, TensorType rest) {
    std::vector<TensorType> want(n, rest);
    want[0] = want[1] = first_two;
    return want;
  };
  EXPECT_EQ(ffn_down_types(FileType::kQ4_0, false),
            expect(TensorType::kQ4_0, TensorType::kQ4_0));
  EXPECT_EQ(ffn_down_types(FileType::kQ4_0, true),
            expect(TensorType::kQ4_1, TensorType::kQ4_0));
  EXPECT_EQ(ffn_down_types(FileType::kQ5_0, true),
            expect(TensorType::kQ5_1, TensorType::kQ5_0));
  EXPECT_EQ(ffn_down_types(FileType::kIQ4_NL, false),
            expect(TensorType::kQ5_K, TensorType::kIQ4_NL));
  EXPECT_EQ(ffn_down_types(FileType::kIQ4_NL, true),
            expect(TensorType::kIQ4_NL, TensorType::kIQ4_NL));
  // The K-quant mixtures do not depend on it.
  EXPECT_EQ(ffn_down_types(FileType::kQ4_K_M, true),
            ffn_down_types(FileType::kQ4_K_M, false));
}

TEST(MixtureTest, TiedEmbeddingsTakeTheOutputType) {
  const auto names = LlamaNames(2, /*tied=*/true);
  MixturePlanner planner(FileType::kQ4_0, {"llama", 2, 4, 4, 0}, names);
  EXPECT_EQ(
      planner.Plan("token_embd.weight", {256, 512}, TensorType::kF16).type,
      TensorType::kQ6_K);
  EXPECT_EQ(
      planner.Plan("blk.0.attn_q.weight", {256, 256}, TensorType::kF16).type,
      TensorType::kQ4_0);
}

TEST(MixtureTest, ShortRowsFallBack) {
  const auto names = LlamaNames(1, false);
  struct Case {
    FileType f;
    TensorType want;
  } cases[] = {{FileType::kQ2_K, TensorType::kIQ4_NL},
               {FileType::kQ3_K_S, TensorType::kIQ4_NL},
               {FileType::kQ4_K_S, TensorType::kQ5_0},
               {FileType::kQ5_K_S, TensorType::kQ5_1},
               {FileType::kQ6_K, TensorType::kQ8_0}};
  for (const auto& c : cases) {
    MixturePlanner planner(c.f, {"llama", 1, 4, 4, 0}, names);
    const TensorPlan p =
        planner.Plan("blk.0.attn_q.weight", {128, 128}, TensorType::kF16);
    EXPECT_EQ(p.type, c.want) << FileTypeName(c.f);
    EXPECT_TRUE(p.fell_back);
  }
  MixturePlanner planner(FileType::kQ6_K, {"llama", 1, 4, 4, 0}, names);
  EXPECT_EQ(planner.Plan("blk.0.attn_q.weight", {48, 8}, TensorType::kF16).type,
            TensorType::kF16);  // not even a multiple of 32
  MixturePlanner q4(FileType::kQ4_0, {"llama", 1, 4, 4, 0}, names);
  EXPECT_TRUE(
      q4.Plan("blk.0.attn_q.weight", {48, 8}, TensorType::kF16).impossible);
}

TEST(MixtureTest, ParsesEveryOfferedName) {
  for (auto name : QuantizeTypeNames()) {
    auto f = ParseFileType(name);
    ASSERT_TRUE(f.has_value()) << name;
    std::string lower(FileTypeName(*f));
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(ch));
    EXPECT_EQ(lower, name);
  }
  EXPECT_EQ(QuantizeTypeNames().size(), 15u);
  EXPECT_FALSE(ParseFileType("q4_k").has_value());
  EXPECT_EQ(ParseFileType("Q4_K_M"), FileType::kQ4_K_M);
}

}  // namespace
}  // namespace redline::quant

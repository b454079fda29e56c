// Reading importance matrices: both llama.cpp formats, llama-quantize's
// normalisation, and a clear error (never a crash) for every malformed or
// truncated file.
#include "quant/imatrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "model/gguf/gguf_writer.h"

namespace redline::quant {
namespace {

namespace gguf = model::gguf;

void AddF32(gguf::GgufWriter& w, const std::string& name,
            std::vector<int64_t> dims, std::vector<float> values) {
  w.AddTensor(name, gguf::TensorType::kF32, std::move(dims),
              [values](std::span<uint8_t> out) {
                std::memcpy(out.data(), values.data(), out.size());
              });
}

gguf::GgufWriter ImatrixWriter() {
  gguf::GgufWriter w;
  w.Set("general.type", gguf::Value::Str("imatrix"));
  w.Set("imatrix.datasets", gguf::Value::StrArray({"calibration.txt"}));
  w.Set("imatrix.chunk_count", gguf::Value::U32(7));
  w.Set("imatrix.chunk_size", gguf::Value::U32(512));
  return w;
}

Result<Imatrix> ParseWriter(const gguf::GgufWriter& w) {
  static std::vector<uint8_t> bytes;  // outlives the parse within one test
  bytes = w.WriteToBytes();
  return Imatrix::Parse(bytes);
}

TEST(ImatrixTest, GgufValuesAreSumsOverCountsPerMatrix) {
  gguf::GgufWriter w = ImatrixWriter();
  // Two matrices (experts) of 3 columns; the second saw no rows.
  AddF32(w, "blk.0.ffn_down.weight.in_sum2", {3, 2},
         {3.f, 6.f, 9.f, 5.f, 5.f, 5.f});
  AddF32(w, "blk.0.ffn_down.weight.counts", {1, 2}, {3.f, 0.f});
  AddF32(w, "output.weight.in_sum2", {2, 1}, {1.f, 2.f});
  AddF32(w, "output.weight.counts", {1, 1}, {4.2f});  // rounds to 4
  auto m = ParseWriter(w);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->legacy());
  EXPECT_EQ(m->size(), 2u);
  EXPECT_EQ(m->chunk_count(), 7);
  ASSERT_EQ(m->datasets().size(), 1u);
  EXPECT_EQ(m->datasets()[0], "calibration.txt");
  const auto* down = m->Find("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(*down, (std::vector<float>{1.f, 2.f, 3.f, 1.f, 1.f, 1.f}));
  const auto* out = m->Find("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(*out, (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ(m->Find("blk.1.ffn_down.weight"), nullptr);
}

TEST(ImatrixTest, GgufWithoutMetadataOrHalfAPairIsAnError) {
  {
    gguf::GgufWriter w;
    AddF32(w, "a.weight.in_sum2", {2, 1}, {1.f, 2.f});
    AddF32(w, "a.weight.counts", {1, 1}, {1.f});
    auto m = ParseWriter(w);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("metadata"), std::string::npos);
  }
  {
    gguf::GgufWriter w = ImatrixWriter();
    AddF32(w, "a.weight.in_sum2", {2, 1}, {1.f, 2.f});
    auto m = ParseWriter(w);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("a.weight"), std::string::npos);
  }
  {
    gguf::GgufWriter w = ImatrixWriter();
    AddF32(w, "a.weight.in_sum2", {3, 1}, {1.f, 2.f, 3.f});
    AddF32(w, "a.weight.counts", {1, 2}, {1.f, 1.f});
    EXPECT_FALSE(ParseWriter(w).ok());  // 3 sums, 2 matrices
  }
  {
    gguf::GgufWriter w = ImatrixWriter();
    w.AddTensor(
        "a.weight.in_sum2", gguf::TensorType::kF16, {2, 1},
        [](std::span<uint8_t> out) { std::memset(out.data(), 0, out.size()); });
    AddF32(w, "a.weight.counts", {1, 1}, {1.f});
    auto m = ParseWriter(w);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("F32"), std::string::npos);
  }
  {
    gguf::GgufWriter w = ImatrixWriter();
    AddF32(w, "a.weight.in_sum2", {2, 1},
           {1.f, std::numeric_limits<float>::infinity()});
    AddF32(w, "a.weight.counts", {1, 1}, {1.f});
    auto m = ParseWriter(w);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("finite"), std::string::npos);
  }
}

// The legacy format, written field by field.
struct LegacyWriter {
  std::vector<uint8_t> bytes;
  void I32(int32_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + 4);
  }
  void Str(const std::string& s) {
    I32(static_cast<int32_t>(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void Entry(const std::string& name, int32_t ncall,
             const std::vector<float>& values) {
    Str(name);
    I32(ncall);
    I32(static_cast<int32_t>(values.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(values.data());
    bytes.insert(bytes.end(), p, p + values.size() * sizeof(float));
  }
};

std::vector<uint8_t> LegacyFile(bool trailer) {
  LegacyWriter w;
  w.I32(2);
  w.Entry("blk.0.attn_q.weight", 4, {4.f, 8.f, 2.f});
  w.Entry("blk.0.attn_k.weight", 0, {0.5f, 1.5f});
  if (trailer) {
    w.I32(11);
    w.Str("wiki.train.raw");
  }
  return w.bytes;
}

TEST(ImatrixTest, LegacyValuesAreDividedByTheCallCount) {
  auto m = Imatrix::Parse(LegacyFile(true));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->legacy());
  EXPECT_EQ(*m->Find("blk.0.attn_q.weight"),
            (std::vector<float>{1.f, 2.f, 0.5f}));
  EXPECT_EQ(*m->Find("blk.0.attn_k.weight"), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(m->chunk_count(), 11);
  ASSERT_EQ(m->datasets().size(), 1u);
  EXPECT_EQ(m->datasets()[0], "wiki.train.raw");

  auto bare = Imatrix::Parse(LegacyFile(false));
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->chunk_count(), 0);
  EXPECT_TRUE(bare->datasets().empty());
}

// Every prefix of a valid file: parsed only where it ends on an entry
// boundary, otherwise a clear error; never a crash or an over-read (run
// under ASan in the asan preset).
TEST(ImatrixTest, EveryTruncationIsAnErrorOrACompleteFile) {
  const std::vector<uint8_t> full = LegacyFile(true);
  const size_t entries_end = LegacyFile(false).size();
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
    auto m = Imatrix::Parse(prefix);
    if (n == entries_end || n >= entries_end + 4) {
      // After the chunk count, a dataset name (or its length) cut short is
      // dropped, as llama.cpp does.
      EXPECT_TRUE(m.ok()) << n << ": " << m.status().ToString();
    } else {
      EXPECT_FALSE(m.ok()) << n;
    }
  }
}

TEST(ImatrixTest, HostileLegacyCountsAreErrors) {
  {
    LegacyWriter w;
    w.I32(1 << 30);  // entries beyond the file
    w.Entry("x", 1, {1.f});
    EXPECT_FALSE(Imatrix::Parse(w.bytes).ok());
  }
  {
    LegacyWriter w;
    w.I32(1);
    w.I32(-5);  // negative name length
    EXPECT_FALSE(Imatrix::Parse(w.bytes).ok());
  }
  {
    LegacyWriter w;
    w.I32(1);
    w.Str("x");
    w.I32(1);
    w.I32(1 << 29);  // values beyond the file
    w.I32(0);
    EXPECT_FALSE(Imatrix::Parse(w.bytes).ok());
  }
  {
    LegacyWriter w;
    w.I32(2);
    w.Entry("x", 1, {1.f});
    w.Entry("x", 1, {2.f});  // duplicate
    EXPECT_FALSE(Imatrix::Parse(w.bytes).ok());
  }
  {
    LegacyWriter w;
    w.I32(1);
    w.Entry("x", 1, {std::nanf("")});
    EXPECT_FALSE(Imatrix::Parse(w.bytes).ok());
  }
  EXPECT_FALSE(Imatrix::Parse({}).ok());
  auto missing = Imatrix::Load("/nonexistent/imatrix.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/imatrix.gguf"),
            std::string::npos);
}

}  // namespace
}  // namespace redline::quant

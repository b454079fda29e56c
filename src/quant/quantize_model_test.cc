// The oracle test: quantising the shared F16 models must reproduce
// llama.cpp's llama-quantize output tensor for tensor, byte for byte, for
// every offered type (../shared/testdata/quant, skipped when absent).
#include "quant/quantize_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/float16.h"
#include "model/gguf/gguf.h"
#include "model/gguf/gguf_writer.h"
#include "quant/test_files.h"

namespace redline::quant {
namespace {

namespace fs = std::filesystem;
namespace gguf = model::gguf;

using testing::QuantDir;
using testing::ReadAll;
using testing::TempPath;

struct OracleCase {
  std::string model;  // kq-llama or TinyStories-656K
  std::string input;
  std::string type;
};

std::vector<OracleCase> Cases() {
  std::vector<OracleCase> cases;
  for (std::string_view type : QuantizeTypeNames()) {
    cases.push_back({"kq-llama", "kq-llama-f16.gguf", std::string(type)});
  }
  for (std::string_view type : QuantizeTypeNames()) {
    cases.push_back({"TinyStories-656K", "../models/TinyStories-656K.f16.gguf",
                     std::string(type)});
  }
  return cases;
}

void PrintTo(const OracleCase& c, std::ostream* os) {
  *os << c.model << " " << c.type;
}

class OracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleTest, TensorsMatchLlamaQuantize) {
  const OracleCase& c = GetParam();
  std::string upper = c.type;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(ch));
  const std::string in = QuantDir() + "/" + c.input;
  const std::string want_path =
      QuantDir() + "/llama.cpp-out/" + c.model + "-" + upper + ".gguf";
  if (!fs::exists(in) || !fs::exists(want_path)) {
    GTEST_SKIP() << "oracle files absent: " << want_path;
  }
  const std::string out = TempPath(c.model + "-" + upper + ".gguf");
  QuantizeOptions options;
  options.ftype = *ParseFileType(c.type);
  options.threads = 2;
  auto report = QuantizeModel(in, out, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();

  auto got = gguf::GgufFile::Open(out, false);
  auto want = gguf::GgufFile::Open(want_path, false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ(got->tensors().size(), want->tensors().size());
  int mismatched = 0;
  for (size_t i = 0; i < want->tensors().size(); ++i) {
    const auto& w = want->tensors()[i];
    const auto& g = got->tensors()[i];
    ASSERT_EQ(g.name, w.name) << "tensor order differs at " << i;
    EXPECT_EQ(g.type, w.type)
        << w.name << ": got " << gguf::TensorTypeName(g.type) << ", want "
        << gguf::TensorTypeName(w.type);
    if (g.type != w.type || g.size_bytes != w.size_bytes) {
      ++mismatched;
      continue;
    }
    if (std::memcmp(g.data, w.data, w.size_bytes) != 0) {
      ++mismatched;
      const int64_t block = gguf::TensorTypeBlockBytes(w.type);
      int64_t bad = 0;
      int64_t first = -1;
      for (uint64_t off = 0; off < w.size_bytes; off += block) {
        if (std::memcmp(g.data + off, w.data + off, block) != 0) {
          if (first < 0) first = static_cast<int64_t>(off / block);
          ++bad;
        }
      }
      ADD_FAILURE() << w.name << " (" << gguf::TensorTypeName(w.type)
                    << "): " << bad << " of " << w.size_bytes / block
                    << " blocks differ, first " << first;
    }
  }
  EXPECT_EQ(mismatched, 0);
  // The whole file, metadata and padding included.
  EXPECT_TRUE(ReadAll(out) == ReadAll(want_path)) << "file bytes differ";
  fs::remove(out);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, OracleTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<OracleCase>& info) {
                           std::string name =
                               info.param.model + "_" + info.param.type;
                           for (auto& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch)))
                               ch = '_';
                           }
                           return name;
                         });

// A small F16 model file with the given tensors (all values from a simple
// deterministic pattern).
std::string WriteTinyModel(const std::string& name, int64_t cols,
                           TensorType type = TensorType::kF16) {
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::Str("llama"));
  w.Set("llama.block_count", gguf::Value::U32(1));
  w.Set("general.file_type", gguf::Value::U32(1));
  for (const char* tensor : {"token_embd.weight", "blk.0.attn_q.weight"}) {
    w.AddTensor(tensor, type, {cols, 4}, [](std::span<uint8_t> out) {
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<uint8_t>(i % 2 == 1 ? 0x30 : (i * 37) & 0xff);
      }
    });
  }
  const std::string path = TempPath(name);
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

TEST(QuantizeModelTest, RefusesOutputEqualToInput) {
  const std::string in = WriteTinyModel("same.gguf", 64);
  QuantizeOptions options;
  options.ftype = FileType::kQ8_0;
  auto r = QuantizeModel(in, in, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is the input"), std::string::npos);
}

TEST(QuantizeModelTest, RefusesRowsNoTypeCanHold) {
  const std::string in = WriteTinyModel("odd.gguf", 48);
  const std::string out = TempPath("odd-q4.gguf");
  QuantizeOptions options;
  options.ftype = FileType::kQ4_0;
  auto r = QuantizeModel(in, out, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot hold"), std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

TEST(QuantizeModelTest, FallsBackForKQuantsOnShortRows) {
  const std::string in = WriteTinyModel("short.gguf", 64);
  const std::string out = TempPath("short-q4km.gguf");
  QuantizeOptions options;
  options.ftype = FileType::kQ4_K_M;
  auto r = QuantizeModel(in, out, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fallbacks, 1);  // attn_q: Q4_K -> Q5_0
  auto f = gguf::GgufFile::Open(out, false);
  ASSERT_TRUE(f.ok());
  // token_embd is tied to the output here (no output.weight): Q8_0.
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, TensorType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, TensorType::kQ5_0);
  EXPECT_EQ(*f->GetInt("general.file_type"), 15);
}

TEST(QuantizeModelTest, RequantizeNeedsTheFlag) {
  const std::string in = WriteTinyModel("f16.gguf", 64);
  const std::string q8 = TempPath("q8.gguf");
  QuantizeOptions options;
  options.ftype = FileType::kQ8_0;
  ASSERT_TRUE(QuantizeModel(in, q8, options).ok());
  const std::string q4 = TempPath("q4.gguf");
  options.ftype = FileType::kQ4_0;
  auto refused = QuantizeModel(q8, q4, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--allow-requantize"),
            std::string::npos);
  options.allow_requantize = true;
  auto r = QuantizeModel(q8, q4, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requantized, 1);  // token_embd stays Q8_0 (tied output)
}

TEST(QuantizeModelTest, TruncatedInputIsAnError) {
  const std::string in = WriteTinyModel("full.gguf", 64);
  const std::string cut = TempPath("cut.gguf");
  auto bytes = ReadAll(in);
  bytes.resize(bytes.size() - 100);
  std::ofstream(cut, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  const std::string out = TempPath("cut-q8.gguf");
  QuantizeOptions options;
  auto r = QuantizeModel(cut, out, options);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(out));
}

TEST(QuantizeModelTest, UnwritableOutputLeavesNothing) {
  const std::string in = WriteTinyModel("w.gguf", 64);
  QuantizeOptions options;
  auto r = QuantizeModel(in, "/nonexistent-dir/x/out.gguf", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
}

TEST(QuantizeModelTest, BytesDoNotDependOnThreadCount) {
  const std::string in = QuantDir() + "/kq-llama-f16.gguf";
  if (!fs::exists(in)) GTEST_SKIP() << "absent: " << in;
  QuantizeOptions options;
  options.ftype = FileType::kQ4_K_M;
  options.threads = 1;
  const std::string one = TempPath("t1.gguf");
  ASSERT_TRUE(QuantizeModel(in, one, options).ok());
  options.threads = 3;
  const std::string three = TempPath("t3.gguf");
  ASSERT_TRUE(QuantizeModel(in, three, options).ok());
  EXPECT_TRUE(ReadAll(one) == ReadAll(three));
  fs::remove(one);
  fs::remove(three);
}

// BF16 and F32 inputs holding the same values quantise to the same bytes
// (BF16 -> F32 is exact), and the metadata's file type is replaced.
TEST(QuantizeModelTest, Bf16AndF32InputsAgree) {
  const std::string bf16 = WriteTinyModel("bf16.gguf", 256, TensorType::kBF16);
  auto src = gguf::GgufFile::Open(bf16, false);
  ASSERT_TRUE(src.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : src->metadata()) w.Set(k, v);
  for (const auto& t : src->tensors()) {
    w.AddTensor(t.name, TensorType::kF32, t.dims, [&t](std::span<uint8_t> out) {
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        const float f = Bf16ToFp32(h);
        std::memcpy(out.data() + 4 * i, &f, 4);
      }
    });
  }
  const std::string f32 = TempPath("f32.gguf");
  ASSERT_TRUE(w.Write(f32).ok());
  QuantizeOptions options;
  options.ftype = FileType::kQ6_K;
  const std::string a = TempPath("bf16-q6k.gguf");
  const std::string b = TempPath("f32-q6k.gguf");
  ASSERT_TRUE(QuantizeModel(bf16, a, options).ok());
  ASSERT_TRUE(QuantizeModel(f32, b, options).ok());
  EXPECT_TRUE(ReadAll(a) == ReadAll(b));
  auto out = gguf::GgufFile::Open(a, false);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out->GetInt("general.file_type"), 18);
  EXPECT_EQ(*out->GetInt("general.quantization_version"), 2);
  EXPECT_EQ(out->FindTensor("blk.0.attn_q.weight")->type, TensorType::kQ6_K);
}

TEST(QuantizeModelTest, TensorOrderIsLayerMajor) {
  EXPECT_TRUE(LlamaTensorOrderLess("output.weight", "blk.0.attn_q.weight"));
  EXPECT_TRUE(
      LlamaTensorOrderLess("blk.2.ffn_up.weight", "blk.10.attn_k.weight"));
  EXPECT_TRUE(LlamaTensorOrderLess("output.weight", "output_norm.weight"));
  EXPECT_FALSE(LlamaTensorOrderLess("token_embd.weight", "output.weight"));
}

const auto* const kScratchCleanup =
    ::testing::AddGlobalTestEnvironment(new testing::ScratchCleanup);

}  // namespace
}  // namespace redline::quant

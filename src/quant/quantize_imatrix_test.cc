// `redline quantize --imatrix` against llama-quantize --imatrix: the shared
// random-weight model quantised to every offered type with a constructed
// legacy-format importance matrix must give the tensor bytes llama.cpp
// wrote (FNV-1a of every tensor's bytes in file order, recorded from
// llama-quantize at llama.cpp d32676d with the same matrix), and the
// metadata llama-quantize adds. Skipped when ../shared is absent.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "model/gguf/gguf.h"
#include "quant/quantize_model.h"
#include "quant/test_files.h"

namespace redline::quant {
namespace {

namespace fs = std::filesystem;
namespace gguf = model::gguf;

using testing::TempPath;

std::string Model() { return testing::QuantDir() + "/kq-llama-f16.gguf"; }

void PutI32(std::string& out, int32_t v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}

// The legacy .dat: every matrix of the model's 4 layers and output.weight
// (token_embd has no entry), values exact dyadic numbers with a zero group
// (columns 32-47) and hot columns (every 97th x64), stored doubled with
// ncall 2; trailer: 3 chunks, dataset "constructed". `bad_cols` != 0 gives
// blk.0.attn_q.weight that many columns instead.
std::string WriteImatrix(const std::string& name, int bad_cols = 0) {
  const char* kinds[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                         "ffn_gate", "ffn_up", "ffn_down"};
  struct Entry {
    std::string name;
    int cols;
    int seed;
  };
  std::vector<Entry> entries;
  for (int layer = 0; layer < 4; ++layer) {
    for (int k = 0; k < 7; ++k) {
      const std::string kind = kinds[k];
      entries.push_back({fmt::format("blk.{}.{}.weight", layer, kind),
                         kind == "ffn_down" ? 768 : 256, layer * 8 + k});
    }
  }
  entries.push_back({"output.weight", 256, 99});
  if (bad_cols != 0) entries[0].cols = bad_cols;
  std::string out;
  PutI32(out, static_cast<int32_t>(entries.size()));
  for (const Entry& e : entries) {
    PutI32(out, static_cast<int32_t>(e.name.size()));
    out += e.name;
    PutI32(out, 2);
    PutI32(out, e.cols);
    for (int c = 0; c < e.cols; ++c) {
      float v = 0.0f;
      if (c < 32 || c >= 48) {
        v = static_cast<float>((c * 7919 + e.seed * 31) % 101 + 1) / 16.0f;
        if (c % 97 == 0) v *= 64.0f;
      }
      const float stored = 2.0f * v;
      out.append(reinterpret_cast<const char*>(&stored), 4);
    }
  }
  PutI32(out, 3);
  PutI32(out, 11);
  out += "constructed";
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary).write(out.data(), out.size());
  return path;
}

uint64_t TensorBytesHash(const gguf::GgufFile& f) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : f.tensors()) {
    for (uint64_t i = 0; i < t.size_bytes; ++i) {
      h ^= t.data[i];
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

const std::map<std::string, uint64_t>& LlamaQuantizeHashes() {
  static const auto* hashes = new std::map<std::string, uint64_t>{
      {"q8_0", 0xc9ca678c7c1b043full},   {"q4_0", 0x4009b4595fb2ef74ull},
      {"q4_1", 0x4a76bced0d986221ull},   {"q5_0", 0x370560f8c6d6d430ull},
      {"q5_1", 0x51772ce25069807full},   {"q2_k", 0x8e0a25500cc09980ull},
      {"q3_k_s", 0x38469b92b83553bcull}, {"q3_k_m", 0x69c8846c625136a4ull},
      {"q3_k_l", 0xc03156fb9a0e6a58ull}, {"q4_k_s", 0xc8829b245cfa3b68ull},
      {"q4_k_m", 0xe693150a6fdc0855ull}, {"q5_k_s", 0x9c4907009920d454ull},
      {"q5_k_m", 0x171d6559e14e6341ull}, {"q6_k", 0xd11e756fdb7b4ee2ull},
      {"iq4_nl", 0x52470a581ffd721dull},
  };
  return *hashes;
}

TEST(QuantizeImatrixTest, EveryTypeMatchesLlamaQuantize) {
  if (!fs::exists(Model())) GTEST_SKIP() << "absent: " << Model();
  const std::string imatrix = WriteImatrix("kq.dat");
  for (std::string_view type : QuantizeTypeNames()) {
    SCOPED_TRACE(std::string(type));
    const auto want = LlamaQuantizeHashes().find(std::string(type));
    ASSERT_NE(want, LlamaQuantizeHashes().end());
    QuantizeOptions options;
    options.ftype = *ParseFileType(type);
    options.threads = 2;
    options.imatrix_path = imatrix;
    const std::string out = TempPath(fmt::format("kq-{}.gguf", type));
    auto report = QuantizeModel(Model(), out, options);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    auto f = gguf::GgufFile::Open(out, false);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(TensorBytesHash(*f), want->second);
    EXPECT_EQ(*f->GetString("quantize.imatrix.file"), imatrix);
    EXPECT_EQ(*f->GetString("quantize.imatrix.dataset"), "constructed");
    EXPECT_EQ(*f->GetInt("quantize.imatrix.entries_count"), 29);
    EXPECT_EQ(*f->GetInt("quantize.imatrix.chunks_count"), 3);
    if (type == "q8_0") {
      EXPECT_EQ(report->weighted, 0);
    } else {
      // 28 layer matrices and output.weight; token_embd has no entry.
      EXPECT_EQ(report->weighted, 29);
      EXPECT_EQ(report->without_imatrix,
                std::vector<std::string>{"token_embd.weight"});
    }
    fs::remove(out);
  }
}

TEST(QuantizeImatrixTest, AnEntryOfTheWrongSizeIsAnError) {
  if (!fs::exists(Model())) GTEST_SKIP() << "absent: " << Model();
  QuantizeOptions options;
  options.ftype = FileType::kQ4_K_M;
  options.imatrix_path = WriteImatrix("bad.dat", 128);
  const std::string out = TempPath("bad.gguf");
  auto report = QuantizeModel(Model(), out, options);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("blk.0.attn_q.weight"),
            std::string::npos)
      << report.status().ToString();
  EXPECT_FALSE(fs::exists(out));
}

TEST(QuantizeImatrixTest, AMissingOrMalformedImatrixIsAnError) {
  if (!fs::exists(Model())) GTEST_SKIP() << "absent: " << Model();
  QuantizeOptions options;
  options.ftype = FileType::kQ4_K_M;
  options.imatrix_path = TempPath("none.dat");
  const std::string out = TempPath("none.gguf");
  EXPECT_FALSE(QuantizeModel(Model(), out, options).ok());
  const std::string junk = TempPath("junk.dat");
  std::ofstream(junk, std::ios::binary) << "not an imatrix at all";
  options.imatrix_path = junk;
  auto report = QuantizeModel(Model(), out, options);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find(junk), std::string::npos);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace redline::quant

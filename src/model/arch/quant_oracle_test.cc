// llama.cpp-quantised GGUF files (testdata/quant, see its README) against
// llama.cpp's own results: every block type loads, its tensors dequantise to
// the F16 weights they were made from, and greedy decoding agrees with
// llama.cpp's token ids. Skips when the shared test data is absent.
//
// Agreement tolerance. Redline rounds every product's activations to Q8_0
// (32-element blocks); llama.cpp uses Q8_K (256 elements) for the K-quants
// and Q8_1 for Q4_1/Q5_1, and its own 8-bit rounding differs between CPU
// paths (the README). So logits differ slightly and greedy paths part at
// near-ties (even llama.cpp's own Q8_0 and F16 files part at the second
// token of a prompt), after which they are unrelated. Checked, on the
// trained TinyStories files (rows of 64/128/384, so the K-quant files are
// mixtures of 32-element fallback types):
//   - the first generated token of every prompt equals llama.cpp's;
//   - Redline stays as close to the float reference (llama.cpp's ids on the
//     F16 file) as llama.cpp does: summed over all files and prompts, the
//     agreeing prefix with the reference is at least llama.cpp's (measured
//     when written, the F16 file included: 574 tokens on AVX-512, 582 on
//     AVX2 and scalar, against llama.cpp's 460); per file it may
//     fall short by kFloatSlackTokens, half a prompt's worth, since one
//     near-tie moved by a different summation order (AVX2 vs AVX-512, or a
//     kernel change) can end a prefix early (measured: at most 8 short).
// The random-weight kq-llama files (near-uniform logits) are loaded and
// decoded; their agreement is printed, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"
#include "model/arch/transformer.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::model {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kQuantDir = fs::path(RL_SHARED_DIR) / "testdata" / "quant";

struct OracleEntry {
  std::string file;
  fs::path path;
  std::map<std::string, std::vector<int32_t>> greedy;
};

std::vector<OracleEntry> ReadOracle() {
  std::ifstream in(kQuantDir / "oracle.json");
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  const json::value root = json::parse(ss.str());
  std::vector<OracleEntry> out;
  for (const json::value& v : root.as_array()) {
    const json::object& o = v.as_object();
    OracleEntry e;
    e.file = std::string(o.at("file").as_string());
    for (const fs::path& dir : {kQuantDir / "llama.cpp-out", kQuantDir,
                                kQuantDir / ".." / "models"}) {
      if (fs::exists(dir / e.file)) {
        e.path = dir / e.file;
        break;
      }
    }
    for (const auto& [prompt, ids] : o.at("greedy_32").as_object()) {
      std::vector<int32_t> tokens;
      for (const json::value& id : ids.as_array())
        tokens.push_back(static_cast<int32_t>(id.to_number<int64_t>()));
      e.greedy[std::string(prompt)] = tokens;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<int32_t> Greedy(const Model& m, const std::string& prompt,
                            int n_tokens, ThreadPool& pool) {
  const ModelConfig& c = m.config();
  Transformer tf(c, m.weights(), pool, 64);
  std::vector<int32_t> ids = m.tokenizer()->Encode(prompt, /*add_special=*/true,
                                                   /*parse_special=*/false);
  KvCache cache =
      tf.NewCache(static_cast<int64_t>(ids.size()) + n_tokens, KvType::kF16);
  std::vector<float> logits(c.vocab_size);
  std::vector<int32_t> out;
  EXPECT_TRUE(tf.ForwardSequence(ids, 0, cache, logits).ok());
  for (int i = 0; i < n_tokens; ++i) {
    auto next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    if (i + 1 == n_tokens) break;
    EXPECT_TRUE(tf.ForwardSequence(std::span(&next, 1),
                                   static_cast<int64_t>(ids.size()) + i, cache,
                                   logits)
                    .ok());
  }
  return out;
}

// Tokens (summed over the prompts) by which Redline's greedy agreement with
// the F16 reference may fall short of llama.cpp's on one file.
constexpr int kFloatSlackTokens = 16;

int CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                 size_t limit) {
  size_t n = 0;
  while (n < limit && n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return static_cast<int>(n);
}

TEST(QuantOracleTest, EveryFileLoadsAndDecodesLikeLlamaCpp) {
  const std::vector<OracleEntry> oracle = ReadOracle();
  if (oracle.empty()) GTEST_SKIP() << "no " << kQuantDir / "oracle.json";
  // llama.cpp's ids on the F16 TinyStories file: the float reference.
  std::map<std::string, std::vector<int32_t>> float_ref;
  for (const OracleEntry& e : oracle) {
    if (e.file == "TinyStories-656K.f16.gguf") float_ref = e.greedy;
  }
  ThreadPool pool(2);
  int checked = 0;
  int total_ours_vs_float = 0, total_llama_vs_float = 0;
  for (const OracleEntry& e : oracle) {
    if (e.path.empty()) continue;  // partial data set
    SCOPED_TRACE(e.file);
    auto m = Model::Load(e.path.string());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE((*m)->tokenizer(), nullptr);
    const bool trained = e.file.rfind("TinyStories", 0) == 0;
    std::string line;
    int first_tokens = 0, ours_vs_float = 0, llama_vs_float = 0;
    std::string float_line;
    for (const auto& [prompt, want] : e.greedy) {
      const std::vector<int32_t> got =
          Greedy(**m, prompt, static_cast<int>(want.size()), pool);
      ASSERT_EQ(got.size(), want.size());
      const int prefix = CommonPrefix(got, want, want.size());
      line += " " + std::to_string(prefix);
      first_tokens += prefix > 0;
      if (trained && float_ref.count(prompt) > 0) {
        const std::vector<int32_t>& f = float_ref.at(prompt);
        const int ours = CommonPrefix(got, f, f.size());
        const int theirs = CommonPrefix(want, f, f.size());
        ours_vs_float += ours;
        llama_vs_float += theirs;
        float_line += " " + std::to_string(ours) + "/" + std::to_string(theirs);
      }
    }
    std::printf("%-30s %-22s vs llama.cpp:%s | vs F16 (ours/llama.cpp):%s\n",
                e.file.c_str(), (*m)->WeightTypeSummary().c_str(), line.c_str(),
                float_line.c_str());
    if (trained) {
      EXPECT_EQ(first_tokens, static_cast<int>(e.greedy.size()))
          << "prefixes:" << line;
      EXPECT_GE(ours_vs_float, llama_vs_float - kFloatSlackTokens)
          << "vs F16:" << float_line;
      total_ours_vs_float += ours_vs_float;
      total_llama_vs_float += llama_vs_float;
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no oracle model files present";
  std::printf(
      "agreeing prefix with the F16 reference, all trained files: "
      "%d (llama.cpp %d)\n",
      total_ours_vs_float, total_llama_vs_float);
  EXPECT_GE(total_ours_vs_float, total_llama_vs_float);
}

// Relative RMS error of each quantised tensor against the F16 original,
// within a bound per tensor type: a misread layout (wrong bit order, scale
// or nibble) gives errors near or above 1.
double ErrorBound(kernels::DType t) {
  switch (t) {
    case kernels::DType::kQ8_0:
      return 0.01;
    case kernels::DType::kQ6_K:
      return 0.03;
    case kernels::DType::kQ5_0:
    case kernels::DType::kQ5_1:
    case kernels::DType::kQ5_K:
      return 0.06;
    case kernels::DType::kQ4_0:
    case kernels::DType::kQ4_1:
    case kernels::DType::kQ4_K:
    case kernels::DType::kIQ4_NL:
      return 0.12;
    case kernels::DType::kQ3_K:
      return 0.25;
    case kernels::DType::kQ2_K:
      return 0.45;
    default:
      return 1e-6;
  }
}

TEST(QuantOracleTest, TensorsDequantiseToTheirF16Source) {
  const fs::path source = kQuantDir / "kq-llama-f16.gguf";
  if (!fs::exists(source)) GTEST_SKIP() << "no " << source;
  LoadOptions options;
  options.repack = false;
  options.load_tokenizer = false;
  auto ref = Model::Load(source.string(), options);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  int checked = 0;
  for (const auto& entry :
       fs::directory_iterator(kQuantDir / "llama.cpp-out")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("kq-llama-", 0) != 0) continue;
    SCOPED_TRACE(name);
    auto m = Model::Load(entry.path().string(), options);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const ModelWeights& w = (*m)->weights();
    const ModelWeights& r = (*ref)->weights();
    std::vector<
        std::pair<const kernels::WeightView*, const kernels::WeightView*>>
        pairs = {{&w.token_embd, &r.token_embd}, {&w.output, &r.output}};
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const auto a = w.layers[l].Matrices();
      const auto b = r.layers[l].Matrices();
      for (size_t i = 0; i < a.size(); ++i) pairs.emplace_back(a[i], b[i]);
    }
    for (const auto& [q, f] : pairs) {
      ASSERT_EQ(q->rows, f->rows);
      ASSERT_EQ(q->cols, f->cols);
      std::vector<float> qrow(q->cols), frow(f->cols);
      double err = 0, norm = 0;
      for (int64_t row = 0; row < q->rows; ++row) {
        kernels::DequantizeRow(*q, row, qrow.data());
        kernels::DequantizeRow(*f, row, frow.data());
        for (int64_t c = 0; c < q->cols; ++c) {
          err += (qrow[c] - frow[c]) * double(qrow[c] - frow[c]);
          norm += frow[c] * double(frow[c]);
        }
      }
      const double rel = std::sqrt(err / norm);
      EXPECT_LE(rel, ErrorBound(q->type))
          << kernels::DTypeName(q->type) << " " << q->rows << "x" << q->cols;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace redline::model

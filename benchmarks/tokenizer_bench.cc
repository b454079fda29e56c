// Tokenizer throughput (MB/s of input text) for every vocabulary in
// ${RL_SHARED_DIR}/testdata/vocab (skipped when absent), on two ~1 MiB texts:
//   inp:    the 46 llama.cpp test strings (English, code-ish whitespace, CJK,
//           Cyrillic, Khmer, emoji) repeated; words recur, as in real text,
//           so BPE's word cache helps;
//   random: random words over mixed scripts, digits and punctuation; almost
//           every word is new, which measures the uncached merge path.
// Also Decode and streaming detokenization of the encoded "inp" text.
//
//   tokenizer_bench --benchmark_filter=Encode
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using redline::model::StreamingDetokenizer;
using redline::model::Tokenizer;

constexpr size_t kTextBytes = 1 << 20;

// $RL_SHARED_DIR, else the compile-time RL_SHARED_DIR, else ../shared beside
// the source checkout.
std::string VocabDir() {
  if (const char* env = std::getenv("RL_SHARED_DIR"))
    return std::string(env) + "/testdata/vocab/";
#ifdef RL_SHARED_DIR
  return std::string(RL_SHARED_DIR) + "/testdata/vocab/";
#else
  const auto checkout =
      std::filesystem::path(__FILE__).parent_path().parent_path();
  return (checkout.parent_path() / "shared" / "testdata" / "vocab").string() +
         "/";
#endif
}

std::string InpText() {
  std::ifstream in(VocabDir() + "ggml-vocab-gpt-2.gguf.inp", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string one = ss.str();
  // Drop the separators: keep the strings, joined by newlines.
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string joined;
  for (size_t pos = 0, hit; (hit = one.find(sep, pos)) != std::string::npos;
       pos = hit + sep.size()) {
    joined += one.substr(pos, hit - pos);
    joined += '\n';
  }
  std::string text;
  while (!joined.empty() && text.size() < kTextBytes) text += joined;
  return text;
}

std::string RandomText() {
  std::mt19937 rng(1234);
  const std::vector<std::string> alphabet = {
      "a", "b",  "c",  "d",  "e",  "f",  "g", "h", "i", "k",
      "l", "m",  "n",  "o",  "p",  "r",  "s", "t", "u", "w",
      "y", "A",  "T",  "Q",  "é",  "ü",  "ж", "д", "я", "α",
      "λ", "的", "是", "人", "ア", "한", "1", "7", "0", "🦙"};
  const std::vector<std::string> separators = {
      " ", " ", " ", " ", ", ", ". ", "\n", "\t", "(", ") ", " = ", "; ", "  "};
  std::string text;
  while (text.size() < kTextBytes) {
    const size_t len = 1 + rng() % 9;
    for (size_t i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    text += separators[rng() % separators.size()];
  }
  return text;
}

std::unique_ptr<Tokenizer> LoadVocab(const std::string& path) {
  auto file = redline::model::gguf::GgufFile::Open(
      path, /*require_supported_types=*/false);
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(*file);
  if (!tok.ok()) return nullptr;
  return std::move(tok).value();
}

void BenchEncode(benchmark::State& state, const Tokenizer* tok,
                 const std::string* text) {
  std::vector<int32_t> ids;
  ids.reserve(text->size());
  for (auto _ : state) {
    ids.clear();
    tok->EncodeAppend(*text, /*add_special=*/false, /*parse_special=*/false,
                      &ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * text->size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["bytes/token"] =
      static_cast<double>(text->size()) / static_cast<double>(ids.size());
}

void BenchDecode(benchmark::State& state, const Tokenizer* tok,
                 const std::string* text) {
  const std::vector<int32_t> ids = tok->Encode(*text, false, false);
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string out = tok->Decode(ids);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BenchStream(benchmark::State& state, const Tokenizer* tok,
                 const std::string* text) {
  const std::vector<int32_t> ids = tok->Encode(*text, false, false);
  size_t bytes = 0;
  for (auto _ : state) {
    StreamingDetokenizer stream(*tok);
    bytes = 0;
    for (int32_t id : ids) bytes += stream.Push(id).size();
    bytes += stream.Flush().size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Kept alive for the whole run: benchmarks hold raw pointers.
  static std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  static std::string inp_text;
  static std::string random_text;
  const std::string dir = VocabDir();
  if (!std::filesystem::exists(dir)) {
    std::fprintf(stderr,
                 "tokenizer_bench: no vocabularies at %s; nothing to measure\n",
                 dir.c_str());
    return 0;
  }
  inp_text = InpText();
  random_text = RandomText();
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("ggml-vocab-", 0) == 0 &&
        entry.path().extension() == ".gguf") {
      names.push_back(file.substr(11, file.size() - 11 - 5));
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto tok = LoadVocab(dir + "ggml-vocab-" + name + ".gguf");
    if (tok == nullptr) {
      std::fprintf(stderr, "tokenizer_bench: skipping %s (does not load)\n",
                   name.c_str());
      continue;
    }
    const Tokenizer* t = tok.get();
    tokenizers.push_back(std::move(tok));
    benchmark::RegisterBenchmark(("Encode/inp/" + name).c_str(), BenchEncode, t,
                                 &inp_text)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Encode/random/" + name).c_str(), BenchEncode,
                                 t, &random_text)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Decode/inp/" + name).c_str(), BenchDecode, t,
                                 &inp_text)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Stream/inp/" + name).c_str(), BenchStream, t,
                                 &inp_text)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

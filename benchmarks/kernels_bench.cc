// Kernel microbenchmarks: matrix-vector (decode) and matrix-matrix (prefill)
// products for every weight type and ISA, plus the row-wise ops.
//
// Matvec reports bytes/s of weights streamed (SetBytesProcessed), so the
// figure compares directly with the machine's memory bandwidth. Weights are
// cycled over enough copies that the working set is >= kColdBytes: a decode
// step streams the whole model, so no matrix is cache-resident when it is
// used, and a single small matrix re-read in a loop would measure the cache.
// Prefill reports FLOP/s (2 * rows * cols * n_tokens per call).
//
//   kernels_bench --benchmark_filter='MatVec/q8_0/avx512'
//   kernels_bench --benchmark_filter=Prefill --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/float16.h"
#include "base/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/dtype.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/packed.h"

namespace redline::kernels {
namespace {

constexpr int kThreads = 2;
// Larger than any last-level cache we expect to meet (this box reports a
// 480 MiB L3), so cycling copies streams from DRAM.
constexpr int64_t kColdBytes = int64_t{1} << 30;

ThreadPool& Pool() {
  static ThreadPool pool(kThreads);
  return pool;
}

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// `copies` weight matrices [rows, cols] of `type`, filled from a few random
// rows (quantizing 150k rows one by one would dominate start-up).
struct Weights {
  std::vector<std::unique_ptr<uint8_t[]>> copies;
  std::vector<std::unique_ptr<uint8_t[]>> packed;  // packed.h; if asked for
  int64_t bytes = 0;                               // one copy
};

Weights MakeWeights(DType type, int64_t rows, int64_t cols, int n_copies,
                    bool packed) {
  const int64_t row_bytes = RowBytes(type, cols);
  constexpr int kDistinctRows = 8;
  std::vector<uint8_t> rows_q(static_cast<size_t>(kDistinctRows * row_bytes));
  const std::vector<float> src = RandomFloats(kDistinctRows * cols, 1);
  if (type == DType::kQ5_0 || type == DType::kQ4_K || type == DType::kQ6_K) {
    // No quantizer in kernels/: random bits, with every binary16 scale
    // field set to 2^-10 so the products stay finite (the speed does not
    // depend on the values).
    std::mt19937 rng(1);
    for (uint8_t& b : rows_q) b = static_cast<uint8_t>(rng());
    const int64_t block_bytes = BlockBytes(type);
    const std::vector<size_t> fields =
        type == DType::kQ5_0   ? std::vector<size_t>{0}
        : type == DType::kQ4_K ? std::vector<size_t>{0, 2}
                               : std::vector<size_t>{208};
    const uint16_t scale = 0x1400;  // 2^-10
    for (size_t b = 0; b < rows_q.size(); b += static_cast<size_t>(block_bytes))
      for (size_t f : fields) std::memcpy(&rows_q[b + f], &scale, 2);
  } else {
    for (int r = 0; r < kDistinctRows; ++r) {
      QuantizeRow(type, src.data() + r * cols, cols,
                  rows_q.data() + r * row_bytes);
    }
  }
  Weights w;
  w.bytes = rows * row_bytes;
  for (int c = 0; c < n_copies; ++c) {
    auto data = std::make_unique<uint8_t[]>(static_cast<size_t>(w.bytes));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(data.get() + r * row_bytes,
                  rows_q.data() + (r % kDistinctRows) * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
    if (packed) {
      auto p = std::make_unique<uint8_t[]>(
          static_cast<size_t>(PackedBytes(type, rows, cols)));
      PackWeights(WeightView{type, rows, cols, data.get()}, 0,
                  PackedPanels(rows), p.get());
      w.packed.push_back(std::move(p));
    }
    w.copies.push_back(std::move(data));
  }
  return w;
}

constexpr DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,
                            DType::kQ8_0, DType::kQ4_0, DType::kQ5_0,
                            DType::kQ4_K, DType::kQ6_K};

// Products of at most this many tokens stream cold weights (decode steps
// and speculative verification passes).
constexpr int64_t kSmallBatchMaxTokens = 16;

// packed: also give the kernels the packed layout (packed.h), as a model
// loaded with repacking does.
// hot: one copy of the weights, re-read from cache (the kernel's compute
// rate rather than the memory's).
void RunMatMul(benchmark::State& state, Isa isa, DType type, int64_t rows,
               int64_t cols, int64_t n_tokens, bool packed = false,
               bool hot = false) {
  if (!SetActiveIsa(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const int64_t one_copy = rows * RowBytes(type, cols);
  const int n_copies = n_tokens <= kSmallBatchMaxTokens && !hot
                           ? static_cast<int>(std::clamp<int64_t>(
                                 kColdBytes / one_copy + 1, 1, 64))
                           : 1;
  const Weights w = MakeWeights(type, rows, cols, n_copies, packed);
  const std::vector<float> x = RandomFloats(n_tokens * cols, 2);
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  std::vector<std::byte> scratch(MatMulScratchBytes(type, cols, n_tokens));
  size_t i = 0;
  for (auto _ : state) {
    const size_t copy = i++ % w.copies.size();
    const WeightView view{type, rows, cols, w.copies[copy].get(),
                          packed ? w.packed[copy].get() : nullptr};
    MatMul(view, x.data(), n_tokens, y.data(), scratch, Pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.bytes);
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(rows * cols * n_tokens) *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  if (n_tokens > 1) {
    state.counters["tok/s"] =
        benchmark::Counter(static_cast<double>(n_tokens * state.iterations()),
                           benchmark::Counter::kIsRate);
  }
}

// Shapes of qwen2.5-0.5b (d 896, ffn 4864, vocab 151936) and a 2048 x 8192
// FFN (llama3.2-1b). Shapes whose cols a type cannot hold are skipped.
struct Shape {
  int64_t rows, cols;
};
constexpr Shape kMatVecShapes[] = {
    {896, 896}, {4864, 896}, {896, 4864}, {151936, 896}, {2048, 8192}};
constexpr Shape kPrefillShapes[] = {{896, 896}, {4864, 896}, {896, 4864},
                                    {576, 576}, {1536, 576}, {8192, 2048}};
constexpr int64_t kPrefillTokens = 128;
// Verification passes of speculative decoding: a few tokens per sequence,
// weights streamed from memory once per pass like a decode step.
constexpr int64_t kSmallBatchTokens[] = {2, 4, 9};
// qwen2.5-0.5b's FFN up and llama3.2-1b's (the K-quants need cols % 256).
constexpr Shape kSmallBatchShapes[] = {{4864, 896}, {8192, 2048}};

// Read bandwidth of the same pool over a kColdBytes buffer: the roofline the
// matvec figures compare with (measure both in the same window; this box's
// bandwidth drifts).
void BM_MemoryRead(benchmark::State& state) {
  const int64_t n = kColdBytes / static_cast<int64_t>(sizeof(uint64_t));
  static std::vector<uint64_t> buffer(static_cast<size_t>(n), 1);
  std::vector<uint64_t> sums(kThreads);
  for (auto _ : state) {
    Pool().ParallelFor(n, 1 << 16, [&](int64_t begin, int64_t end, int t) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = begin; i + 4 <= end; i += 4) {
        s0 += buffer[i];
        s1 += buffer[i + 1];
        s2 += buffer[i + 2];
        s3 += buffer[i + 3];
      }
      sums[t] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          kColdBytes);
}
BENCHMARK(BM_MemoryRead)->UseRealTime()->MinTime(0.5);

void RegisterAll() {
  for (Isa isa : AvailableIsas()) {
    // kAmx differs from kAvx512 only in quantized prefill.
    const bool amx = isa == Isa::kAmx;
    for (DType type : kTypes) {
      const bool quantized = IsQuantized(type);
      if (amx && type != DType::kQ8_0 && type != DType::kQ4_0) continue;
      // Row layout, and the packed one where this ISA has kernels for it
      // ("/packed").
      SetActiveIsa(isa);
      std::vector<bool> layouts = {false};
      if (PackedLayoutHelps(type)) layouts.push_back(true);
      for (const bool packed : layouts) {
        const std::string suffix = packed ? "/packed" : "";
        for (const Shape& s : kMatVecShapes) {
          if (amx) break;
          if (s.cols % BlockElements(type) != 0) continue;
          const std::string name = "MatVec/" + std::string(DTypeName(type)) +
                                   "/" + std::string(IsaName(isa)) + "/" +
                                   std::to_string(s.rows) + "x" +
                                   std::to_string(s.cols) + suffix;
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& st) {
                                         RunMatMul(st, isa, type, s.rows,
                                                   s.cols, 1, packed);
                                       })
              ->UseRealTime()
              ->MinTime(0.3);
        }
        if (!amx && quantized) {
          // 256 x 2048: 0.1-0.5 MiB, inside each core's L2.
          const std::string name = "MatVecHot/" + std::string(DTypeName(type)) +
                                   "/" + std::string(IsaName(isa)) +
                                   "/256x2048" + suffix;
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& st) {
                                         RunMatMul(st, isa, type, 256, 2048, 1,
                                                   packed, true);
                                       })
              ->UseRealTime()
              ->MinTime(0.3);
        }
        for (const int64_t n : kSmallBatchTokens) {
          if (amx) break;
          for (const Shape cold : kSmallBatchShapes) {
            for (const bool hot : {false, true}) {
              const Shape s = hot ? Shape{256, 2048} : cold;
              if (s.cols % BlockElements(type) != 0 ||
                  (hot && cold.rows != kSmallBatchShapes[0].rows))
                continue;
              const std::string name =
                  std::string(hot ? "SmallBatchHot/" : "SmallBatch/") +
                  std::string(DTypeName(type)) + "/" +
                  std::string(IsaName(isa)) + "/" + std::to_string(s.rows) +
                  "x" + std::to_string(s.cols) +
                  "/tokens:" + std::to_string(n) + suffix;
              benchmark::RegisterBenchmark(name.c_str(),
                                           [=](benchmark::State& st) {
                                             RunMatMul(st, isa, type, s.rows,
                                                       s.cols, n, packed, hot);
                                           })
                  ->UseRealTime()
                  ->MinTime(0.3);
            }
          }
        }
        for (const Shape& s : kPrefillShapes) {
          if (s.cols % BlockElements(type) != 0) continue;
          const std::string name =
              "Prefill/" + std::string(DTypeName(type)) + "/" +
              std::string(IsaName(isa)) + "/" + std::to_string(s.rows) + "x" +
              std::to_string(s.cols) +
              "/tokens:" + std::to_string(kPrefillTokens) + suffix;
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& st) {
                                         RunMatMul(st, isa, type, s.rows,
                                                   s.cols, kPrefillTokens,
                                                   packed);
                                       })
              ->UseRealTime()
              ->MinTime(0.3);
        }
      }
    }
    if (amx) continue;
    const std::string isa_name(IsaName(isa));
    benchmark::RegisterBenchmark(
        ("RmsNorm/" + isa_name + "/896").c_str(), [=](benchmark::State& st) {
          SetActiveIsa(isa);
          const std::vector<float> x = RandomFloats(896, 3),
                                   w = RandomFloats(896, 4);
          std::vector<float> out(896);
          for (auto _ : st) {
            RmsNorm(x.data(), w.data(), 896, 1e-6f, out.data());
            benchmark::DoNotOptimize(out.data());
          }
        });
    benchmark::RegisterBenchmark(
        ("SiluMul/" + isa_name + "/4864").c_str(), [=](benchmark::State& st) {
          SetActiveIsa(isa);
          const std::vector<float> g = RandomFloats(4864, 5),
                                   u = RandomFloats(4864, 6);
          std::vector<float> out(4864);
          for (auto _ : st) {
            SiluMul(g.data(), u.data(), 4864, out.data());
            benchmark::DoNotOptimize(out.data());
          }
        });
    benchmark::RegisterBenchmark(
        ("Softmax/" + isa_name + "/151936").c_str(), [=](benchmark::State& st) {
          SetActiveIsa(isa);
          const std::vector<float> x0 = RandomFloats(151936, 7);
          std::vector<float> x = x0;
          for (auto _ : st) {
            std::copy(x0.begin(), x0.end(), x.begin());
            Softmax(x.data(), 151936);
            benchmark::DoNotOptimize(x.data());
          }
        });
    benchmark::RegisterBenchmark(
        ("AttentionHead/" + isa_name + "/n_kv:512/head_dim:64").c_str(),
        [=](benchmark::State& st) {
          SetActiveIsa(isa);
          const int64_t n_kv = 512, head_dim = 64, stride = 128;
          const std::vector<float> q = RandomFloats(head_dim, 8);
          const std::vector<float> k = RandomFloats(n_kv * stride, 9);
          const std::vector<float> v = RandomFloats(n_kv * stride, 10);
          std::vector<float> scores(n_kv), out(head_dim);
          for (auto _ : st) {
            AttentionHead(q.data(), k.data(), v.data(), n_kv, head_dim, stride,
                          0.125f, scores.data(), out.data());
            benchmark::DoNotOptimize(out.data());
          }
        });
    // One chunk of a binary16 or q8_0 KV cache, as decode (n_q = the heads
    // of a KV group) and a 9-token verification pass (9 x the group) use
    // it; items are (query head, key) pairs.
    for (const KvElement kv : {KvElement::kF16, KvElement::kQ8_0}) {
      for (const int64_t head_dim : {16, 64, 128}) {
        if (kv == KvElement::kQ8_0 && head_dim % kQkBlock != 0) continue;
        for (const int64_t n_q : {2, 7, 18, 63}) {
          const std::string name = std::string("AttentionChunk/") +
                                   (kv == KvElement::kF16 ? "f16/" : "q8_0/") +
                                   isa_name +
                                   "/head_dim:" + std::to_string(head_dim) +
                                   "/n_q:" + std::to_string(n_q);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
            SetActiveIsa(isa);
            const int64_t n_kv = kAttentionChunkKeys;
            // Rows of two KV heads, as a cache interleaves them.
            const int64_t head_bytes =
                kv == KvElement::kF16
                    ? 2 * head_dim
                    : head_dim / kQkBlock * int64_t{sizeof(BlockQ8_0)};
            const int64_t row_bytes = 2 * head_bytes;
            const std::vector<float> q = RandomFloats(n_q * head_dim, 11);
            std::vector<uint8_t> k(n_kv * row_bytes), v(n_kv * row_bytes);
            const std::vector<float> kf = RandomFloats(n_kv * row_bytes, 12);
            for (size_t i = 0; i < k.size(); ++i) {
              k[i] = static_cast<uint8_t>(static_cast<int>(kf[i] * 97) & 0xff);
              v[i] = static_cast<uint8_t>(static_cast<int>(kf[i] * 89) & 0xff);
            }
            if (kv == KvElement::kF16) {
              // Finite halves in [-1, 1).
              for (size_t i = 0; i < k.size() / 2; ++i) {
                const uint16_t a = Fp32ToFp16(kf[i]), b = Fp32ToFp16(-kf[i]);
                std::memcpy(k.data() + 2 * i, &a, 2);
                std::memcpy(v.data() + 2 * i, &b, 2);
              }
            } else {
              // Block scales of 1/64; the quants stay random bytes.
              const uint16_t d = Fp32ToFp16(1.0f / 64);
              for (int64_t at = 0; at < int64_t(k.size());
                   at += int64_t{sizeof(BlockQ8_0)}) {
                std::memcpy(k.data() + at, &d, 2);
                std::memcpy(v.data() + at, &d, 2);
              }
            }
            std::vector<float> work(AttentionChunkWorkFloats(head_dim));
            std::vector<float> partial(AttentionPartialFloats(n_q, head_dim));
            const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
            for (auto _ : st) {
              AttentionChunk(kv, q.data(), n_q, k.data(), v.data(), n_kv,
                             head_dim, row_bytes, scale, work.data(),
                             partial.data());
              benchmark::DoNotOptimize(partial.data());
            }
            st.SetItemsProcessed(st.iterations() * n_q * n_kv);
          });
        }
      }
    }
  }
}

}  // namespace
}  // namespace redline::kernels

int main(int argc, char** argv) {
  redline::kernels::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

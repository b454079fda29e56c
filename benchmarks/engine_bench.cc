// Engine-side work that runs on a model's owner thread between forward
// passes. DraftFromHistory: the prompt-lookup scan done before every step of
// a speculative sequence (its shadow draft), on a history with no match
// (the whole lookback scanned, the worst case), against the reference scan
// that compares whole n-grams (engine/prompt_lookup.h, ref::).
//
//   engine_bench --benchmark_filter=DraftFromHistory
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/prompt_lookup.h"

namespace {

using redline::engine::DraftFromHistory;

std::vector<int32_t> NoRepeats(int64_t n) {
  // Distinct tokens: no n-gram occurs twice.
  std::vector<int32_t> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    h[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::shuffle(h.begin(), h.end(), std::mt19937(1));
  return h;
}

template <bool kReference>
void BM_DraftFromHistory(benchmark::State& state) {
  const std::vector<int32_t> h = NoRepeats(state.range(0));
  for (auto _ : state) {
    auto draft = kReference ? redline::engine::ref::DraftFromHistory(h, 1, 3, 2)
                            : DraftFromHistory(h, 1, 3, 2);
    benchmark::DoNotOptimize(draft.data());
  }
}
BENCHMARK(BM_DraftFromHistory<false>)
    ->Name("DraftFromHistory/fast")
    ->Arg(300)
    ->Arg(2048)
    ->Arg(8192);
BENCHMARK(BM_DraftFromHistory<true>)
    ->Name("DraftFromHistory/reference")
    ->Arg(300)
    ->Arg(2048)
    ->Arg(8192);

}  // namespace

BENCHMARK_MAIN();

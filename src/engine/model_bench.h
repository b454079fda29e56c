// ModelBench: llama-bench-style throughput of a model on this machine —
// prefill tok/s at given prompt lengths, decode tok/s over N tokens (median
// of repeats), and the decode roofline share:
//   weight bytes read per token x decode tok/s / measured memory bandwidth.
#ifndef REDLINE_ENGINE_MODEL_BENCH_H_
#define REDLINE_ENGINE_MODEL_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/memory_bandwidth.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"

namespace redline::engine {

struct ModelBenchOptions {
  std::vector<int64_t> prefill_tokens = {128, 512};
  int64_t decode_tokens = 64;
  // Tokens already in the KV cache before each test (llama-bench's -d): the
  // prefill and decode tests run once per depth, after an untimed prefill
  // of that many tokens, so attention reads that much more context.
  std::vector<int64_t> depths = {0};
  int repeats = 5;
  bool measure_bandwidth = true;
  // Bytes per array of each bandwidth pass; 0: StreamArrayBytes(), four
  // times the last-level cache (three such arrays: 6 GiB on a host that
  // reports a 508 MiB L3). Tests of the pairing logic set a few MiB.
  int64_t bandwidth_array_bytes = 0;
  model::KvType kv_type = model::KvType::kF16;
};

struct ModelBenchTest {
  std::string name;  // "pp128", "tg64", "tg64 @ d4096"
  int64_t tokens = 0;
  int64_t depth = 0;              // tokens in the cache before the test
  std::vector<double> tok_per_s;  // one per repeat
  double median() const;
  double min() const;
  double max() const;
};

struct ModelBenchResult {
  std::string model_path, model_name, arch, weight_types;
  int64_t params = 0;
  int64_t weight_bytes = 0;
  int64_t decode_bytes_per_token = 0;
  int threads = 0;
  std::string isa;
  std::string kv_type;  // "f16" or "f32"
  // Where products read weights (model/arch/repack.h): "packed" (the panels of
  // kernels/packed.h in huge pages), "copy" (the file's layout in huge pages)
  // or "mmap" (the file's pages, --no-repack).
  std::string weight_layout;
  std::vector<ModelBenchTest> tests;
  BandwidthResult bandwidth;
  // decode_bytes_per_token x median decode tok/s (at the smallest depth) /
  // bandwidth.best_gbps(); 0 if not measured.
  double roofline_share = 0;
  // The same share per repeat of that decode test, each against a
  // bandwidth pass like `bandwidth`'s (StreamArrayBytes() arrays, best of 5)
  // run right after the repeat: bandwidth drifts on shared machines (35-72
  // GB/s between minutes here), and a share against a figure from another
  // moment is off by as much.
  // Empty if bandwidth is not measured.
  std::vector<double> paired_shares;
  // best_gbps() of each of those passes (the shares' denominators), in order.
  std::vector<double> paired_gbps;
  double paired_share() const;  // median of paired_shares; 0 if none
  // The decode test the roofline share is of (the first, i.e. the smallest
  // depth); null without one.
  const ModelBenchTest* RooflineTest() const;
  // Above 1 the decode read its weights faster than DRAM can deliver: they
  // sit in the CPU caches, and the DRAM roofline does not bound it. Judged
  // by the paired share where there is one: against the single bandwidth
  // figure, a drift between the two moments alone can pass 1 (a 760 MiB
  // model at 101 % while its paired share was 68 %).
  bool fits_in_cache() const {
    return (paired_shares.empty() ? roofline_share : paired_share()) > 1.0;
  }

  std::string ToMarkdown() const;
  std::string ToJson() const;
};

// Runs the benchmark. Cost: seconds to minutes (model size x repeats).
Result<ModelBenchResult> RunModelBench(const model::Model& model,
                                       ThreadPool& pool,
                                       const ModelBenchOptions& options);

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_MODEL_BENCH_H_

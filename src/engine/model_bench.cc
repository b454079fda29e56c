#include "engine/model_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "base/json_escape.h"
#include "kernels/isa.h"
#include "model/arch/transformer.h"
#include "model/sampling/sampling_ops.h"

namespace redline::engine {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

double ModelBenchTest::median() const { return Median(tok_per_s); }
double ModelBenchTest::min() const {
  return tok_per_s.empty()
             ? 0
             : *std::min_element(tok_per_s.begin(), tok_per_s.end());
}
double ModelBenchTest::max() const {
  return tok_per_s.empty()
             ? 0
             : *std::max_element(tok_per_s.begin(), tok_per_s.end());
}

Result<ModelBenchResult> RunModelBench(const model::Model& m, ThreadPool& pool,
                                       const ModelBenchOptions& o) {
  const model::ModelConfig& c = m.config();
  ModelBenchResult r;
  r.model_path = m.file().path();
  r.model_name = c.name;
  r.arch = c.arch_name;
  r.weight_types = m.WeightTypeSummary();
  r.weight_bytes = m.weights().MatrixBytes();
  r.decode_bytes_per_token = m.weights().DecodeBytesPerToken();
  r.threads = pool.num_threads();
  r.isa = std::string(kernels::IsaName(kernels::ActiveIsa()));
  r.kv_type = std::string(model::KvTypeName(o.kv_type));
  bool any_packed = m.weights().output.packed != nullptr;
  for (const model::LayerWeights& l : m.weights().layers) {
    for (const auto* w : l.Matrices())
      any_packed = any_packed || w->packed != nullptr;
  }
  r.weight_layout = any_packed                     ? "packed"
                    : m.weights().packed_bytes > 0 ? "copy"
                                                   : "mmap";
  for (const auto& t : m.file().tensors()) r.params += t.NumElements();

  int64_t max_prefill = 0;
  for (int64_t n : o.prefill_tokens) max_prefill = std::max(max_prefill, n);
  std::vector<int64_t> depths =
      o.depths.empty() ? std::vector<int64_t>{0} : o.depths;
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  if (depths.front() < 0)
    return Status::InvalidArgument("a depth must be >= 0");
  const int64_t max_depth = depths.back();
  const int64_t n_ctx = max_depth + std::max(max_prefill, o.decode_tokens + 1);
  if (n_ctx > (1 << 20))
    return Status::InvalidArgument("benchmark lengths too large");
  if (c.context_length_train > 0 && n_ctx > c.context_length_train) {
    return Status::InvalidArgument(fmt::format(
        "depth {} + test length {} is more than the model's context of {} "
        "tokens",
        max_depth, n_ctx - max_depth, c.context_length_train));
  }
  RL_RETURN_IF_ERROR(model::CheckKvType(c, o.kv_type));
  if (o.bandwidth_array_bytes < 0)
    return Status::InvalidArgument("bandwidth array bytes must be >= 0");
  const int64_t array_bytes = o.bandwidth_array_bytes > 0
                                  ? o.bandwidth_array_bytes
                                  : StreamArrayBytes();
  // Prefill chunks of at most 512 tokens, as a server's batch would be.
  model::Transformer tf(
      c, m.weights(), pool,
      std::clamp<int64_t>(std::max(max_prefill, max_depth), 1, 512));
  model::KvCache cache = tf.NewCache(n_ctx, o.kv_type);
  std::vector<float> logits(c.vocab_size);

  // Deterministic pseudo-random prompt tokens (skipping the special ids).
  std::vector<int32_t> prompt(
      std::max<int64_t>(std::max(max_prefill, max_depth), 1));
  uint64_t state = 12345;
  for (auto& t : prompt) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>(
        8 + (state >> 33) %
                static_cast<uint64_t>(std::max<int64_t>(c.vocab_size - 8, 1)));
    if (t >= c.vocab_size) t = 0;
  }

  // One untimed pass faults in the weights and warms the caches.
  RL_RETURN_IF_ERROR(tf.ForwardSequence(
      std::span(prompt).first(std::min<size_t>(prompt.size(), 16)), 0, cache,
      logits));
  for (int64_t depth : depths) {
    // The context the tests run after (positions [0, depth)); the tests
    // write from `depth` on, so the context stays as filled here.
    if (depth > 0) {
      RL_RETURN_IF_ERROR(
          tf.ForwardSequence(std::span(prompt).first(depth), 0, cache, logits));
    }
    const std::string at =
        depth > 0 ? fmt::format(" @ d{}", depth) : std::string();
    for (int64_t n : o.prefill_tokens) {
      ModelBenchTest test{fmt::format("pp{}{}", n, at), n, depth, {}};
      for (int rep = 0; rep < o.repeats; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        RL_RETURN_IF_ERROR(tf.ForwardSequence(std::span(prompt).first(n), depth,
                                              cache, logits));
        test.tok_per_s.push_back(static_cast<double>(n) / Seconds(start));
      }
      r.tests.push_back(std::move(test));
    }
    if (o.decode_tokens > 0) {
      // The first decode test is the roofline test (RooflineTest).
      const bool paired = o.measure_bandwidth && r.RooflineTest() == nullptr;
      ModelBenchTest test{fmt::format("tg{}{}", o.decode_tokens, at),
                          o.decode_tokens,
                          depth,
                          {}};
      for (int rep = 0; rep < o.repeats; ++rep) {
        int32_t token = prompt[0];
        // After a bandwidth pass, one untimed step brings the weights back
        // into the caches that pass flushed (it writes position `depth`,
        // which the repeat overwrites).
        if (paired && rep > 0) {
          RL_RETURN_IF_ERROR(
              tf.ForwardSequence(std::span(&token, 1), depth, cache, logits));
        }
        const auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < o.decode_tokens; ++i) {
          RL_RETURN_IF_ERROR(tf.ForwardSequence(std::span(&token, 1), depth + i,
                                                cache, logits));
          token = model::Argmax(logits);
        }
        test.tok_per_s.push_back(static_cast<double>(o.decode_tokens) /
                                 Seconds(start));
        if (paired) {
          const BandwidthResult b = MeasureMemoryBandwidth(pool, array_bytes);
          if (b.best_gbps() > 0) {
            r.paired_gbps.push_back(b.best_gbps());
            r.paired_shares.push_back(
                static_cast<double>(r.decode_bytes_per_token) *
                test.tok_per_s.back() / (b.best_gbps() * 1e9));
          }
        }
      }
      r.tests.push_back(std::move(test));
    }
  }
  if (o.measure_bandwidth) {
    r.bandwidth = MeasureMemoryBandwidth(pool, array_bytes);
    const ModelBenchTest* tg = r.RooflineTest();
    if (tg != nullptr && r.bandwidth.best_gbps() > 0) {
      r.roofline_share = static_cast<double>(r.decode_bytes_per_token) *
                         tg->median() / (r.bandwidth.best_gbps() * 1e9);
    }
  }
  return r;
}

double ModelBenchResult::paired_share() const { return Median(paired_shares); }

const ModelBenchTest* ModelBenchResult::RooflineTest() const {
  for (const ModelBenchTest& t : tests) {
    if (t.name.rfind("tg", 0) == 0) return &t;
  }
  return nullptr;
}

std::string ModelBenchResult::ToMarkdown() const {
  std::string out = fmt::format(
      "model: {} ({}, {}, {:.1f} M params, {:.1f} MiB of matrices), {} "
      "threads, isa {}, kv {}, weights {}\n\n",
      model_path, arch, weight_types, params / 1e6, weight_bytes / 1048576.0,
      threads, isa, kv_type, weight_layout);
  out += "| test   | tok/s (median) |    min |    max | repeats |\n";
  out += "|--------|---------------:|-------:|-------:|--------:|\n";
  for (const auto& t : tests) {
    out +=
        fmt::format("| {:<6} | {:>14.2f} | {:>6.2f} | {:>6.2f} | {:>7} |\n",
                    t.name, t.median(), t.min(), t.max(), t.tok_per_s.size());
  }
  const ModelBenchTest* tg = RooflineTest();
  if (bandwidth.best_gbps() > 0) {
    out += fmt::format(
        "\nmemory bandwidth (STREAM-style, best pass): read {:.1f} GB/s, copy "
        "{:.1f} GB/s, triad {:.1f} GB/s\n",
        bandwidth.read_gbps, bandwidth.copy_gbps, bandwidth.triad_gbps);
    out += fmt::format(
        "decode roofline share: {:.1f} MiB/token x {:.2f} tok/s / {:.1f} GB/s "
        "= {:.1f} %{}\n",
        decode_bytes_per_token / 1048576.0, tg == nullptr ? 0.0 : tg->median(),
        bandwidth.best_gbps(), 100.0 * roofline_share,
        fits_in_cache() ? " (above 100 %: the weights fit in cache, so DRAM "
                          "bandwidth does not bound decode here)"
                        : "");
  }
  if (!paired_shares.empty()) {
    const auto [lo, hi] =
        std::minmax_element(paired_shares.begin(), paired_shares.end());
    out += fmt::format(
        "decode roofline share, each repeat against a bandwidth pass right "
        "after it: median {:.1f} % (min {:.1f}, max {:.1f}, {} repeats)",
        100.0 * paired_share(), 100.0 * *lo, 100.0 * *hi, paired_shares.size());
    if (!paired_gbps.empty()) {
      const auto [slow, fast] =
          std::minmax_element(paired_gbps.begin(), paired_gbps.end());
      out +=
          fmt::format("; those passes read {:.1f}-{:.1f} GB/s", *slow, *fast);
    }
    out += "\n";
  }
  return out;
}

std::string ModelBenchResult::ToJson() const {
  std::string tests_json;
  for (const auto& t : tests) {
    std::string reps;
    for (double v : t.tok_per_s)
      reps += fmt::format("{}{:.3f}", reps.empty() ? "" : ", ", v);
    tests_json += fmt::format(
        "{}\n    {{\"name\": {}, \"tokens\": {}, \"depth\": {}, "
        "\"tok_per_s_median\": {:.3f}, \"tok_per_s_min\": {:.3f}, "
        "\"tok_per_s_max\": {:.3f}, \"tok_per_s\": [{}]}}",
        tests_json.empty() ? "" : ",", JsonQuote(t.name), t.tokens, t.depth,
        t.median(), t.min(), t.max(), reps);
  }
  std::string paired;
  for (double v : paired_shares)
    paired += fmt::format("{}{:.4f}", paired.empty() ? "" : ", ", v);
  std::string paired_gbps_json;
  for (double v : paired_gbps) {
    paired_gbps_json +=
        fmt::format("{}{:.2f}", paired_gbps_json.empty() ? "" : ", ", v);
  }
  return fmt::format(
      "{{\n  \"schema\": \"redline.bench-model.v1\",\n  \"model\": {},\n  "
      "\"model_name\": {},\n  \"arch\": {},\n"
      "  \"weight_types\": {},\n  \"params\": {},\n  \"weight_bytes\": {},\n  "
      "\"decode_bytes_per_token\": {},\n"
      "  \"threads\": {},\n  \"isa\": {},\n  \"kv_type\": {},\n"
      "  \"weight_layout\": {},\n  \"tests\": [{}\n  ],\n"
      "  \"bandwidth_gbps\": {{\"read\": {:.2f}, \"copy\": {:.2f}, \"triad\": "
      "{:.2f}, \"best\": {:.2f}}},\n"
      "  \"decode_roofline_share\": {:.4f},\n"
      "  \"decode_roofline_share_paired\": {:.4f},\n"
      "  \"decode_roofline_shares_paired\": [{}],\n"
      "  \"decode_paired_bandwidth_gbps\": [{}],\n"
      "  \"decode_fits_in_cache\": {}\n}}\n",
      JsonQuote(model_path), JsonQuote(model_name), JsonQuote(arch),
      JsonQuote(weight_types), params, weight_bytes, decode_bytes_per_token,
      threads, JsonQuote(isa), JsonQuote(kv_type), JsonQuote(weight_layout),
      tests_json, bandwidth.read_gbps, bandwidth.copy_gbps,
      bandwidth.triad_gbps, bandwidth.best_gbps(), roofline_share,
      paired_share(), paired, paired_gbps_json,
      fits_in_cache() ? "true" : "false");
}

}  // namespace redline::engine

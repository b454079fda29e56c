#include "quant/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/thread_pool.h"
#include "model/arch/kv_cache.h"
#include "model/arch/transformer.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::quant {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// One model set up to evaluate chunks: its forward pass and a cache reused
// by every chunk (each chunk overwrites positions 0.. before reading them).
class ChunkRunner {
 public:
  ChunkRunner(const model::Model& m, ThreadPool& pool, int64_t n_ctx,
              model::KvType kv_type)
      : tf_(m.config(), m.weights(), pool, n_ctx),
        cache_(GgmlCache(tf_, n_ctx, kv_type)),
        n_vocab_(m.config().vocab_size) {}

  // llama.cpp's default KV cache is F16; match its rounding, and its
  // attention arithmetic, so perplexities compare to 0.1 %. The arithmetic
  // is set first: it needs the rows layout, which NewCache then gives.
  static model::KvCache GgmlCache(model::Transformer& tf, int64_t n_ctx,
                                  model::KvType kv_type) {
    tf.set_ggml_f16_attention(true);
    return tf.NewCache(n_ctx, kv_type);
  }

  // Logits of every position of `tokens` into logits_ (rows in order).
  Status Run(std::span<const int32_t> tokens, double* seconds) {
    batch_.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      batch_[i] =
          model::BatchToken{tokens[i], static_cast<int64_t>(i), &cache_, true};
    }
    logits_.resize(tokens.size() * static_cast<size_t>(n_vocab_));
    const auto start = std::chrono::steady_clock::now();
    Status s = tf_.Forward(batch_, logits_);
    *seconds += SecondsSince(start);
    return s;
  }

  // Decode tok/s: the median of three runs of single-token steps over
  // `tokens` (a tiny model decodes a token in microseconds, so one run is
  // at the mercy of the scheduler).
  Result<double> TimeDecode(std::span<const int32_t> tokens) {
    std::vector<float> last(static_cast<size_t>(n_vocab_));
    // One untimed step first: the switch from chunk-sized batches to single
    // tokens (scratch, caches) is not decode speed.
    RL_RETURN_IF_ERROR(tf_.ForwardSequence(tokens.first(1), 0, cache_, last));
    std::vector<double> rates;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      for (size_t i = 0; i < tokens.size(); ++i) {
        RL_RETURN_IF_ERROR(tf_.ForwardSequence(
            tokens.subspan(i, 1), static_cast<int64_t>(i), cache_, last));
      }
      const double s = SecondsSince(start);
      rates.push_back(s > 0 ? static_cast<double>(tokens.size()) / s : 0.0);
    }
    std::sort(rates.begin(), rates.end());
    return rates[1];
  }

  const float* row(int64_t i) const { return logits_.data() + i * n_vocab_; }
  int64_t n_vocab() const { return n_vocab_; }

 private:
  model::Transformer tf_;
  model::KvCache cache_;
  int64_t n_vocab_;
  std::vector<model::BatchToken> batch_;
  std::vector<float> logits_;
};

int64_t ArgMax(const float* x, int64_t n) {
  return std::max_element(x, x + n) - x;
}

// KL(P || Q) for logits p (reference) and q, in double.
double KlDivergence(const float* p, const float* q, int64_t n) {
  const float pmax = *std::max_element(p, p + n);
  const float qmax = *std::max_element(q, q + n);
  double psum = 0;
  double qsum = 0;
  for (int64_t i = 0; i < n; ++i) {
    psum += std::exp(static_cast<double>(p[i]) - pmax);
    qsum += std::exp(static_cast<double>(q[i]) - qmax);
  }
  const double plog = std::log(psum);
  const double qlog = std::log(qsum);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double lp = static_cast<double>(p[i]) - pmax - plog;
    const double lq = static_cast<double>(q[i]) - qmax - qlog;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(kl, 0.0);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct NllSums {
  double nll = 0;
  double nll2 = 0;
  int64_t count = 0;
  double Ppl() const {
    return count > 0 ? std::exp(nll / static_cast<double>(count)) : 0;
  }
  double Stderr() const {
    if (count < 2) return 0;
    const double mean = nll / static_cast<double>(count);
    const double var = nll2 / static_cast<double>(count) - mean * mean;
    return var > 0 ? std::sqrt(var / static_cast<double>(count - 1)) * Ppl()
                   : 0;
  }
};

}  // namespace

double LogSoftmaxAt(const float* logits, int64_t n_vocab, int32_t token) {
  float max_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
  }
  double sum_exp = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    sum_exp += std::exp(logits[i] - max_logit);
  }
  return logits[token] - max_logit - std::log(sum_exp);
}

Result<EvalResult> EvaluatePerplexity(const model::Model& model,
                                      const std::string& text,
                                      const EvalOptions& options,
                                      const model::Model* reference) {
  const model::Tokenizer* tok = model.tokenizer();
  if (tok == nullptr) {
    return Status::InvalidArgument(
        fmt::format("the model has no usable tokenizer: {}",
                    model.tokenizer_status().ToString()));
  }
  const int64_t n_ctx = options.n_ctx;
  if (n_ctx < 4 || n_ctx > (int64_t{1} << 16)) {
    return Status::InvalidArgument(
        fmt::format("--ctx {} out of range (4..65536)", n_ctx));
  }
  const int64_t n_vocab = model.config().vocab_size;
  if (reference != nullptr && reference->config().vocab_size != n_vocab) {
    return Status::InvalidArgument(fmt::format(
        "the reference model has {} tokens in its vocabulary, the model {}",
        reference->config().vocab_size, n_vocab));
  }
  std::vector<int32_t> tokens =
      tok->Encode(text, /*add_special=*/true, /*parse_special=*/false);
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);
  if (n_chunks < 1) {
    return Status::InvalidArgument(
        fmt::format("the text has {} tokens, fewer than one chunk of --ctx {}",
                    tokens.size(), n_ctx));
  }

  ThreadPool pool(options.threads);
  RL_RETURN_IF_ERROR(model::CheckKvType(model.config(), options.kv_type));
  ChunkRunner runner(model, pool, n_ctx, options.kv_type);
  std::optional<ChunkRunner> ref_runner;
  if (reference != nullptr) {
    ref_runner.emplace(*reference, pool, n_ctx, model::KvType::kF16);
  }

  const int32_t bos = tok->bos_id();
  const bool add_bos = tok->add_bos() && bos >= 0;
  const int64_t first = n_ctx / 2;
  EvalResult result;
  result.text_tokens = static_cast<int64_t>(tokens.size());
  NllSums sums;
  NllSums ref_sums;
  std::vector<double> kls;
  int64_t same_top1 = 0;
  double forward_seconds = 0;
  double ref_seconds = 0;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto begin = tokens.begin() + c * n_ctx;
    std::copy(begin, begin + n_ctx, chunk.begin());
    if (add_bos) chunk[0] = bos;
    RL_RETURN_IF_ERROR(runner.Run(chunk, &forward_seconds));
    if (ref_runner) RL_RETURN_IF_ERROR(ref_runner->Run(chunk, &ref_seconds));
    for (int64_t i = first; i < n_ctx - 1; ++i) {
      // The target is the original text token (BOS replaced only the
      // chunk's input at position 0).
      const int32_t next = *(begin + i + 1);
      const double nll = -LogSoftmaxAt(runner.row(i), n_vocab, next);
      sums.nll += nll;
      sums.nll2 += nll * nll;
      ++sums.count;
      if (ref_runner) {
        const double ref_nll = -LogSoftmaxAt(ref_runner->row(i), n_vocab, next);
        ref_sums.nll += ref_nll;
        ref_sums.nll2 += ref_nll * ref_nll;
        ++ref_sums.count;
        kls.push_back(KlDivergence(ref_runner->row(i), runner.row(i), n_vocab));
        if (ArgMax(ref_runner->row(i), n_vocab) ==
            ArgMax(runner.row(i), n_vocab)) {
          ++same_top1;
        }
      }
    }
    result.chunk_ppl.push_back(sums.Ppl());
    if (options.on_chunk) options.on_chunk(c + 1, n_chunks, sums.Ppl());
  }
  result.chunks = n_chunks;
  result.scored_tokens = sums.count;
  result.ppl = sums.Ppl();
  result.ppl_stderr = sums.Stderr();
  if (forward_seconds > 0) {
    result.prefill_tok_per_s =
        static_cast<double>(n_chunks * n_ctx) / forward_seconds;
  }
  if (options.decode_tokens > 0) {
    const int64_t n = std::min<int64_t>(options.decode_tokens, n_ctx);
    RL_ASSIGN_OR_RETURN(
        result.decode_tok_per_s,
        runner.TimeDecode(std::span(tokens).first(static_cast<size_t>(n))));
  }
  if (ref_runner) {
    KlStats kl;
    double total = 0;
    for (double k : kls) total += k;
    kl.mean = total / static_cast<double>(kls.size());
    kl.median = Quantile(kls, 0.5);
    kl.p99 = Quantile(kls, 0.99);
    kl.same_top1_pct = 100.0 * static_cast<double>(same_top1) /
                       static_cast<double>(kls.size());
    kl.ref_ppl = ref_sums.Ppl();
    result.kl = kl;
  }
  return result;
}

}  // namespace redline::quant

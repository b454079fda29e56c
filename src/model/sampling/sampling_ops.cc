#include "model/sampling/sampling_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "kernels/ops.h"

namespace redline::model {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// True for a logit that can still be sampled (not NaN, not -inf).
inline bool IsPossible(float logit) { return logit > -kInf; }

inline bool InVocab(int32_t token, size_t vocab_size) {
  return token >= 0 && static_cast<size_t>(token) < vocab_size;
}

// Copies `tokens` into *scratch (or a local vector) and sorts it, so equal
// tokens form runs. Returns the sorted vector.
std::vector<int32_t>& SortedCopy(std::span<const int32_t> tokens,
                                 std::vector<int32_t>* scratch,
                                 std::vector<int32_t>* local) {
  std::vector<int32_t>& v = scratch != nullptr ? *scratch : *local;
  v.assign(tokens.begin(), tokens.end());
  std::sort(v.begin(), v.end());
  return v;
}

// The body of PortableExp, inlined into the O(n) loops.
inline double ExpInline(double x) {
  if (std::isnan(x)) return x;
  if (x < -745.2) return 0.0;  // below half the smallest subnormal
  if (x > 709.7) return std::numeric_limits<double>::infinity();
  // x = k*ln2 + r with |r| <= ln2/2; ln2 split in two (fdlibm's constants:
  // the high part has trailing zero bits, so k * kLn2Hi is exact).
  constexpr double kLog2e = 1.44269504088896338700e+00;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  // Round to nearest by adding and subtracting 1.5 * 2^52 (exact IEEE ops in
  // the default rounding mode; no libm call, so the loop stays cheap).
  constexpr double kRound = 0x1.8p52;
  const double k = (x * kLog2e + kRound) - kRound;
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  // Taylor polynomial of degree 8, evaluated in Estrin's scheme for a short
  // dependency chain: the remainder |r|^9/9! < 2.1e-10 for |r| <= 0.35,
  // far below float resolution (probabilities are stored as float).
  // Coefficients 1/n! are folded at compile time.
  const double r2 = r * r;
  const double r4 = r2 * r2;
  const double a01 = 1.0 + r;
  const double a23 = 1.0 / 2 + r * (1.0 / 6);
  const double a45 = 1.0 / 24 + r * (1.0 / 120);
  const double a67 = 1.0 / 720 + r * (1.0 / 5040);
  const double p =
      (a01 + r2 * a23) + r4 * ((a45 + r2 * a67) + r4 * (1.0 / 40320));
  // Scale by 2^k, building the power of two from its bits. k is in
  // [-1075, 1024]; split it so each factor is a normal double and the one
  // rounding (into subnormals, if any) happens in the final multiply.
  auto pow2 = [](int64_t e) {  // e in [-1022, 1023]
    return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
  };
  const auto ki = static_cast<int64_t>(k);
  if (ki < -1000) return (p * pow2(ki + 200)) * pow2(-200);
  if (ki > 1000) return (p * pow2(ki - 200)) * pow2(200);
  return p * pow2(ki);
}

// Largest logit of a non-empty list; four accumulators so the loop is not
// bound by the latency of one chain of max operations.
float MaxLogit(const std::vector<Candidate>& items) {
  float m[4] = {items[0].logit, items[0].logit, items[0].logit, items[0].logit};
  size_t i = 0;
  for (; i + 4 <= items.size(); i += 4) {
    for (size_t j = 0; j < 4; ++j) m[j] = std::max(m[j], items[i + j].logit);
  }
  for (; i < items.size(); ++i) m[0] = std::max(m[0], items[i].logit);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

}  // namespace

double PortableExp(double x) { return ExpInline(x); }

void ApplyLogitBias(std::span<float> logits,
                    std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [token, value] : bias) {
    RL_DCHECK(InVocab(token, logits.size())) << "token " << token;
    if (InVocab(token, logits.size())) logits[token] += value;
  }
}

void BanTokens(std::span<float> logits, std::span<const int32_t> tokens) {
  for (int32_t token : tokens) {
    RL_DCHECK(InVocab(token, logits.size())) << "token " << token;
    if (InVocab(token, logits.size())) logits[token] = -kInf;
  }
}

void ApplyRepetitionPenalty(std::span<float> logits,
                            std::span<const int32_t> window, float penalty,
                            std::vector<int32_t>* scratch) {
  if (penalty == 1.0f || window.empty()) return;
  std::vector<int32_t> local;
  std::vector<int32_t>& sorted = SortedCopy(window, scratch, &local);
  for (size_t i = 0; i < sorted.size(); ++i) {
    // Each distinct token once, however often it occurs.
    if (i > 0 && sorted[i] == sorted[i - 1]) continue;
    const int32_t token = sorted[i];
    RL_DCHECK(InVocab(token, logits.size())) << "token " << token;
    if (!InVocab(token, logits.size())) continue;
    float& logit = logits[token];
    logit = logit > 0.0f ? logit / penalty : logit * penalty;
  }
}

void ApplyPresenceFrequencyPenalty(std::span<float> logits,
                                   std::span<const int32_t> tokens,
                                   float presence, float frequency,
                                   std::vector<int32_t>* scratch) {
  if ((presence == 0.0f && frequency == 0.0f) || tokens.empty()) return;
  std::vector<int32_t> local;
  std::vector<int32_t>& sorted = SortedCopy(tokens, scratch, &local);
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    const int32_t token = sorted[i];
    const auto count = static_cast<float>(j - i);
    i = j;
    RL_DCHECK(InVocab(token, logits.size())) << "token " << token;
    if (!InVocab(token, logits.size())) continue;
    logits[token] -= count * frequency + presence;
  }
}

std::span<const int32_t> RepetitionWindow(std::span<const int32_t> history,
                                          int32_t penalty_last_n) {
  if (penalty_last_n < 0) return history;
  const size_t n =
      std::min(history.size(), static_cast<size_t>(penalty_last_n));
  return history.last(n);
}

void ApplyPenalties(std::span<float> logits, std::span<const int32_t> history,
                    size_t num_prompt_tokens, const SamplingParams& params,
                    std::vector<int32_t>* scratch) {
  RL_CHECK(num_prompt_tokens <= history.size())
      << num_prompt_tokens << " prompt tokens in a history of "
      << history.size();
  ApplyRepetitionPenalty(logits,
                         RepetitionWindow(history, params.penalty_last_n),
                         params.repetition_penalty, scratch);
  ApplyPresenceFrequencyPenalty(logits, history.subspan(num_prompt_tokens),
                                params.presence_penalty,
                                params.frequency_penalty, scratch);
}

int32_t Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(
      kernels::Argmax(logits.data(), static_cast<int64_t>(logits.size())));
}

void FillCandidates(std::span<const float> logits, CandidateList* out) {
  out->items.clear();
  out->items.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (IsPossible(logits[i])) {
      out->items.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
    }
  }
  out->sorted = false;
}

void SelectTopK(std::span<const float> logits, int32_t k, CandidateList* out) {
  if (k <= 0) {
    FillCandidates(logits, out);
    return;
  }
  std::vector<Candidate>& heap = out->items;
  heap.clear();
  const size_t cap = std::min(static_cast<size_t>(k), logits.size());
  heap.reserve(cap);
  // Max-heap under CandidateBefore: the front is the entry that ranks last,
  // i.e. the one to evict. Tokens arrive in increasing id order, so a newcomer
  // with a logit equal to the front's ranks after it and is rejected: ties at
  // the boundary keep the lowest ids, as ApplyTopK does.
  float threshold = -kInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float logit = logits[i];
    if (!IsPossible(logit)) continue;
    if (heap.size() < cap) {
      heap.push_back({static_cast<int32_t>(i), logit, 0.0f});
      std::push_heap(heap.begin(), heap.end(), CandidateBefore);
      if (heap.size() == cap) threshold = heap.front().logit;
    } else if (logit > threshold) {
      std::pop_heap(heap.begin(), heap.end(), CandidateBefore);
      heap.back() = {static_cast<int32_t>(i), logit, 0.0f};
      std::push_heap(heap.begin(), heap.end(), CandidateBefore);
      threshold = heap.front().logit;
    }
  }
  std::sort(heap.begin(), heap.end(), CandidateBefore);
  out->sorted = true;
}

void ApplyTemperature(CandidateList* list, float temperature) {
  RL_DCHECK(temperature > 0.0f) << temperature;
  if (temperature == 1.0f) return;
  // One division, then multiplies (a division per token costs ~4x more).
  const float inv = 1.0f / temperature;
  for (Candidate& c : list->items) c.logit *= inv;
}

void ApplyTopK(CandidateList* list, int32_t k) {
  std::vector<Candidate>& items = list->items;
  if (k <= 0 || static_cast<size_t>(k) >= items.size()) return;
  if (!list->sorted) {
    std::nth_element(items.begin(), items.begin() + k, items.end(),
                     CandidateBefore);
    items.resize(k);
    std::sort(items.begin(), items.end(), CandidateBefore);
    list->sorted = true;
  } else {
    items.resize(k);
  }
}

void Softmax(CandidateList* list) {
  std::vector<Candidate>& items = list->items;
  if (items.empty()) return;
  const float max_logit = MaxLogit(items);
  if (!std::isfinite(max_logit)) {
    // +inf: the +inf tokens share all mass. -inf (every logit overflowed
    // under a tiny temperature): nothing to prefer, so uniform.
    for (Candidate& c : items) c.prob = (c.logit == max_logit) ? 1.0f : 0.0f;
  } else {
    for (Candidate& c : items) {
      c.prob = static_cast<float>(ExpInline(static_cast<double>(c.logit) -
                                            static_cast<double>(max_logit)));
    }
  }
  Renormalize(list);
}

namespace {

// Sorts items[begin, end()) into canonical order only as far as needed, in
// growing chunks, and returns the index one past the first element at which
// base + (sum of probs of items[begin, i]) >= target; items.size() when the
// sum never gets there (then everything from begin on is sorted).
size_t SortedPrefixEnd(std::vector<Candidate>& items, size_t begin,
                       double target, double base, bool already_sorted) {
  double cumulative = base;
  size_t sorted_end = begin;
  size_t chunk = already_sorted ? items.size() : 64;
  while (sorted_end < items.size()) {
    const size_t end = std::min(items.size(), sorted_end + chunk);
    if (!already_sorted) {
      if (end < items.size()) {
        std::nth_element(items.begin() + sorted_end, items.begin() + end,
                         items.end(), CandidateBefore);
      }
      std::sort(items.begin() + sorted_end, items.begin() + end,
                CandidateBefore);
    }
    for (size_t i = sorted_end; i < end; ++i) {
      cumulative += items[i].prob;
      if (cumulative >= target) return i + 1;
    }
    sorted_end = end;
    chunk *= 2;
  }
  return items.size();
}

// Buckets for ApplyTopP on large unsorted lists: 1024 buckets of equal width
// in logit over [min, max] put ~150 tokens per bucket for a flat 150k
// vocabulary, and 8 KiB of masses fit in L1.
constexpr size_t kTopPBuckets = 1024;

}  // namespace

void ApplyTopP(CandidateList* list, float top_p) {
  std::vector<Candidate>& items = list->items;
  if (top_p >= 1.0f || items.empty()) return;
  const double target = top_p;

  float max_logit = items.front().logit;
  float min_logit = items.front().logit;
  for (const Candidate& c : items) {
    max_logit = std::max(max_logit, c.logit);
    min_logit = std::min(min_logit, c.logit);
  }
  const double range =
      static_cast<double>(max_logit) - static_cast<double>(min_logit);
  if (list->sorted || items.size() <= kTopPBuckets || !(range > 0.0) ||
      !std::isfinite(range)) {
    // Small, already sorted, flat or with infinities: sort as far as needed.
    const size_t end = SortedPrefixEnd(items, 0, target, 0.0, list->sorted);
    items.resize(end);
    list->sorted = true;
    return;
  }

  // Large and unsorted. Canonical order agrees with bucket order (the bucket
  // index is a monotone function of the logit), so the kept prefix is: every
  // bucket before the one where the mass reaches top_p, plus a canonically
  // sorted prefix of that boundary bucket. Only the boundary bucket is ever
  // sorted, so a flat distribution costs O(n), not O(n log n).
  const double scale = static_cast<double>(kTopPBuckets - 1) / range;
  auto bucket_of = [&](float logit) {
    const double d =
        (static_cast<double>(max_logit) - static_cast<double>(logit)) * scale;
    return std::min(kTopPBuckets - 1, static_cast<size_t>(d));
  };
  std::vector<double> mass(kTopPBuckets, 0.0);
  for (const Candidate& c : items) mass[bucket_of(c.logit)] += c.prob;
  double before = 0.0;  // mass of the buckets ahead of the boundary
  size_t boundary = 0;
  while (boundary < kTopPBuckets && before + mass[boundary] < target) {
    before += mass[boundary++];
  }
  if (boundary == kTopPBuckets) return;  // rounding kept the sum below top_p

  // Compact the buckets ahead of the boundary in place (order kept) and move
  // the boundary bucket aside.
  std::vector<Candidate> edge;
  size_t kept = 0;
  for (const Candidate& c : items) {
    const size_t b = bucket_of(c.logit);
    if (b < boundary) {
      items[kept++] = c;
    } else if (b == boundary) {
      edge.push_back(c);
    }
  }
  const size_t edge_end = SortedPrefixEnd(edge, 0, target, before, false);
  items.resize(kept);
  items.insert(items.end(), edge.begin(), edge.begin() + edge_end);
  list->sorted = kept == 0;  // only then is the whole list in canonical order
}

void ApplyMinP(CandidateList* list, float min_p) {
  std::vector<Candidate>& items = list->items;
  if (min_p <= 0.0f || items.empty()) return;
  float max_prob = 0.0f;
  if (list->sorted) {
    max_prob = items.front().prob;
  } else {
    for (const Candidate& c : items) max_prob = std::max(max_prob, c.prob);
  }
  const double threshold =
      static_cast<double>(min_p) * static_cast<double>(max_prob);
  // std::remove_if is stable: kept candidates keep their order.
  items.erase(std::remove_if(items.begin(), items.end(),
                             [threshold](const Candidate& c) {
                               return static_cast<double>(c.prob) < threshold;
                             }),
              items.end());
}

void Renormalize(CandidateList* list) {
  double sum = 0.0;
  for (const Candidate& c : list->items) sum += c.prob;
  if (!(sum > 0.0)) return;
  const double inv = 1.0 / sum;  // one division, then multiplies
  for (Candidate& c : list->items) {
    c.prob = static_cast<float>(static_cast<double>(c.prob) * inv);
  }
}

int32_t SampleCandidate(const CandidateList& list, double u) {
  const std::vector<Candidate>& items = list.items;
  RL_CHECK(!items.empty()) << "sampling from an empty candidate list";
  double sum = 0.0;
  for (const Candidate& c : items) sum += c.prob;
  const double target = u * sum;
  double cumulative = 0.0;
  for (const Candidate& c : items) {
    cumulative += c.prob;
    if (target < cumulative) return c.token;
  }
  // Only reachable through rounding (u just below 1): take the last token
  // that has any mass.
  for (size_t i = items.size(); i-- > 0;) {
    if (items[i].prob > 0.0f) return items[i].token;
  }
  return items.front().token;
}

void ComputeLogprobs(std::span<const float> logits, int32_t chosen,
                     int32_t top_n, SampleLogprobs* out) {
  RL_CHECK(InVocab(chosen, logits.size())) << "chosen token " << chosen;
  float max_logit = -kInf;
  size_t num_max_inf = 0;
  for (float l : logits) {
    if (std::isnan(l)) continue;
    max_logit = std::max(max_logit, l);
    if (l == kInf) ++num_max_inf;
  }
  // log(sum_i exp(l_i)) = max + log(sum_i exp(l_i - max)).
  double log_sum = 0.0;
  if (std::isfinite(max_logit)) {
    double sum = 0.0;
    for (float l : logits) {
      if (IsPossible(l)) {
        sum +=
            ExpInline(static_cast<double>(l) - static_cast<double>(max_logit));
      }
    }
    log_sum = static_cast<double>(max_logit) + std::log(sum);
  }
  auto logprob = [&](float l) -> float {
    if (!IsPossible(l)) return -kInf;  // NaN and -inf
    if (max_logit == kInf) {
      return l == kInf ? static_cast<float>(
                             -std::log(static_cast<double>(num_max_inf)))
                       : -kInf;
    }
    return static_cast<float>(static_cast<double>(l) - log_sum);
  };
  out->chosen = {chosen, logprob(logits[chosen])};

  // Top-n: an insertion-sorted buffer of at most n entries; most logits fail
  // the comparison with the current last entry and cost one compare.
  out->top.clear();
  const size_t n =
      std::min(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0) return;
  std::vector<Candidate> best;
  best.reserve(n + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    const Candidate c{static_cast<int32_t>(i), logits[i], 0.0f};
    if (best.size() == n && !CandidateBefore(c, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, CandidateBefore),
                c);
    if (best.size() > n) best.pop_back();
  }
  for (const Candidate& c : best)
    out->top.push_back({c.token, logprob(c.logit)});
}

}  // namespace redline::model

#include "model/sampling/sampling_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

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

}  // namespace

double PortableExp(double x) {
  if (std::isnan(x)) return x;
  if (x < -745.2) return 0.0;  // below the smallest subnormal
  if (x > 709.7) return std::numeric_limits<double>::infinity();
  // x = k*ln2 + r with |r| <= ln2/2; ln2 split in two (fdlibm's constants:
  // the high part has trailing zero bits, so k * kLn2Hi is exact).
  constexpr double kLog2e = 1.44269504088896338700e+00;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double k = std::floor(x * kLog2e + 0.5);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  // Taylor series to degree 12: the remainder |r|^13/13! < 1e-16 for
  // |r| <= 0.35. Coefficients 1/n! are folded at compile time.
  constexpr double c[] = {1.0,
                          1.0,
                          1.0 / 2,
                          1.0 / 6,
                          1.0 / 24,
                          1.0 / 120,
                          1.0 / 720,
                          1.0 / 5040,
                          1.0 / 40320,
                          1.0 / 362880,
                          1.0 / 3628800,
                          1.0 / 39916800,
                          1.0 / 479001600};
  double p = c[12];
  for (int i = 11; i >= 0; --i) p = p * r + c[i];
  return std::ldexp(p, static_cast<int>(k));
}

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

void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> window,
                            float penalty, std::vector<int32_t>* scratch) {
  if (penalty == 1.0f || window.empty()) return;
  std::vector<int32_t> local;
  std::vector<int32_t>& sorted = SortedCopy(window, scratch, &local);
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i] == sorted[i - 1]) continue;  // once per distinct token
    const int32_t token = sorted[i];
    RL_DCHECK(InVocab(token, logits.size())) << "token " << token;
    if (!InVocab(token, logits.size())) continue;
    float& logit = logits[token];
    logit = logit > 0.0f ? logit / penalty : logit * penalty;
  }
}

void ApplyPresenceFrequencyPenalty(std::span<float> logits,
                                   std::span<const int32_t> tokens, float presence,
                                   float frequency, std::vector<int32_t>* scratch) {
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
  const size_t n = std::min(history.size(), static_cast<size_t>(penalty_last_n));
  return history.last(n);
}

void ApplyPenalties(std::span<float> logits, std::span<const int32_t> history,
                    size_t num_prompt_tokens, const SamplingParams& params,
                    std::vector<int32_t>* scratch) {
  RL_CHECK(num_prompt_tokens <= history.size())
      << num_prompt_tokens << " prompt tokens in a history of " << history.size();
  ApplyRepetitionPenalty(logits, RepetitionWindow(history, params.penalty_last_n),
                         params.repetition_penalty, scratch);
  ApplyPresenceFrequencyPenalty(logits, history.subspan(num_prompt_tokens),
                                params.presence_penalty, params.frequency_penalty,
                                scratch);
}

int32_t Argmax(std::span<const float> logits) {
  size_t best = logits.size();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    // Strictly greater keeps the first (lowest id) of equal maxima.
    if (best == logits.size() || logits[i] > logits[best]) best = i;
  }
  return best == logits.size() ? 0 : static_cast<int32_t>(best);
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
  for (Candidate& c : list->items) c.logit /= temperature;
}

void ApplyTopK(CandidateList* list, int32_t k) {
  std::vector<Candidate>& items = list->items;
  if (k <= 0 || static_cast<size_t>(k) >= items.size()) return;
  if (!list->sorted) {
    std::nth_element(items.begin(), items.begin() + k, items.end(), CandidateBefore);
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
  float max_logit = -kInf;
  for (const Candidate& c : items) max_logit = std::max(max_logit, c.logit);
  if (!std::isfinite(max_logit)) {
    // +inf: the +inf tokens share all mass. -inf (every logit overflowed
    // under a tiny temperature): nothing to prefer, so uniform.
    for (Candidate& c : items) c.prob = (c.logit == max_logit) ? 1.0f : 0.0f;
  } else {
    for (Candidate& c : items) {
      c.prob = static_cast<float>(
          PortableExp(static_cast<double>(c.logit) - static_cast<double>(max_logit)));
    }
  }
  Renormalize(list);
}

void ApplyTopP(CandidateList* list, float top_p) {
  std::vector<Candidate>& items = list->items;
  if (top_p >= 1.0f || items.empty()) return;
  const double target = top_p;
  double cumulative = 0.0;
  size_t sorted_end = 0;
  // Canonical order by logit equals descending prob order (prob is monotone
  // in logit), with the token-id tie break that probs alone cannot give.
  size_t chunk = list->sorted ? items.size() : 64;
  while (sorted_end < items.size()) {
    const size_t end = std::min(items.size(), sorted_end + chunk);
    if (!list->sorted) {
      if (end < items.size()) {
        std::nth_element(items.begin() + sorted_end, items.begin() + end, items.end(),
                         CandidateBefore);
      }
      std::sort(items.begin() + sorted_end, items.begin() + end, CandidateBefore);
    }
    for (size_t i = sorted_end; i < end; ++i) {
      cumulative += items[i].prob;
      if (cumulative >= target) {
        items.resize(i + 1);
        list->sorted = true;
        return;
      }
    }
    sorted_end = end;
    chunk *= 2;
  }
  list->sorted = true;  // everything kept, and now fully sorted
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
  const double threshold = static_cast<double>(min_p) * static_cast<double>(max_prob);
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
  for (Candidate& c : list->items) {
    c.prob = static_cast<float>(static_cast<double>(c.prob) / sum);
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

void ComputeLogprobs(std::span<const float> logits, int32_t chosen, int32_t top_n,
                     SampleLogprobs* out) {
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
        sum += PortableExp(static_cast<double>(l) - static_cast<double>(max_logit));
      }
    }
    log_sum = static_cast<double>(max_logit) + std::log(sum);
  }
  auto logprob = [&](float l) -> float {
    if (!IsPossible(l)) return -kInf;  // NaN and -inf
    if (max_logit == kInf) {
      return l == kInf ? static_cast<float>(-std::log(static_cast<double>(num_max_inf)))
                       : -kInf;
    }
    return static_cast<float>(static_cast<double>(l) - log_sum);
  };
  out->chosen = {chosen, logprob(logits[chosen])};

  // Top-n: an insertion-sorted buffer of at most n entries; most logits fail
  // the comparison with the current last entry and cost one compare.
  out->top.clear();
  const size_t n = std::min(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0) return;
  std::vector<Candidate> best;
  best.reserve(n + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    const Candidate c{static_cast<int32_t>(i), logits[i], 0.0f};
    if (best.size() == n && !CandidateBefore(c, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, CandidateBefore), c);
    if (best.size() > n) best.pop_back();
  }
  for (const Candidate& c : best) out->top.push_back({c.token, logprob(c.logit)});
}

}  // namespace redline::model

#include "engine/prompt_lookup.h"

#include <algorithm>

namespace redline::engine {

std::vector<int32_t> DraftFromHistory(std::span<const int32_t> history,
                                      int max_tokens, int ngram_max,
                                      int ngram_min) {
  std::vector<int32_t> draft;
  const int64_t len = static_cast<int64_t>(history.size());
  if (max_tokens <= 0 || len < 2) return draft;
  const int64_t begin = std::max<int64_t>(0, len - kMaxLookback);
  for (int n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min && n >= 1;
       --n) {
    const int32_t* tail = history.data() + len - n;
    // The latest earlier occurrence: scan backwards from just before the
    // tail (the match may overlap it, as in a repeating pattern).
    for (int64_t start = len - n - 1; start >= begin; --start) {
      if (!std::equal(tail, tail + n, history.data() + start)) continue;
      const int64_t from = start + n;
      // What followed the match; past the end of the history it continues
      // with the draft itself (the history's next tokens), so a repeating
      // pattern drafts more than one period.
      draft.reserve(static_cast<size_t>(max_tokens));
      for (int64_t j = 0; j < max_tokens; ++j) {
        const int64_t at = from + j;
        draft.push_back(at < len ? history[at] : draft[at - len]);
      }
      return draft;
    }
  }
  return draft;
}

int DraftController::NextLength() {
  if (k_ > 0 || shadow_) return k_;
  // A draft model's proposals cost passes of their own, so they cannot be
  // shadowed for free; probe now and then, since the output may start
  // quoting its input later.
  if (++idle_steps_ >= kProbeInterval) {
    idle_steps_ = 0;
    return std::min(2, max_);
  }
  return 0;
}

void DraftController::Record(int drafted, int accepted) {
  if (drafted <= 0) return;
  if (accepted >= drafted) {
    k_ = std::min(max_, std::max(1, k_) * 2);
  } else if (accepted == 0) {
    // Halving would verify three more rejected drafts on an output that
    // does not repeat its input; the shadow notices when it starts to.
    if (shadow_) resume_ = k_;
    k_ = shadow_ ? 0 : k_ / 2;
  } else {
    k_ = std::max(1, std::min(k_, accepted + 1));
  }
}

void DraftController::RecordShadow(bool hit) {
  if (hit && k_ == 0) k_ = std::max(1, resume_);
}

}  // namespace redline::engine

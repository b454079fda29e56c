#include "model/sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace redline::model {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
  }
  return "";
}

size_t IncompleteUtf8Suffix(std::string_view text) {
  // Walk back over at most 3 continuation bytes (10xxxxxx) to a lead byte.
  const size_t limit = std::min<size_t>(text.size(), 4);
  for (size_t back = 1; back <= limit; ++back) {
    const auto byte = static_cast<unsigned char>(text[text.size() - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation: keep looking
    size_t needed = 1;  // ASCII or a byte that is never a lead
    if (byte >= 0xC2 && byte <= 0xDF) {
      needed = 2;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      needed = 3;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      needed = 4;
    }
    return needed > back ? back : 0;
  }
  return 0;  // only continuation bytes: invalid, nothing to wait for
}

StopMatcher::StopMatcher(std::span<const std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    stops_.push_back(stops[i]);
    stop_index_.push_back(static_cast<int>(i));
  }
}

size_t StopMatcher::StopPrefixSuffix() const {
  const std::string_view held = held_;
  size_t best = 0;
  for (const std::string& stop : stops_) {
    // Longest first; only lengths that would beat the current best.
    for (size_t len = std::min(stop.size() - 1, held.size()); len > best;
         --len) {
      if (held.substr(held.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

bool StopMatcher::Feed(std::string_view piece, std::string* out) {
  if (stopped_) return true;
  held_.append(piece);

  // Earliest-ending match; among equal ends the longest (earliest start).
  // find() gives each stop's earliest start, which is also its earliest end.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  int best = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t start = held_.find(stops_[i]);
    if (start == std::string::npos) continue;
    const size_t end = start + stops_[i].size();
    if (best < 0 || end < best_end || (end == best_end && start < best_start)) {
      best = static_cast<int>(i);
      best_start = start;
      best_end = end;
    }
  }
  if (best >= 0) {
    // The match cannot start before held_: any text that could begin a stop
    // was held back by the previous call.
    out->append(held_, 0, best_start);
    held_.clear();
    stopped_ = true;
    matched_stop_ = stop_index_[best];
    return true;
  }

  const size_t hold = std::max(StopPrefixSuffix(), IncompleteUtf8Suffix(held_));
  const size_t emit = held_.size() - hold;
  out->append(held_, 0, emit);
  held_.erase(0, emit);
  return false;
}

void StopMatcher::Flush(std::string* out) {
  if (stopped_) return;
  out->append(held_);
  held_.clear();
}

EndOfGenerationSet::EndOfGenerationSet(std::vector<int32_t> tokens)
    : tokens_(std::move(tokens)) {
  std::sort(tokens_.begin(), tokens_.end());
  tokens_.erase(std::unique(tokens_.begin(), tokens_.end()), tokens_.end());
}

bool EndOfGenerationSet::Contains(int32_t token) const {
  return std::binary_search(tokens_.begin(), tokens_.end(), token);
}

FinishChecker::FinishChecker(const SamplingParams& params,
                             EndOfGenerationSet eog)
    : matcher_(params.stop),
      eog_(std::move(eog)),
      max_tokens_(params.max_tokens),
      ignore_eos_(params.ignore_eos) {}

FinishReason FinishChecker::Accept(int32_t token, std::string_view piece,
                                   std::string* out) {
  RL_CHECK(finish_ == FinishReason::kNone)
      << "Accept() after the sequence finished";
  ++num_generated_;
  if (!ignore_eos_ && eog_.Contains(token)) {
    matcher_.Flush(out);
    finish_ = FinishReason::kStop;
  } else if (matcher_.Feed(piece, out)) {
    finish_ = FinishReason::kStop;
  } else if (max_tokens_ >= 0 && num_generated_ >= max_tokens_) {
    matcher_.Flush(out);
    finish_ = FinishReason::kLength;
  }
  return finish_;
}

void FinishChecker::Finish(FinishReason reason, std::string* out) {
  RL_DCHECK(reason != FinishReason::kNone);
  if (finish_ != FinishReason::kNone) return;
  matcher_.Flush(out);
  finish_ = reason;
}

}  // namespace redline::model

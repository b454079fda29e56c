#include "model/sampling/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string_view>

namespace redline::model {
namespace {

// Formats "<field> must be <range>, got <value>".
template <typename T>
Status RangeError(std::string_view field, std::string_view range, T value) {
  std::ostringstream os;
  os << field << " must be " << range << ", got " << value;
  return Status::InvalidArgument(os.str());
}

}  // namespace

Status SamplingParams::Validate(int64_t vocab_size) const {
  // Every float test is written so that NaN fails it.
  if (!(temperature >= 0.0f && temperature <= kMaxTemperature)) {
    return RangeError("temperature", "in [0, 100]", temperature);
  }
  if (top_k < -1) {
    return RangeError("top_k", ">= 0 (or -1 for off)", top_k);
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return RangeError("top_p", "in (0, 1]", top_p);
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return RangeError("min_p", "in [0, 1]", min_p);
  }
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    return RangeError("repetition_penalty", "finite and > 0",
                      repetition_penalty);
  }
  if (penalty_last_n < -1) {
    return RangeError("penalty_last_n", ">= -1 (-1 = whole context)",
                      penalty_last_n);
  }
  if (!(std::fabs(presence_penalty) <= kMaxAbsPresenceFrequencyPenalty)) {
    return RangeError("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  if (!(std::fabs(frequency_penalty) <= kMaxAbsPresenceFrequencyPenalty)) {
    return RangeError("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size) {
      std::ostringstream os;
      os << "logit_bias token id " << token << " is outside the vocabulary [0, "
         << vocab_size << ")";
      return Status::InvalidArgument(os.str());
    }
    if (!(std::fabs(bias) <= kMaxAbsLogitBias)) {
      std::ostringstream os;
      os << "logit_bias for token " << token << " must be in [-100, 100], got "
         << bias;
      return Status::InvalidArgument(os.str());
    }
  }
  if (max_tokens != -1 && max_tokens < 1) {
    return RangeError("max_tokens", ">= 1 (or unset)", max_tokens);
  }
  if (min_tokens < 0) {
    return RangeError("min_tokens", ">= 0", min_tokens);
  }
  if (max_tokens != -1 && min_tokens > max_tokens) {
    std::ostringstream os;
    os << "min_tokens (" << min_tokens << ") must not exceed max_tokens ("
       << max_tokens << ")";
    return Status::InvalidArgument(os.str());
  }
  if (stop.size() > kMaxStopStrings) {
    return RangeError("the number of stop strings", "at most 16", stop.size());
  }
  for (const std::string& s : stop) {
    if (s.size() > kMaxStopStringBytes) {
      return RangeError("each stop string", "at most 256 bytes", s.size());
    }
  }
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    return RangeError("top_logprobs", "in [0, 20]", top_logprobs);
  }
  if (top_logprobs > 0 && !logprobs) {
    return Status::InvalidArgument("top_logprobs requires logprobs to be true");
  }
  return Status::Ok();
}

Result<SamplingParams> SamplingParams::Resolve(int64_t vocab_size,
                                               int64_t n_ctx,
                                               int64_t prompt_tokens) const {
  RL_RETURN_IF_ERROR(Validate(vocab_size));
  if (prompt_tokens >= n_ctx) {
    std::ostringstream os;
    os << kPromptTooLongPrefix << ": it has " << prompt_tokens
       << " tokens and the context holds " << n_ctx
       << ", which must leave room for at least one generated token";
    return Status::OutOfRange(os.str());
  }
  const int64_t room = n_ctx - prompt_tokens;  // >= 1
  SamplingParams resolved = *this;
  if (max_tokens == -1) {
    if (min_tokens > room) {
      std::ostringstream os;
      os << "min_tokens (" << min_tokens << ") must not exceed the " << room
         << " tokens the context of " << n_ctx << " leaves after the prompt's "
         << prompt_tokens;
      return Status::InvalidArgument(os.str());
    }
    resolved.max_tokens = static_cast<int32_t>(
        std::min<int64_t>(room, std::numeric_limits<int32_t>::max()));
  } else if (max_tokens > room) {
    std::ostringstream os;
    os << "max_tokens (" << max_tokens << ") is too large: the prompt's "
       << prompt_tokens << " tokens + " << max_tokens
       << " exceed the context of " << n_ctx << " tokens";
    return Status::OutOfRange(os.str());
  }
  return resolved;
}

bool IsPromptTooLong(const Status& status) {
  return status.code() == StatusCode::kOutOfRange &&
         std::string_view(status.message()).starts_with(kPromptTooLongPrefix);
}

}  // namespace redline::model

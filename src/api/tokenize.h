// The /tokenize and /detokenize extensions (llama.cpp's and vLLM's shapes,
// both accepted): request parsing and response building, with a bound on
// the response size so that a large input cannot make a huge body.
//
// Thread-safety: plain values and pure functions. Cost: linear in the input.
#ifndef REDLINE_API_TOKENIZE_H_
#define REDLINE_API_TOKENIZE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/request.h"
#include "base/result.h"

namespace redline::api {

struct TokenizeRequest {
  std::string model;  // "" when absent (llama.cpp's shape has none)
  // llama.cpp: "content" (add_special default false); vLLM: "prompt"
  // (add_special_tokens default true) or "messages".
  std::string text;
  std::vector<ChatMessage> messages;  // non-empty: render the chat first
  bool add_special = false;
  bool with_pieces = false;
};

// Errors: InvalidArgument with *error_param naming the field.
Result<TokenizeRequest> ParseTokenizeRequest(std::string_view body,
                                             std::string* error_param);

// {"tokens": [ids] or [{"id", "piece"}], "count", "max_model_len"}.
// `pieces` (same length as ids) when with_pieces. ResourceExhausted when the
// body would exceed max_bytes.
Result<std::string> BuildTokenizeResponse(
    const std::vector<int32_t>& ids, const std::vector<std::string>* pieces,
    int64_t max_model_len, size_t max_bytes);

// {"tokens": [ids]}: the ids as sent (range-checked by the caller against
// its vocabulary). Errors: InvalidArgument.
Result<std::vector<int64_t>> ParseDetokenizeRequest(std::string_view body);

// {"content": text, "prompt": text}. ResourceExhausted over max_bytes.
Result<std::string> BuildDetokenizeResponse(std::string_view text,
                                            size_t max_bytes);

}  // namespace redline::api

#endif  // REDLINE_API_TOKENIZE_H_

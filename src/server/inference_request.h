// InferenceRequest: a /v1/chat/completions or /v1/completions body, parsed
// and type-checked (serving.md §2).
//
// Rules: unknown fields are ignored (SDKs send extras); `null` means
// "absent"; a known field with the wrong JSON type, or a value outside its
// range, is an error that names the field (`param`). Sampling ranges that
// depend on the model (token ids, vocabulary) are checked later by
// SamplingParams::Validate at admission; n against the slots by the server.
//
// Why not api::ParseRequest: that parser serves the bench (client side) and
// keeps only what a load generator sends; the server needs every field, the
// raw chat messages for the template, token-id prompts and per-field errors.
//
// Thread-safety: pure functions. Cost: one JSON parse of the body plus a
// copy of the messages.
#ifndef REDLINE_SERVER_INFERENCE_REQUEST_H_
#define REDLINE_SERVER_INFERENCE_REQUEST_H_

#include <boost/json/array.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/openai.h"
#include "base/status.h"
#include "model/sampling/sampling_params.h"

namespace redline::server {

// OpenAI documents completions' max_tokens default as 16; chat has none (the
// context bounds it).
inline constexpr int32_t kCompletionsDefaultMaxTokens = 16;
// Hard cap on "n" before the server's own bound (--max-n, --parallel).
inline constexpr int kMaxChoices = 128;

struct InferenceRequest {
  api::ApiKind kind = api::ApiKind::kChat;
  std::string model;  // "" when absent
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats
                                  // (vLLM): usage on every chunk
  int n = 1;
  // max_tokens = -1 when the client set none (chat); the engine then bounds
  // it by the context. logprobs/top_logprobs as in the OpenAI API of `kind`.
  model::SamplingParams sampling;
  std::string user;

  // Chat: the messages as sent, with every `content` flattened to a string
  // (text parts joined) or null; `tools` as sent (empty when absent).
  boost::json::array messages;
  boost::json::array tools;

  // Completions: text, or token ids when the prompt was given as integers.
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
};

// Parses `body` for the API `kind`. Errors: InvalidArgument (malformed JSON,
// wrong type, bad range, missing required field) or Unimplemented (a valid
// feature this server does not offer: echo, suffix, best_of, non-text
// response_format, image parts); *error_param names the field ("messages",
// "temperature", "messages[2].content", ...), empty for body-level errors.
Status ParseInferenceRequest(std::string_view body, api::ApiKind kind,
                             InferenceRequest* out, std::string* error_param);

// The field a SamplingParams::Validate message is about ("top_p must be in
// ..." -> "top_p"), or empty.
std::string ParamOfValidationMessage(std::string_view message);

}  // namespace redline::server

#endif  // REDLINE_SERVER_INFERENCE_REQUEST_H_

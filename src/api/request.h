// CompletionRequest: one /v1/chat/completions or /v1/completions request,
// and its codec — ParseRequest (server side: every field type- and
// range-checked, errors naming the field) and SerializeRequest (client
// side). The one model of an OpenAI request in the code base: redline serve,
// the gateway, the bench and the test servers all use it.
//
// Parsing rules: unknown fields are ignored (SDKs send extras); `null` means
// "absent"; a known field with the wrong JSON type, or a value outside the
// range the API documents, is InvalidArgument with `param` naming the field;
// a valid feature this code base does not offer (echo, suffix, best_of > 1,
// non-text response_format, image parts, several prompts) is Unimplemented.
// Ranges that depend on a model (token ids against the vocabulary, prompt
// length against the context) and server policy (n against the slots) are
// checked later by whoever knows them.
//
// Thread-safety: plain values and pure functions. Cost: one JSON parse of
// the body plus a copy of each message's text.
#ifndef REDLINE_API_REQUEST_H_
#define REDLINE_API_REQUEST_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/types.h"
#include "base/result.h"
#include "base/status.h"

namespace redline::api {

// OpenAI documents completions' max_tokens default as 16; chat has none (the
// context bounds it). Applied by the serving side, not by the parser.
inline constexpr int64_t kCompletionsDefaultMaxTokens = 16;
// Largest "n" any request may ask for (a server may allow fewer).
inline constexpr int kMaxChoices = 128;
// OpenAI allows top_logprobs (chat) and logprobs (completions) 0..20.
inline constexpr int kMaxTopLogprobs = 20;

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c)
      : role(std::move(r)), content(std::move(c)) {}

  std::string role;     // system, developer, user, assistant, tool, function
  std::string content;  // text parts joined
  // "content": null, as an assistant message that carries tool_calls has.
  bool content_null = false;
  // Every other member of the message as sent (tool_calls, tool_call_id,
  // name, reasoning_content, ...), for the chat template.
  boost::json::object extra;
};

// Sampling and length fields; unset optionals were absent (or null) and are
// not sent. Defaults are the serving side's policy.
struct SamplingParams {
  // max_tokens, or max_completion_tokens (the newer name) when given.
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> frequency_penalty;
  std::optional<double> presence_penalty;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> seed;
  std::optional<int64_t> min_tokens;  // vLLM / llama.cpp extension
  std::optional<bool> ignore_eos;     // vLLM / llama.cpp extension
  // Redline extension: false opts this request out of speculative decoding
  // (when the server has it on); the output is the same either way.
  std::optional<bool> speculative;
  std::vector<std::string> stop;
  // Token id -> bias, in the order sent.
  std::vector<std::pair<int32_t, double>> logit_bias;
  // Chat: "logprobs": true; completions: "logprobs": N sets this and
  // top_logprobs = N.
  bool logprobs = false;
  int64_t top_logprobs = 0;
};

// One request to either API. For kChat `messages` is used, for kCompletions
// `prompt` or `prompt_ids`.
struct CompletionRequest {
  ApiKind kind = ApiKind::kChat;
  std::string model;  // "" when absent
  std::vector<ChatMessage> messages;
  boost::json::array tools;  // as sent; empty when absent
  std::string prompt;
  // A prompt given as token ids; `prompt` is then empty.
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  // Client-side defaults (what a load generator sends); ParseRequest sets
  // both from the body (absent: false).
  bool stream = true;
  bool include_usage = true;      // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats
  int n = 1;
  std::string user;
  // Serialize only: a JSON object whose members are added at top level,
  // overriding fields above of the same name (e.g. {"logprobs": true}).
  std::string extra_json;

  bool prompt_is_ids() const { return !prompt_ids.empty(); }
};

// Serializes to the OpenAI wire format. Fails only on invalid extra_json.
Result<std::string> SerializeRequest(const CompletionRequest& request);

// Parses a request body for the API `kind`. On error, *error_param (when
// given) names the field ("messages", "temperature", "messages[2].content",
// ...), empty for body-level errors.
Result<CompletionRequest> ParseRequest(std::string_view body, ApiKind kind,
                                       std::string* error_param = nullptr);
// The same, and on success moves the parsed body (the JSON object) into
// *parsed_body, so a caller that reads members the codec does not model
// (the gateway's cache key and overrides) needs no second parse.
Result<CompletionRequest> ParseRequest(std::string_view body, ApiKind kind,
                                       std::string* error_param,
                                       boost::json::object* parsed_body);

// The messages as the JSON array a chat template reads: role, content
// (string or null) and every extra member.
boost::json::array MessagesToJson(const std::vector<ChatMessage>& messages);

}  // namespace redline::api

#endif  // REDLINE_API_REQUEST_H_

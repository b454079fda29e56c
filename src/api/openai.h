// OpenAI-compatible request, response and stream-chunk types with their JSON
// codec (Boost.JSON inside openai.cc). Shared by bench (client side) and the
// server (server side), so both read and write the same wire format:
// serving.md §3 and metrics.md §2/§9 describe the fields that matter.
//
// Only what Redline needs is modelled; unknown fields are ignored when
// parsing, and callers may add raw JSON fields when serializing.
//
// Thread-safety: plain values and free functions; thread-compatible.
// Cost: parsing a stream chunk does not allocate beyond the output strings
// (a small stack arena backs the JSON tree).
#ifndef REDLINE_API_OPENAI_H_
#define REDLINE_API_OPENAI_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace redline::api {

enum class ApiKind { kChat, kCompletions };

// "/v1/chat/completions" or "/v1/completions" relative to the API root
// ("chat/completions" / "completions").
std::string_view ApiPath(ApiKind kind);

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
};

// Sampling and length fields; unset fields are not sent.
struct SamplingParams {
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
  std::vector<std::string> stop;
};

// One request to either API. For kChat `messages` is used, for kCompletions
// `prompt`.
struct CompletionRequest {
  ApiKind kind = ApiKind::kChat;
  std::string model;
  std::vector<ChatMessage> messages;
  std::string prompt;
  SamplingParams sampling;
  bool stream = true;
  bool include_usage = true;  // stream_options.include_usage (streaming only)
  // A JSON object whose members are added at top level, overriding fields
  // above of the same name (e.g. {"logprobs": true}). Empty for none.
  std::string extra_json;
};

// Serializes to the OpenAI wire format. Fails only on invalid extra_json.
Result<std::string> SerializeRequest(const CompletionRequest& request);

// Parses a request body (server side). `kind` selects which API's required
// fields are checked (messages vs prompt).
Result<CompletionRequest> ParseRequest(std::string_view json, ApiKind kind);

struct Usage {
  int64_t prompt_tokens = -1;  // -1 when absent
  int64_t completion_tokens = -1;
  int64_t total_tokens = -1;
  int64_t cached_tokens = -1;     // prompt_tokens_details.cached_tokens
  int64_t reasoning_tokens = -1;  // completion_tokens_details.reasoning_tokens
};

// An OpenAI error object ({"error": {"message", "type", "code"}}), sent as a
// non-2xx body or as an in-stream event after the headers.
struct ApiError {
  std::string message;
  std::string type;
  std::string code;
};

// What a client needs from one stream chunk (chat.completion.chunk or
// text_completion), summed over its choices.
struct StreamChunk {
  std::string content;      // delta.content (chat) or text (completions)
  std::string reasoning;    // delta.reasoning_content or delta.reasoning
  bool has_role = false;    // delta.role present
  bool has_finish = false;  // a choice carries a non-null finish_reason
  std::string finish_reason;
  int num_choices = 0;
  std::optional<Usage> usage;  // present and non-null
  std::optional<ApiError> error;

  void Clear();
};

// Parses one SSE data payload (not "[DONE]"). Reuses `out`'s buffers.
// Returns an error for invalid JSON or a payload that is not an object.
Status ParseStreamChunk(std::string_view json, StreamChunk* out);

// A non-streamed response body.
struct CompletionResponse {
  std::string content;  // choices[0].message.content or choices[0].text
  std::string reasoning;
  std::string finish_reason;
  int num_choices = 0;
  std::optional<Usage> usage;
  std::optional<ApiError> error;
};

// Parses a response body. An error body ({"error": ...}) parses fine and
// fills `error`. Invalid JSON, or an object with neither choices nor error,
// is an error.
Result<CompletionResponse> ParseResponse(std::string_view json);

// Extracts the error object from a non-2xx body when there is one.
std::optional<ApiError> ParseErrorBody(std::string_view body);

// ---- server side builders ----

// Identity fields shared by every chunk of one response.
struct ResponseIdentity {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0;  // Unix seconds
};

// One streamed chunk. For kChat: role (only on the first chunk, content "")
// or content / reasoning delta, or the finish chunk (finish_reason, empty
// delta), or the usage-only chunk (choices: []). For kCompletions the same
// with `text`.
struct ChunkFields {
  std::optional<std::string> role;
  std::optional<std::string> content;
  std::optional<std::string> reasoning;  // sent as delta.reasoning_content
  std::optional<std::string> finish_reason;
  std::optional<Usage> usage;  // usage-only chunk when set
};
std::string BuildChunk(ApiKind kind, const ResponseIdentity& id,
                       const ChunkFields& fields);

// A complete non-streamed response.
std::string BuildResponse(ApiKind kind, const ResponseIdentity& id,
                          std::string_view content,
                          std::string_view finish_reason, const Usage& usage);

// {"error": {"message": ..., "type": ..., "code": ...}}
std::string BuildErrorBody(const ApiError& error);

// Escapes a string as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view text);

}  // namespace redline::api

#endif  // REDLINE_API_OPENAI_H_

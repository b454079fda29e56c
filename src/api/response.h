// Responses of the two completion APIs: the builders a server uses
// (chat.completion / text_completion bodies and their stream chunks, with n
// choices, logprobs in each API's shape, usage and timings) and the parsers
// a client uses (what a load generator needs from a chunk or a body). The
// one implementation of the response wire format in the code base.
//
// Text and token pieces that are not valid UTF-8 (a byte token, a cut
// character) are sent with U+FFFD, so every body is valid JSON; logprob
// tokens also carry their exact `bytes`, as OpenAI does.
//
// Thread-safety: plain values and pure functions. Cost: one small JSON tree
// per chunk (microseconds; a decode step takes milliseconds). Parsing a
// stream chunk allocates nothing beyond the output strings (a stack arena
// backs the JSON tree).
#ifndef REDLINE_API_RESPONSE_H_
#define REDLINE_API_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/error.h"
#include "api/types.h"
#include "base/result.h"
#include "base/status.h"

namespace redline::api {

// ---- server side ----

// One choice's part of a stream chunk. Unset optionals are omitted.
struct ChunkChoice {
  int index = 0;
  // Chat: delta.role = "assistant" and content "" (the first chunk).
  bool role = false;
  // Chat: delta.content; completions: text.
  std::optional<std::string> text;
  // Chat: delta.reasoning_content.
  std::optional<std::string> reasoning;
  // "stop" / "length"; null when unset.
  std::optional<std::string> finish_reason;
  // Logprobs of the tokens whose text this chunk carries; sent when
  // non-empty.
  std::vector<LogprobEntry> logprobs;
};

// The JSON of one chunk (chat.completion.chunk or text_completion). `usage`
// adds a usage object: on every chunk (vLLM's continuous_usage_stats), or
// alone on a final chunk with choices: [] (stream_options.include_usage).
std::string BuildChunk(ApiKind kind, const ResponseIdentity& id,
                       const std::vector<ChunkChoice>& choices,
                       const Usage* usage = nullptr,
                       const ServerTimings* timings = nullptr);

// One choice of a complete (non-streamed) response.
struct FinalChoice {
  std::string text;
  std::string finish_reason;
  std::vector<LogprobEntry> logprobs;
  bool with_logprobs = false;  // false: "logprobs": null
};

// A complete response body; `timings` (optional) goes beside usage.
std::string BuildResponse(ApiKind kind, const ResponseIdentity& id,
                          const std::vector<FinalChoice>& choices,
                          const Usage& usage,
                          const ServerTimings* timings = nullptr);

// Escapes a string as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view text);

// ---- client side ----

// What a client needs from one stream chunk, summed over its choices.
struct StreamChunk {
  std::string content;      // delta.content (chat) or text (completions)
  std::string reasoning;    // delta.reasoning_content or delta.reasoning
  bool has_role = false;    // delta.role present
  bool has_finish = false;  // a choice carries a non-null finish_reason
  std::string finish_reason;
  int num_choices = 0;
  std::optional<Usage> usage;  // present and non-null
  // Redline's "timings" (or llama.cpp's prompt_ms/predicted_ms), when sent.
  std::optional<ServerTimings> timings;
  std::optional<ApiError> error;
  // choices[0]'s token logprobs in this chunk (as CompletionResponse's),
  // empty when not sent.
  std::vector<double> token_logprobs;

  void Clear();
};

// Parses one SSE data payload (not "[DONE]"). Reuses `out`'s buffers.
// Returns an error for invalid JSON or a payload that is not an object.
Status ParseStreamChunk(std::string_view json, StreamChunk* out);

// `chunk` (one stream event's JSON) with "gateway_ms": `gateway_ms` set in
// its "timings" object, so a gateway's share reaches a streaming client in
// the final chunk beside the server's own timings; nullopt when the chunk is
// not a JSON object, has no timings object, or holds a number no double can
// carry (it would not serialise as JSON). Other fields keep their values
// (a number written with more digits than a double holds may come back one
// unit in the last place away: the chunk is parsed and serialised again).
// Cost: two parses and one serialisation of the chunk.
std::optional<std::string> AddGatewayTiming(std::string_view chunk,
                                            double gateway_ms);

// A non-streamed response body, as a client reads it.
struct CompletionResponse {
  std::string content;  // choices[0].message.content or choices[0].text
  std::string reasoning;
  std::string finish_reason;
  int num_choices = 0;
  std::optional<Usage> usage;
  std::optional<ServerTimings> timings;
  std::optional<ApiError> error;
  // choices[0]'s token logprobs (chat: logprobs.content[].logprob;
  // completions: logprobs.token_logprobs), empty when not sent.
  std::vector<double> token_logprobs;
};

// Parses a response body. An error body ({"error": ...}) parses fine and
// fills `error`. Invalid JSON, or an object with neither choices nor error,
// is an error.
Result<CompletionResponse> ParseResponse(std::string_view json);

}  // namespace redline::api

#endif  // REDLINE_API_RESPONSE_H_

// JSON bodies the server sends: streamed chunks (chat.completion.chunk /
// text_completion), complete responses, logprobs in each API's shape, and
// usage (serving.md §3).
//
// Why not api::BuildChunk/BuildResponse: those build single-choice bodies
// without logprobs for the bench's test server; the server needs choice
// indices (n > 1), logprobs, cached-token usage and timings. The field names
// are the same OpenAI names, so the two cannot drift in meaning.
//
// Token text in logprobs comes from the tokenizer piece; a piece that is not
// valid UTF-8 on its own (a byte token) is sent with U+FFFD in `token` and
// the exact bytes in `bytes`, as OpenAI does, so every body is valid JSON.
//
// Thread-safety: pure functions (the tokenizer is immutable). Cost: one small
// JSON tree per chunk (microseconds; a decode step takes milliseconds).
#ifndef REDLINE_SERVER_OPENAI_RESPONSE_H_
#define REDLINE_SERVER_OPENAI_RESPONSE_H_

#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/openai.h"
#include "engine/request.h"
#include "model/sampling/sampling_ops.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::server {

struct ResponseIds {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  std::string model;    // served model name
  int64_t created = 0;  // Unix seconds
};

struct UsageCounts {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// One choice's part of a chunk. Unset optionals are omitted.
struct ChunkChoice {
  int index = 0;
  bool role = false;  // chat: delta.role = "assistant" (and content "")
  std::optional<std::string> text;  // chat: delta.content; completions: text
  std::optional<std::string>
      finish_reason;  // "stop" / "length"; null when unset
  // Logprobs of the tokens whose text this chunk carries.
  std::vector<model::SampleLogprobs> logprobs;
  bool with_logprobs = false;
};

// "data: <json>\n\n" for one chunk. `usage` adds a usage object (vLLM's
// continuous_usage_stats puts it on every chunk; include_usage on a final
// chunk with choices: []).
std::string SseChunk(api::ApiKind kind, const ResponseIds& ids,
                     const std::vector<ChunkChoice>& choices,
                     const UsageCounts* usage,
                     const model::Tokenizer* tokenizer);

// One choice of a complete (non-streamed) response.
struct FinalChoice {
  std::string text;
  std::string finish_reason;
  std::vector<model::SampleLogprobs> logprobs;
  bool with_logprobs = false;
};

// Server timings, sent as "timings" next to usage (llama.cpp does the same;
// SDKs ignore unknown fields).
std::string CompletionResponse(api::ApiKind kind, const ResponseIds& ids,
                               const std::vector<FinalChoice>& choices,
                               const UsageCounts& usage,
                               const engine::RequestTimings* timings,
                               const model::Tokenizer* tokenizer);

boost::json::value UsageJson(const UsageCounts& usage);

// Text made safe for JSON strings: invalid UTF-8 sequences become U+FFFD.
std::string ValidUtf8(std::string_view bytes);

}  // namespace redline::server

#endif  // REDLINE_SERVER_OPENAI_RESPONSE_H_

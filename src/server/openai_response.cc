#include "server/openai_response.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>

#include "model/tokenizer/utf8.h"

namespace redline::server {
namespace json = boost::json;
namespace {

// JSON cannot carry -inf; vLLM sends -9999 for impossible tokens.
double FiniteLogprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

std::string PieceOf(const model::Tokenizer* tok, int32_t id) {
  return tok != nullptr ? tok->TokenToPiece(id) : std::string();
}

json::array Bytes(std::string_view piece) {
  json::array out;
  for (unsigned char c : piece) out.emplace_back(static_cast<int64_t>(c));
  return out;
}

json::object ChatTokenLogprob(const model::Tokenizer* tok,
                              const model::TokenLogprob& t) {
  const std::string piece = PieceOf(tok, t.token);
  json::object o;
  o["token"] = ValidUtf8(piece);
  o["logprob"] = FiniteLogprob(t.logprob);
  o["bytes"] = Bytes(piece);
  return o;
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
json::value ChatLogprobs(const model::Tokenizer* tok,
                         const std::vector<model::SampleLogprobs>& lps) {
  json::array content;
  for (const model::SampleLogprobs& lp : lps) {
    json::object entry = ChatTokenLogprob(tok, lp.chosen);
    json::array top;
    for (const model::TokenLogprob& t : lp.top)
      top.push_back(ChatTokenLogprob(tok, t));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  json::object o;
  o["content"] = std::move(content);
  return o;
}

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json::value CompletionLogprobs(const model::Tokenizer* tok,
                               const std::vector<model::SampleLogprobs>& lps) {
  json::array tokens, token_logprobs, top_logprobs, offsets;
  int64_t offset = 0;
  bool any_top = false;
  for (const model::SampleLogprobs& lp : lps) {
    const std::string piece = PieceOf(tok, lp.chosen.token);
    tokens.emplace_back(ValidUtf8(piece));
    token_logprobs.emplace_back(FiniteLogprob(lp.chosen.logprob));
    offsets.emplace_back(offset);
    offset += static_cast<int64_t>(piece.size());
    json::object top;
    for (const model::TokenLogprob& t : lp.top)
      top[ValidUtf8(PieceOf(tok, t.token))] = FiniteLogprob(t.logprob);
    any_top = any_top || !lp.top.empty();
    top_logprobs.push_back(std::move(top));
  }
  json::object o;
  o["tokens"] = std::move(tokens);
  o["token_logprobs"] = std::move(token_logprobs);
  if (any_top) {
    o["top_logprobs"] = std::move(top_logprobs);
  } else {
    o["top_logprobs"] = nullptr;
  }
  o["text_offset"] = std::move(offsets);
  return o;
}

json::value LogprobsJson(api::ApiKind kind, const model::Tokenizer* tok,
                         bool with,
                         const std::vector<model::SampleLogprobs>& lps) {
  if (!with) return nullptr;
  return kind == api::ApiKind::kChat ? ChatLogprobs(tok, lps)
                                     : CompletionLogprobs(tok, lps);
}

json::object Header(api::ApiKind kind, const ResponseIds& ids, bool chunk) {
  json::object o;
  o["id"] = ids.id;
  if (kind == api::ApiKind::kChat) {
    o["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    o["object"] = "text_completion";
  }
  o["created"] = ids.created;
  o["model"] = ids.model;
  o["system_fingerprint"] = "redline";
  return o;
}

}  // namespace

std::string ValidUtf8(std::string_view bytes) {
  if (model::utf8::IsValid(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t len = 0;
    const uint32_t cp = model::utf8::DecodeCodepoint(bytes, pos, &len);
    if (len == 0) len = 1;
    if (cp == model::utf8::kReplacementChar && len == 1) {
      model::utf8::AppendCodepoint(model::utf8::kReplacementChar, &out);
    } else {
      out.append(bytes.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

json::value UsageJson(const UsageCounts& usage) {
  json::object u;
  u["prompt_tokens"] = usage.prompt_tokens;
  u["completion_tokens"] = usage.completion_tokens;
  u["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  json::object details;
  details["cached_tokens"] = usage.cached_tokens;
  u["prompt_tokens_details"] = std::move(details);
  return u;
}

std::string SseChunk(api::ApiKind kind, const ResponseIds& ids,
                     const std::vector<ChunkChoice>& choices,
                     const UsageCounts* usage,
                     const model::Tokenizer* tokenizer) {
  json::object o = Header(kind, ids, /*chunk=*/true);
  json::array arr;
  for (const ChunkChoice& c : choices) {
    json::object ch;
    ch["index"] = c.index;
    if (kind == api::ApiKind::kChat) {
      json::object delta;
      if (c.role) {
        delta["role"] = "assistant";
        delta["content"] = "";
      }
      if (c.text) delta["content"] = ValidUtf8(*c.text);
      ch["delta"] = std::move(delta);
    } else {
      ch["text"] = ValidUtf8(c.text.value_or(std::string()));
    }
    ch["logprobs"] = LogprobsJson(
        kind, tokenizer, c.with_logprobs && !c.logprobs.empty(), c.logprobs);
    if (c.finish_reason) {
      ch["finish_reason"] = *c.finish_reason;
    } else {
      ch["finish_reason"] = nullptr;
    }
    arr.push_back(std::move(ch));
  }
  o["choices"] = std::move(arr);
  if (usage != nullptr) o["usage"] = UsageJson(*usage);
  std::string out = "data: ";
  out += json::serialize(o);
  out += "\n\n";
  return out;
}

std::string CompletionResponse(api::ApiKind kind, const ResponseIds& ids,
                               const std::vector<FinalChoice>& choices,
                               const UsageCounts& usage,
                               const engine::RequestTimings* timings,
                               const model::Tokenizer* tokenizer) {
  json::object o = Header(kind, ids, /*chunk=*/false);
  json::array arr;
  for (size_t i = 0; i < choices.size(); ++i) {
    const FinalChoice& c = choices[i];
    json::object ch;
    ch["index"] = static_cast<int64_t>(i);
    if (kind == api::ApiKind::kChat) {
      json::object msg;
      msg["role"] = "assistant";
      msg["content"] = ValidUtf8(c.text);
      ch["message"] = std::move(msg);
    } else {
      ch["text"] = ValidUtf8(c.text);
    }
    ch["logprobs"] = LogprobsJson(kind, tokenizer, c.with_logprobs, c.logprobs);
    ch["finish_reason"] = c.finish_reason;
    arr.push_back(std::move(ch));
  }
  o["choices"] = std::move(arr);
  o["usage"] = UsageJson(usage);
  if (timings != nullptr) {
    json::object t;
    t["queue_ms"] = timings->queue_ms;
    t["prefill_ms"] = timings->prefill_ms;
    t["ttft_ms"] = timings->ttft_ms;
    t["decode_ms"] = timings->decode_ms;
    t["e2e_ms"] = timings->e2e_ms;
    o["timings"] = std::move(t);
  }
  return json::serialize(o);
}

}  // namespace redline::server

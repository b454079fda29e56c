#include "api/response.h"

#include <boost/json.hpp>
#include <cmath>

#include "api/finite_json.h"
#include "api/json_reader.h"
#include "base/utf8.h"

namespace redline::api {
namespace json = boost::json;
using internal::AppendString;
using internal::GetInt;

namespace {

// JSON cannot carry -inf; vLLM sends -9999 for impossible tokens.
double FiniteLogprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

json::array Bytes(std::string_view piece) {
  json::array out;
  for (unsigned char c : piece) out.emplace_back(static_cast<int64_t>(c));
  return out;
}

json::object ChatTokenLogprob(const TokenLogprob& t) {
  json::object o;
  o["token"] = utf8::Sanitize(t.token);
  o["logprob"] = FiniteLogprob(t.logprob);
  o["bytes"] = Bytes(t.token);
  return o;
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
json::value ChatLogprobs(const std::vector<LogprobEntry>& entries) {
  json::array content;
  for (const LogprobEntry& e : entries) {
    json::object entry = ChatTokenLogprob(e.chosen);
    json::array top;
    for (const TokenLogprob& t : e.top) top.push_back(ChatTokenLogprob(t));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  json::object o;
  o["content"] = std::move(content);
  return o;
}

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json::value CompletionLogprobs(const std::vector<LogprobEntry>& entries) {
  json::array tokens, token_logprobs, top_logprobs, offsets;
  int64_t offset = 0;
  bool any_top = false;
  for (const LogprobEntry& e : entries) {
    tokens.emplace_back(utf8::Sanitize(e.chosen.token));
    token_logprobs.emplace_back(FiniteLogprob(e.chosen.logprob));
    offsets.emplace_back(offset);
    offset += static_cast<int64_t>(e.chosen.token.size());
    json::object top;
    for (const TokenLogprob& t : e.top)
      top[utf8::Sanitize(t.token)] = FiniteLogprob(t.logprob);
    any_top = any_top || !e.top.empty();
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

json::value LogprobsJson(ApiKind kind, bool with,
                         const std::vector<LogprobEntry>& entries) {
  if (!with) return nullptr;
  return kind == ApiKind::kChat ? ChatLogprobs(entries)
                                : CompletionLogprobs(entries);
}

json::object Header(ApiKind kind, const ResponseIdentity& id, bool chunk) {
  json::object o;
  o["id"] = id.id;
  if (kind == ApiKind::kChat) {
    o["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    o["object"] = "text_completion";
  }
  o["created"] = id.created;
  o["model"] = id.model;
  o["system_fingerprint"] = "redline";
  return o;
}

int64_t NonNegative(int64_t v) { return v < 0 ? 0 : v; }

json::object UsageObject(const Usage& u) {
  json::object o;
  o["prompt_tokens"] = NonNegative(u.prompt_tokens);
  o["completion_tokens"] = NonNegative(u.completion_tokens);
  o["total_tokens"] =
      u.total_tokens >= 0
          ? u.total_tokens
          : NonNegative(u.prompt_tokens) + NonNegative(u.completion_tokens);
  if (u.cached_tokens >= 0)
    o["prompt_tokens_details"] =
        json::object{{"cached_tokens", u.cached_tokens}};
  if (u.reasoning_tokens >= 0)
    o["completion_tokens_details"] =
        json::object{{"reasoning_tokens", u.reasoning_tokens}};
  return o;
}

Usage ReadUsage(const json::object& u) {
  Usage usage;
  if (auto x = GetInt(u, "prompt_tokens")) usage.prompt_tokens = *x;
  if (auto x = GetInt(u, "completion_tokens")) usage.completion_tokens = *x;
  if (auto x = GetInt(u, "total_tokens")) usage.total_tokens = *x;
  if (const json::value* d = u.if_contains("prompt_tokens_details");
      d && d->is_object()) {
    if (auto x = GetInt(d->get_object(), "cached_tokens"))
      usage.cached_tokens = *x;
  }
  if (const json::value* d = u.if_contains("completion_tokens_details");
      d && d->is_object()) {
    if (auto x = GetInt(d->get_object(), "reasoning_tokens"))
      usage.reasoning_tokens = *x;
  }
  return usage;
}

json::object TimingsObject(const ServerTimings& t) {
  json::object o;
  o["queue_ms"] = t.queue_ms;
  o["prefill_ms"] = t.prefill_ms;
  o["ttft_ms"] = t.ttft_ms;
  o["decode_ms"] = t.decode_ms;
  o["e2e_ms"] = t.e2e_ms;
  if (t.gateway_ms >= 0) o["gateway_ms"] = t.gateway_ms;
  return o;
}

std::optional<double> GetNumber(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  // Boost.JSON reads 0e400 as NaN and 1e400 as infinity: no timing.
  const double x = v->to_number<double>();
  if (!std::isfinite(x)) return std::nullopt;
  return x;
}

// Redline's names, or llama.cpp's server (prompt_ms is its prefill,
// predicted_ms its decode).
std::optional<ServerTimings> ReadTimings(const json::object& parent) {
  const json::value* v = parent.if_contains("timings");
  if (v == nullptr || !v->is_object()) return std::nullopt;
  const json::object& o = v->get_object();
  ServerTimings t;
  bool any = false;
  auto read = [&](std::string_view key, double* out) {
    if (auto x = GetNumber(o, key)) {
      *out = *x;
      any = true;
    }
  };
  read("prompt_ms", &t.prefill_ms);
  read("predicted_ms", &t.decode_ms);
  read("queue_ms", &t.queue_ms);
  read("prefill_ms", &t.prefill_ms);
  read("ttft_ms", &t.ttft_ms);
  read("decode_ms", &t.decode_ms);
  read("e2e_ms", &t.e2e_ms);
  if (!any) return std::nullopt;
  if (auto x = GetNumber(o, "gateway_ms"); x && *x >= 0) t.gateway_ms = *x;
  return t;
}

}  // namespace

std::string BuildChunk(ApiKind kind, const ResponseIdentity& id,
                       const std::vector<ChunkChoice>& choices,
                       const Usage* usage, const ServerTimings* timings) {
  json::object o = Header(kind, id, /*chunk=*/true);
  json::array arr;
  for (const ChunkChoice& c : choices) {
    json::object ch;
    ch["index"] = c.index;
    if (kind == ApiKind::kChat) {
      json::object delta;
      if (c.role) {
        delta["role"] = "assistant";
        delta["content"] = "";
      }
      if (c.text) delta["content"] = utf8::Sanitize(*c.text);
      if (c.reasoning)
        delta["reasoning_content"] = utf8::Sanitize(*c.reasoning);
      ch["delta"] = std::move(delta);
    } else {
      ch["text"] = utf8::Sanitize(c.text.value_or(std::string()));
    }
    ch["logprobs"] = LogprobsJson(kind, !c.logprobs.empty(), c.logprobs);
    if (c.finish_reason) {
      ch["finish_reason"] = *c.finish_reason;
    } else {
      ch["finish_reason"] = nullptr;
    }
    arr.push_back(std::move(ch));
  }
  o["choices"] = std::move(arr);
  if (usage != nullptr) o["usage"] = UsageObject(*usage);
  if (timings != nullptr) o["timings"] = TimingsObject(*timings);
  return json::serialize(o);
}

std::string BuildResponse(ApiKind kind, const ResponseIdentity& id,
                          const std::vector<FinalChoice>& choices,
                          const Usage& usage, const ServerTimings* timings) {
  json::object o = Header(kind, id, /*chunk=*/false);
  json::array arr;
  for (size_t i = 0; i < choices.size(); ++i) {
    const FinalChoice& c = choices[i];
    json::object ch;
    ch["index"] = static_cast<int64_t>(i);
    if (kind == ApiKind::kChat) {
      json::object msg;
      msg["role"] = "assistant";
      msg["content"] = utf8::Sanitize(c.text);
      ch["message"] = std::move(msg);
    } else {
      ch["text"] = utf8::Sanitize(c.text);
    }
    ch["logprobs"] = LogprobsJson(kind, c.with_logprobs, c.logprobs);
    ch["finish_reason"] = c.finish_reason;
    arr.push_back(std::move(ch));
  }
  o["choices"] = std::move(arr);
  o["usage"] = UsageObject(usage);
  if (timings != nullptr) o["timings"] = TimingsObject(*timings);
  return json::serialize(o);
}

std::string JsonQuote(std::string_view text) {
  return json::serialize(json::string(text));
}

namespace {

// Appends a choice's token logprobs (chat: logprobs.content[].logprob;
// completions: logprobs.token_logprobs[]); nothing when absent.
void AppendTokenLogprobs(const json::object& choice, std::vector<double>* out) {
  const json::value* lp = choice.if_contains("logprobs");
  if (lp == nullptr || !lp->is_object()) return;
  const json::object& l = lp->get_object();
  if (const json::value* c = l.if_contains("content"); c && c->is_array()) {
    for (const json::value& t : c->get_array()) {
      const json::value* x =
          t.is_object() ? t.get_object().if_contains("logprob") : nullptr;
      if (x && x->is_number() && std::isfinite(x->to_number<double>()))
        out->push_back(x->to_number<double>());
    }
  } else if (const json::value* t = l.if_contains("token_logprobs");
             t && t->is_array()) {
    for (const json::value& x : t->get_array())
      if (x.is_number() && std::isfinite(x.to_number<double>()))
        out->push_back(x.to_number<double>());
  }
}

}  // namespace

void StreamChunk::Clear() {
  content.clear();
  reasoning.clear();
  has_role = false;
  has_finish = false;
  finish_reason.clear();
  num_choices = 0;
  usage.reset();
  timings.reset();
  error.reset();
  token_logprobs.clear();
}

std::optional<std::string> AddGatewayTiming(std::string_view chunk,
                                            double gateway_ms) {
  json::error_code ec;
  json::value v = json::parse(chunk, ec);
  // A number too large for a double would come back out as "Infinity",
  // which is not JSON: such a chunk is better relayed as sent.
  if (ec || !v.is_object() || FindNonFiniteNumber(v)) return std::nullopt;
  json::value* t = v.get_object().if_contains("timings");
  if (t == nullptr || !t->is_object()) return std::nullopt;
  t->get_object()["gateway_ms"] = gateway_ms;
  return json::serialize(v);
}

Status ParseStreamChunk(std::string_view text, StreamChunk* out) {
  out->Clear();
  // Chunks are small; a stack arena avoids heap traffic for the JSON tree.
  unsigned char arena[4096];
  json::monotonic_resource mr(arena, sizeof(arena));
  json::error_code ec;
  json::value v = json::parse(text, ec, &mr);
  if (ec) return Status::DataLoss("chunk is not valid JSON: " + ec.message());
  if (!v.is_object()) return Status::DataLoss("chunk is not a JSON object");
  const json::object& o = v.get_object();
  if (const json::value* e = o.if_contains("error"); e && !e->is_null()) {
    out->error = internal::ErrorFromJson(*e);
  }
  if (const json::value* u = o.if_contains("usage"); u && u->is_object()) {
    out->usage = ReadUsage(u->get_object());
  }
  out->timings = ReadTimings(o);
  const json::value* choices = o.if_contains("choices");
  if (choices == nullptr || !choices->is_array()) {
    if (out->error || out->usage || out->timings) return Status::Ok();
    return Status::DataLoss("chunk has no 'choices' array");
  }
  for (const json::value& c : choices->get_array()) {
    if (!c.is_object()) return Status::DataLoss("a choice is not an object");
    const json::object& choice = c.get_object();
    out->num_choices++;
    if (const json::value* d = choice.if_contains("delta");
        d && d->is_object()) {
      const json::object& delta = d->get_object();
      AppendString(delta, "content", &out->content);
      if (!AppendString(delta, "reasoning_content", &out->reasoning)) {
        AppendString(delta, "reasoning", &out->reasoning);
      }
      if (delta.if_contains("role") != nullptr) out->has_role = true;
    }
    AppendString(choice, "text", &out->content);
    if (out->num_choices == 1)
      AppendTokenLogprobs(choice, &out->token_logprobs);
    if (const json::value* f = choice.if_contains("finish_reason");
        f && !f->is_null()) {
      out->has_finish = true;
      if (f->is_string()) out->finish_reason = std::string(f->get_string());
    }
  }
  return Status::Ok();
}

Result<CompletionResponse> ParseResponse(std::string_view text) {
  // Most bodies are small: a stack arena first, the heap beyond it.
  unsigned char arena[8192];
  json::monotonic_resource mr(arena, sizeof(arena));
  json::error_code ec;
  json::value v = json::parse(text, ec, &mr);
  if (ec)
    return Status::DataLoss("response is not valid JSON: " + ec.message());
  if (!v.is_object()) return Status::DataLoss("response is not a JSON object");
  const json::object& o = v.get_object();
  CompletionResponse r;
  if (const json::value* e = o.if_contains("error"); e && !e->is_null())
    r.error = internal::ErrorFromJson(*e);
  if (const json::value* u = o.if_contains("usage"); u && u->is_object())
    r.usage = ReadUsage(u->get_object());
  r.timings = ReadTimings(o);
  const json::value* choices = o.if_contains("choices");
  if (choices == nullptr || !choices->is_array()) {
    if (r.error) return r;
    return Status::DataLoss("response has no 'choices' array");
  }
  for (const json::value& c : choices->get_array()) {
    if (!c.is_object()) return Status::DataLoss("a choice is not an object");
    const json::object& choice = c.get_object();
    if (r.num_choices++ > 0) continue;  // the first choice is the answer
    if (const json::value* m = choice.if_contains("message");
        m && m->is_object()) {
      AppendString(m->get_object(), "content", &r.content);
      if (!AppendString(m->get_object(), "reasoning_content", &r.reasoning)) {
        AppendString(m->get_object(), "reasoning", &r.reasoning);
      }
    }
    AppendString(choice, "text", &r.content);
    if (const json::value* f = choice.if_contains("finish_reason");
        f && f->is_string()) {
      r.finish_reason = std::string(f->get_string());
    }
    AppendTokenLogprobs(choice, &r.token_logprobs);
  }
  return r;
}

}  // namespace redline::api

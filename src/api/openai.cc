#include "api/openai.h"

#include <boost/json.hpp>
#include <utility>

namespace redline::api {

namespace json = boost::json;

std::string_view ApiPath(ApiKind kind) {
  return kind == ApiKind::kChat ? "chat/completions" : "completions";
}

namespace {

void PutSampling(const SamplingParams& s, json::object& o) {
  if (s.max_tokens) o["max_tokens"] = *s.max_tokens;
  if (s.temperature) o["temperature"] = *s.temperature;
  if (s.top_p) o["top_p"] = *s.top_p;
  if (s.top_k) o["top_k"] = *s.top_k;
  if (s.min_p) o["min_p"] = *s.min_p;
  if (s.frequency_penalty) o["frequency_penalty"] = *s.frequency_penalty;
  if (s.presence_penalty) o["presence_penalty"] = *s.presence_penalty;
  if (s.repetition_penalty) o["repetition_penalty"] = *s.repetition_penalty;
  if (s.seed) o["seed"] = *s.seed;
  if (s.min_tokens) o["min_tokens"] = *s.min_tokens;
  if (s.ignore_eos) o["ignore_eos"] = *s.ignore_eos;
  if (!s.stop.empty()) {
    json::array a;
    for (const auto& x : s.stop) a.emplace_back(x);
    o["stop"] = std::move(a);
  }
}

std::optional<double> GetNumber(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_double()) return v->get_double();
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  return std::nullopt;
}

std::optional<int64_t> GetInt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
  if (v->is_double()) return static_cast<int64_t>(v->get_double());
  return std::nullopt;
}

// Appends a string member when it is a string; returns true when it was a
// non-empty string.
bool AppendString(const json::object& o, std::string_view key,
                  std::string* out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return false;
  const json::string& s = v->get_string();
  out->append(s.data(), s.size());
  return !s.empty();
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

ApiError ReadError(const json::value& v) {
  ApiError e;
  if (v.is_string()) {
    e.message = std::string(v.get_string());
    return e;
  }
  if (!v.is_object()) return e;
  const json::object& o = v.get_object();
  AppendString(o, "message", &e.message);
  AppendString(o, "type", &e.type);
  if (const json::value* c = o.if_contains("code")) {
    if (c->is_string()) {
      e.code = std::string(c->get_string());
    } else if (c->is_int64()) {
      e.code = std::to_string(c->get_int64());
    }
  }
  return e;
}

json::object UsageObject(const Usage& u) {
  json::object o;
  o["prompt_tokens"] = u.prompt_tokens < 0 ? 0 : u.prompt_tokens;
  o["completion_tokens"] = u.completion_tokens < 0 ? 0 : u.completion_tokens;
  o["total_tokens"] =
      u.total_tokens >= 0
          ? u.total_tokens
          : (u.prompt_tokens < 0 ? 0 : u.prompt_tokens) +
                (u.completion_tokens < 0 ? 0 : u.completion_tokens);
  if (u.cached_tokens >= 0)
    o["prompt_tokens_details"] =
        json::object{{"cached_tokens", u.cached_tokens}};
  return o;
}

}  // namespace

Result<std::string> SerializeRequest(const CompletionRequest& r) {
  json::object o;
  if (!r.model.empty()) o["model"] = r.model;
  if (r.kind == ApiKind::kChat) {
    json::array messages;
    for (const ChatMessage& m : r.messages) {
      messages.emplace_back(
          json::object{{"role", m.role}, {"content", m.content}});
    }
    o["messages"] = std::move(messages);
  } else {
    o["prompt"] = r.prompt;
  }
  PutSampling(r.sampling, o);
  o["stream"] = r.stream;
  if (r.stream && r.include_usage)
    o["stream_options"] = json::object{{"include_usage", true}};
  if (!r.extra_json.empty()) {
    json::error_code ec;
    json::value extra = json::parse(r.extra_json, ec);
    if (ec || !extra.is_object()) {
      return Status::InvalidArgument(
          "extra request fields must be a JSON object: " + r.extra_json);
    }
    for (auto& kv : extra.get_object()) o[kv.key()] = kv.value();
  }
  return json::serialize(o);
}

Result<CompletionRequest> ParseRequest(std::string_view text, ApiKind kind) {
  json::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec)
    return Status::InvalidArgument("request body is not valid JSON: " +
                                   ec.message());
  if (!v.is_object())
    return Status::InvalidArgument("request body must be a JSON object");
  const json::object& o = v.get_object();
  CompletionRequest r;
  r.kind = kind;
  AppendString(o, "model", &r.model);
  if (kind == ApiKind::kChat) {
    const json::value* m = o.if_contains("messages");
    if (m == nullptr || !m->is_array())
      return Status::InvalidArgument("'messages' must be an array");
    for (const json::value& item : m->get_array()) {
      if (!item.is_object())
        return Status::InvalidArgument("each message must be an object");
      ChatMessage msg;
      AppendString(item.get_object(), "role", &msg.role);
      const json::value* c = item.get_object().if_contains("content");
      if (c != nullptr && c->is_string()) {
        msg.content = std::string(c->get_string());
      } else if (c != nullptr &&
                 c->is_array()) {  // content parts: join the text ones
        for (const json::value& part : c->get_array()) {
          if (part.is_object())
            AppendString(part.get_object(), "text", &msg.content);
        }
      }
      if (msg.role.empty())
        return Status::InvalidArgument("a message has no 'role'");
      r.messages.push_back(std::move(msg));
    }
  } else {
    const json::value* p = o.if_contains("prompt");
    if (p == nullptr) return Status::InvalidArgument("'prompt' is required");
    if (p->is_string()) {
      r.prompt = std::string(p->get_string());
    } else if (p->is_array() && !p->get_array().empty() &&
               p->get_array()[0].is_string()) {
      r.prompt = std::string(p->get_array()[0].get_string());
    } else {
      return Status::InvalidArgument("'prompt' must be a string");
    }
  }
  SamplingParams& s = r.sampling;
  s.max_tokens = GetInt(o, "max_tokens");
  if (!s.max_tokens) s.max_tokens = GetInt(o, "max_completion_tokens");
  s.temperature = GetNumber(o, "temperature");
  s.top_p = GetNumber(o, "top_p");
  s.top_k = GetInt(o, "top_k");
  s.min_p = GetNumber(o, "min_p");
  s.frequency_penalty = GetNumber(o, "frequency_penalty");
  s.presence_penalty = GetNumber(o, "presence_penalty");
  s.repetition_penalty = GetNumber(o, "repetition_penalty");
  s.seed = GetInt(o, "seed");
  s.min_tokens = GetInt(o, "min_tokens");
  if (const json::value* x = o.if_contains("ignore_eos"); x && x->is_bool())
    s.ignore_eos = x->get_bool();
  if (const json::value* x = o.if_contains("stop")) {
    if (x->is_string()) {
      s.stop.emplace_back(x->get_string());
    } else if (x->is_array()) {
      for (const json::value& e : x->get_array()) {
        if (e.is_string()) s.stop.emplace_back(e.get_string());
      }
    }
  }
  r.stream = false;
  if (const json::value* x = o.if_contains("stream"); x && x->is_bool())
    r.stream = x->get_bool();
  r.include_usage = false;
  if (const json::value* so = o.if_contains("stream_options");
      so && so->is_object()) {
    if (const json::value* x = so->get_object().if_contains("include_usage");
        x && x->is_bool()) {
      r.include_usage = x->get_bool();
    }
  }
  return r;
}

void StreamChunk::Clear() {
  content.clear();
  reasoning.clear();
  has_role = false;
  has_finish = false;
  finish_reason.clear();
  num_choices = 0;
  usage.reset();
  error.reset();
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
    out->error = ReadError(*e);
  }
  if (const json::value* u = o.if_contains("usage"); u && u->is_object()) {
    out->usage = ReadUsage(u->get_object());
  }
  const json::value* choices = o.if_contains("choices");
  if (choices == nullptr || !choices->is_array()) {
    if (out->error || out->usage) return Status::Ok();
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
    r.error = ReadError(*e);
  if (const json::value* u = o.if_contains("usage"); u && u->is_object())
    r.usage = ReadUsage(u->get_object());
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
  }
  return r;
}

std::optional<ApiError> ParseErrorBody(std::string_view body) {
  json::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::value* e = v.get_object().if_contains("error");
  if (e == nullptr || e->is_null()) return std::nullopt;
  return ReadError(*e);
}

std::string BuildChunk(ApiKind kind, const ResponseIdentity& id,
                       const ChunkFields& f) {
  json::object o;
  o["id"] = id.id;
  o["object"] =
      kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
  o["created"] = id.created;
  o["model"] = id.model;
  json::array choices;
  if (!f.usage) {
    json::object choice;
    choice["index"] = 0;
    if (kind == ApiKind::kChat) {
      json::object delta;
      if (f.role) delta["role"] = *f.role;
      if (f.content) delta["content"] = *f.content;
      if (f.reasoning) delta["reasoning_content"] = *f.reasoning;
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = f.content ? *f.content : std::string();
    }
    choice["finish_reason"] =
        f.finish_reason ? json::value(*f.finish_reason) : json::value(nullptr);
    choices.emplace_back(std::move(choice));
  }
  o["choices"] = std::move(choices);
  if (f.usage) o["usage"] = UsageObject(*f.usage);
  return json::serialize(o);
}

std::string BuildResponse(ApiKind kind, const ResponseIdentity& id,
                          std::string_view content,
                          std::string_view finish_reason, const Usage& usage) {
  json::object o;
  o["id"] = id.id;
  o["object"] = kind == ApiKind::kChat ? "chat.completion" : "text_completion";
  o["created"] = id.created;
  o["model"] = id.model;
  json::object choice;
  choice["index"] = 0;
  if (kind == ApiKind::kChat) {
    choice["message"] =
        json::object{{"role", "assistant"}, {"content", json::string(content)}};
  } else {
    choice["text"] = json::string(content);
  }
  choice["finish_reason"] = json::string(finish_reason);
  o["choices"] = json::array{std::move(choice)};
  o["usage"] = UsageObject(usage);
  return json::serialize(o);
}

std::string BuildErrorBody(const ApiError& e) {
  json::object inner{{"message", e.message}, {"type", e.type}};
  inner["code"] = e.code.empty() ? json::value(nullptr) : json::value(e.code);
  return json::serialize(json::object{{"error", std::move(inner)}});
}

std::string JsonQuote(std::string_view text) {
  return json::serialize(json::string(text));
}

}  // namespace redline::api

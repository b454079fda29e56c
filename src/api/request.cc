#include "api/request.h"

#include <fmt/format.h>

#include <boost/json.hpp>

#include "api/finite_json.h"
#include "api/json_reader.h"

namespace redline::api {
namespace json = boost::json;
using internal::KindName;
using internal::Reader;

std::string_view ApiPath(ApiKind kind) {
  return kind == ApiKind::kChat ? "chat/completions" : "completions";
}

namespace {

Status Unsupported(std::string* param, std::string_view key,
                   std::string_view what) {
  if (param != nullptr) *param = std::string(key);
  return Status::Unimplemented(std::string(what));
}

void SetParam(std::string* param, std::string value) {
  if (param != nullptr) *param = std::move(value);
}

// stop: a string or an array of strings.
Status ReadStop(Reader& r, std::vector<std::string>* out) {
  const json::value* v = r.Find("stop");
  if (v == nullptr) return Status::Ok();
  if (v->is_string()) {
    out->emplace_back(v->get_string());
    return Status::Ok();
  }
  if (!v->is_array())
    return r.TypeError("stop", "a string or an array of strings", *v);
  for (const json::value& s : v->get_array()) {
    if (!s.is_string())
      return r.TypeError("stop", "a string or an array of strings", s);
    out->emplace_back(s.get_string());
  }
  return Status::Ok();
}

// logit_bias: {"token id": bias, ...}.
Status ReadLogitBias(Reader& r, std::vector<std::pair<int32_t, double>>* out) {
  const json::value* v = r.Find("logit_bias");
  if (v == nullptr) return Status::Ok();
  constexpr std::string_view kWant = "an object mapping token ids to numbers";
  if (!v->is_object()) return r.TypeError("logit_bias", kWant, *v);
  for (const auto& kv : v->get_object()) {
    const std::string key(kv.key());
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || end != key.c_str() + key.size() || id < 0 ||
        id > INT32_MAX) {
      return r.RangeError("logit_bias",
                          fmt::format("logit_bias key '{}' is not a token id",
                                      key.substr(0, 64)));
    }
    double bias = 0;
    int64_t i = 0;
    if (kv.value().is_double()) {
      bias = kv.value().get_double();
    } else if (internal::ToInt(kv.value(), &i) == internal::IntRead::kOk) {
      bias = static_cast<double>(i);
    } else {
      return r.TypeError("logit_bias", kWant, kv.value());
    }
    out->emplace_back(static_cast<int32_t>(id), bias);
  }
  return Status::Ok();
}

// Fields both APIs share.
Status ReadCommon(Reader& r, CompletionRequest* out, std::string* param) {
  RL_RETURN_IF_ERROR(r.String("model", &out->model));
  out->stream = false;
  out->include_usage = false;
  RL_RETURN_IF_ERROR(r.Bool("stream", &out->stream));
  if (const json::value* so = r.Find("stream_options")) {
    if (!so->is_object())
      return r.TypeError("stream_options", "an object", *so);
    Reader sr(so->get_object(), param, "stream_options.");
    RL_RETURN_IF_ERROR(sr.Bool("include_usage", &out->include_usage));
    RL_RETURN_IF_ERROR(
        sr.Bool("continuous_usage_stats", &out->continuous_usage));
  }
  SamplingParams& sp = out->sampling;
  RL_RETURN_IF_ERROR(r.Int("max_tokens", &sp.max_tokens, 1, INT32_MAX));
  RL_RETURN_IF_ERROR(
      r.Int("max_completion_tokens", &sp.max_tokens, 1, INT32_MAX));
  RL_RETURN_IF_ERROR(r.Number("temperature", &sp.temperature));
  RL_RETURN_IF_ERROR(r.Number("top_p", &sp.top_p));
  RL_RETURN_IF_ERROR(r.Int("top_k", &sp.top_k, -1, INT32_MAX));
  RL_RETURN_IF_ERROR(r.Number("min_p", &sp.min_p));
  RL_RETURN_IF_ERROR(r.Number("presence_penalty", &sp.presence_penalty));
  RL_RETURN_IF_ERROR(r.Number("frequency_penalty", &sp.frequency_penalty));
  RL_RETURN_IF_ERROR(r.Number("repetition_penalty", &sp.repetition_penalty));
  RL_RETURN_IF_ERROR(r.Int("seed", &sp.seed));
  RL_RETURN_IF_ERROR(ReadStop(r, &sp.stop));
  RL_RETURN_IF_ERROR(ReadLogitBias(r, &sp.logit_bias));
  std::optional<int64_t> n;
  RL_RETURN_IF_ERROR(r.Int("n", &n, 1, kMaxChoices));
  out->n = static_cast<int>(n.value_or(1));
  RL_RETURN_IF_ERROR(r.Int("min_tokens", &sp.min_tokens, 0, INT32_MAX));
  RL_RETURN_IF_ERROR(r.Bool("ignore_eos", &sp.ignore_eos));
  RL_RETURN_IF_ERROR(r.Bool("speculative", &sp.speculative));
  RL_RETURN_IF_ERROR(r.String("user", &out->user));
  if (const json::value* rf = r.Find("response_format")) {
    if (!rf->is_object())
      return r.TypeError("response_format", "an object", *rf);
    const json::value* type = rf->get_object().if_contains("type");
    if (type == nullptr || !type->is_string()) {
      SetParam(param, "response_format.type");
      return Status::InvalidArgument("response_format.type must be a string");
    }
    if (type->get_string() != "text") {
      return Unsupported(param, "response_format",
                         fmt::format("response_format type '{}' is not "
                                     "supported by this server (only 'text')",
                                     std::string_view(type->get_string())));
    }
  }
  std::optional<int64_t> best_of;
  RL_RETURN_IF_ERROR(r.Int("best_of", &best_of, 1, kMaxChoices));
  if (best_of && *best_of != 1 && *best_of != out->n) {
    return Unsupported(param, "best_of",
                       "best_of other than 1 (or n) is not supported");
  }
  return Status::Ok();
}

// A message's content: a string stays; an array of {"type":"text","text"}
// parts becomes their concatenation; null is kept as null.
Status ReadContent(const json::value* content, size_t index, ChatMessage* m,
                   std::string* param) {
  const std::string where = fmt::format("messages[{}].content", index);
  if (content == nullptr || content->is_null()) {
    m->content_null = true;
    return Status::Ok();
  }
  if (content->is_string()) {
    m->content = std::string(content->get_string());
    return Status::Ok();
  }
  if (!content->is_array()) {
    SetParam(param, where);
    return Status::InvalidArgument(fmt::format(
        "'{}' must be a string or an array of content parts, got {}", where,
        KindName(content->kind())));
  }
  for (const json::value& part : content->get_array()) {
    const json::object* p = part.if_object();
    const json::value* type = p ? p->if_contains("type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      SetParam(param, where);
      return Status::InvalidArgument(fmt::format(
          "each part of '{}' must be an object with a string 'type'", where));
    }
    if (type->get_string() != "text") {
      return Unsupported(
          param, where,
          fmt::format("content part type '{}' is not supported (text only)",
                      std::string_view(type->get_string())));
    }
    const json::value* t = p->if_contains("text");
    if (t == nullptr || !t->is_string()) {
      SetParam(param, where);
      return Status::InvalidArgument(
          fmt::format("a text part of '{}' needs a string 'text'", where));
    }
    m->content += t->get_string();
  }
  return Status::Ok();
}

Status ReadChat(Reader& r, CompletionRequest* out, std::string* param) {
  const json::value* messages = r.Find("messages");
  if (messages == nullptr) {
    SetParam(param, "messages");
    return Status::InvalidArgument("'messages' is required");
  }
  if (!messages->is_array())
    return r.TypeError("messages", "an array", *messages);
  if (messages->get_array().empty()) {
    SetParam(param, "messages");
    return Status::InvalidArgument("'messages' must not be empty");
  }
  size_t i = 0;
  for (const json::value& v : messages->get_array()) {
    const json::object* msg = v.if_object();
    if (msg == nullptr) {
      SetParam(param, fmt::format("messages[{}]", i));
      return Status::InvalidArgument(fmt::format(
          "'messages[{}]' must be an object, got {}", i, KindName(v.kind())));
    }
    const json::value* role = msg->if_contains("role");
    if (role == nullptr || !role->is_string()) {
      SetParam(param, fmt::format("messages[{}].role", i));
      return Status::InvalidArgument(
          fmt::format("'messages[{}].role' must be a string", i));
    }
    const std::string_view rs = role->get_string();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool" &&
        rs != "developer" && rs != "function") {
      SetParam(param, fmt::format("messages[{}].role", i));
      return Status::InvalidArgument(
          fmt::format("'messages[{}].role' must be one of system, developer, "
                      "user, assistant, tool; got '{}'",
                      i, rs.substr(0, 64)));
    }
    ChatMessage m;
    m.role = std::string(rs);
    RL_RETURN_IF_ERROR(ReadContent(msg->if_contains("content"), i, &m, param));
    // An assistant turn may be only tool calls; every other role says
    // something.
    if (m.content_null && rs != "assistant") {
      SetParam(param, fmt::format("messages[{}].content", i));
      return Status::InvalidArgument(fmt::format(
          "'messages[{}].content' is required for role '{}'", i, rs));
    }
    for (const auto& kv : *msg) {
      if (kv.key() != "role" && kv.key() != "content")
        m.extra.emplace(kv.key(), kv.value());
    }
    out->messages.push_back(std::move(m));
    ++i;
  }
  if (const json::value* tools = r.Find("tools")) {
    if (!tools->is_array()) return r.TypeError("tools", "an array", *tools);
    out->tools = tools->get_array();
  }
  RL_RETURN_IF_ERROR(r.Bool("logprobs", &out->sampling.logprobs));
  std::optional<int64_t> top;
  RL_RETURN_IF_ERROR(r.Int("top_logprobs", &top, 0, kMaxTopLogprobs));
  if (top && *top > 0 && !out->sampling.logprobs) {
    SetParam(param, "top_logprobs");
    return Status::InvalidArgument("top_logprobs requires logprobs: true");
  }
  out->sampling.top_logprobs = top.value_or(0);
  return Status::Ok();
}

// An array of integers as token ids; false if any element is not one.
bool ReadIds(const json::array& a, std::vector<int32_t>* ids) {
  ids->clear();
  for (const json::value& v : a) {
    int64_t id = 0;
    if (internal::ToInt(v, &id) != internal::IntRead::kOk || id < 0 ||
        id > INT32_MAX)
      return false;
    ids->push_back(static_cast<int32_t>(id));
  }
  return true;
}

Status ReadCompletions(Reader& r, CompletionRequest* out, std::string* param) {
  const json::value* p = r.Find("prompt");
  if (p == nullptr) {
    SetParam(param, "prompt");
    return Status::InvalidArgument("'prompt' is required");
  }
  constexpr std::string_view kPromptTypes =
      "a string, an array of token ids, or a one-element array of either";
  if (p->is_string()) {
    out->prompt = std::string(p->get_string());
  } else if (p->is_array()) {
    const json::array& a = p->get_array();
    if (a.empty()) {
      SetParam(param, "prompt");
      return Status::InvalidArgument("'prompt' must not be empty");
    }
    if (a[0].is_string() || a[0].is_array()) {
      if (a.size() != 1) {
        return Unsupported(param, "prompt",
                           "only one prompt per request is supported (use n "
                           "for several choices)");
      }
      if (a[0].is_string()) {
        out->prompt = std::string(a[0].get_string());
      } else if (!ReadIds(a[0].get_array(), &out->prompt_ids) ||
                 out->prompt_ids.empty()) {
        return r.TypeError("prompt", kPromptTypes, a[0]);
      }
    } else if (!ReadIds(a, &out->prompt_ids)) {
      SetParam(param, "prompt");
      return Status::InvalidArgument(
          fmt::format("'prompt' must be {}", kPromptTypes));
    }
  } else {
    return r.TypeError("prompt", kPromptTypes, *p);
  }
  bool echo = false;
  RL_RETURN_IF_ERROR(r.Bool("echo", &echo));
  if (echo) return Unsupported(param, "echo", "echo is not supported");
  std::string suffix;
  RL_RETURN_IF_ERROR(r.String("suffix", &suffix));
  if (!suffix.empty())
    return Unsupported(param, "suffix", "suffix is not supported");
  std::optional<int64_t> logprobs;
  RL_RETURN_IF_ERROR(r.Int("logprobs", &logprobs, 0, kMaxTopLogprobs));
  out->sampling.logprobs = logprobs.has_value();
  out->sampling.top_logprobs = logprobs.value_or(0);
  return Status::Ok();
}

void PutSampling(ApiKind kind, const SamplingParams& s, json::object& o) {
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
  if (s.speculative) o["speculative"] = *s.speculative;
  if (!s.stop.empty()) {
    json::array a;
    for (const auto& x : s.stop) a.emplace_back(x);
    o["stop"] = std::move(a);
  }
  if (!s.logit_bias.empty()) {
    json::object b;
    for (const auto& [id, bias] : s.logit_bias) b[std::to_string(id)] = bias;
    o["logit_bias"] = std::move(b);
  }
  if (s.logprobs) {
    if (kind == ApiKind::kChat) {
      o["logprobs"] = true;
      if (s.top_logprobs > 0) o["top_logprobs"] = s.top_logprobs;
    } else {
      o["logprobs"] = s.top_logprobs;
    }
  }
}

}  // namespace

json::array MessagesToJson(const std::vector<ChatMessage>& messages) {
  json::array out;
  out.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    json::object o = m.extra;
    o["role"] = m.role;
    if (m.content_null) {
      o["content"] = nullptr;
    } else {
      o["content"] = m.content;
    }
    out.emplace_back(std::move(o));
  }
  return out;
}

Result<std::string> SerializeRequest(const CompletionRequest& r) {
  json::object o;
  if (!r.model.empty()) o["model"] = r.model;
  if (r.kind == ApiKind::kChat) {
    o["messages"] = MessagesToJson(r.messages);
    if (!r.tools.empty()) o["tools"] = r.tools;
  } else if (r.prompt_is_ids()) {
    json::array ids;
    for (int32_t id : r.prompt_ids) ids.emplace_back(id);
    o["prompt"] = std::move(ids);
  } else {
    o["prompt"] = r.prompt;
  }
  PutSampling(r.kind, r.sampling, o);
  if (r.n != 1) o["n"] = r.n;
  if (!r.user.empty()) o["user"] = r.user;
  o["stream"] = r.stream;
  if (r.stream && (r.include_usage || r.continuous_usage)) {
    json::object so;
    if (r.include_usage) so["include_usage"] = true;
    if (r.continuous_usage) so["continuous_usage_stats"] = true;
    o["stream_options"] = std::move(so);
  }
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

Result<CompletionRequest> ParseRequest(std::string_view body, ApiKind kind,
                                       std::string* error_param) {
  return ParseRequest(body, kind, error_param, nullptr);
}

Result<CompletionRequest> ParseRequest(std::string_view body, ApiKind kind,
                                       std::string* error_param,
                                       json::object* parsed_body) {
  if (error_param != nullptr) error_param->clear();
  CompletionRequest out;
  out.kind = kind;
  json::error_code ec;
  json::value root = json::parse(body, ec);
  if (ec)
    return Status::InvalidArgument("the body is not valid JSON: " +
                                   ec.message());
  const json::object* obj = root.if_object();
  if (obj == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "the body must be a JSON object, got {}", KindName(root.kind())));
  }
  // Messages, tools and extra fields are kept as sent and written out again
  // (chat templates, the gateway's forwarded body), and a number past a
  // double's range would be written as "Infinity".
  if (std::optional<std::string> at = FindNonFiniteNumber(root)) {
    SetParam(error_param, *at);
    return Status::InvalidArgument(fmt::format(
        "'{}' must be a finite number (it is beyond a double's range)", *at));
  }
  Reader r(*obj, error_param);
  RL_RETURN_IF_ERROR(ReadCommon(r, &out, error_param));
  if (kind == ApiKind::kChat) {
    RL_RETURN_IF_ERROR(ReadChat(r, &out, error_param));
  } else {
    RL_RETURN_IF_ERROR(ReadCompletions(r, &out, error_param));
  }
  if (parsed_body != nullptr) *parsed_body = std::move(root.as_object());
  return out;
}

}  // namespace redline::api

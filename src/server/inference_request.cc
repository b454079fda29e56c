#include "server/inference_request.h"

#include <fmt/format.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <limits>

namespace redline::server {
namespace json = boost::json;
namespace {

std::string_view KindName(json::kind k) {
  switch (k) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "an integer";
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

// Reads typed fields of one JSON object; the first error wins and names its
// field in *param_.
class Reader {
 public:
  Reader(const json::object& obj, std::string* param)
      : obj_(obj), param_(param) {}

  // Each returns OK with *present = false when the key is absent or null.
  Status Bool(std::string_view key, bool* out, bool* present = nullptr) {
    const json::value* v = Find(key, present);
    if (v == nullptr) return Status::Ok();
    if (!v->is_bool()) return TypeError(key, "a boolean", *v);
    *out = v->get_bool();
    return Status::Ok();
  }

  Status Number(std::string_view key, double* out, bool* present = nullptr) {
    const json::value* v = Find(key, present);
    if (v == nullptr) return Status::Ok();
    if (v->is_double()) {
      *out = v->get_double();
    } else if (v->is_int64()) {
      *out = static_cast<double>(v->get_int64());
    } else if (v->is_uint64()) {
      *out = static_cast<double>(v->get_uint64());
    } else {
      return TypeError(key, "a number", *v);
    }
    return Status::Ok();
  }

  Status Float(std::string_view key, float* out) {
    double d = *out;
    RL_RETURN_IF_ERROR(Number(key, &d));
    *out = static_cast<float>(d);
    return Status::Ok();
  }

  // Integers; a JSON number with an integral value (3.0) is accepted.
  Status Int(std::string_view key, int64_t* out, bool* present = nullptr,
             int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
    const json::value* v = Find(key, present);
    if (v == nullptr) return Status::Ok();
    int64_t value = 0;
    if (!ToInt(*v, &value)) return TypeError(key, "an integer", *v);
    if (value < lo || value > hi) {
      *param_ = std::string(key);
      if (hi == INT64_MAX)
        return Status::InvalidArgument(
            fmt::format("{} must be >= {}, got {}", key, lo, value));
      return Status::InvalidArgument(
          fmt::format("{} must be in [{}, {}], got {}", key, lo, hi, value));
    }
    *out = value;
    return Status::Ok();
  }

  Status String(std::string_view key, std::string* out,
                bool* present = nullptr) {
    const json::value* v = Find(key, present);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return TypeError(key, "a string", *v);
    *out = std::string(v->get_string());
    return Status::Ok();
  }

  const json::value* Find(std::string_view key, bool* present = nullptr) const {
    const json::value* v = obj_.if_contains(key);
    if (v != nullptr && v->is_null()) v = nullptr;
    if (present != nullptr) *present = v != nullptr;
    return v;
  }

  Status TypeError(std::string_view key, std::string_view want,
                   const json::value& got) {
    *param_ = std::string(key);
    return Status::InvalidArgument(fmt::format("'{}' must be {}, got {}", key,
                                               want, KindName(got.kind())));
  }

  static bool ToInt(const json::value& v, int64_t* out) {
    if (v.is_int64()) {
      *out = v.get_int64();
      return true;
    }
    if (v.is_uint64()) {
      if (v.get_uint64() > static_cast<uint64_t>(INT64_MAX)) return false;
      *out = static_cast<int64_t>(v.get_uint64());
      return true;
    }
    if (v.is_double()) {
      const double d = v.get_double();
      if (!std::isfinite(d) || d != std::floor(d) ||
          std::fabs(d) > 9.007199254740992e15)
        return false;
      *out = static_cast<int64_t>(d);
      return true;
    }
    return false;
  }

 private:
  const json::object& obj_;
  std::string* param_;
};

Status Unsupported(std::string* param, std::string_view key,
                   std::string_view what) {
  *param = std::string(key);
  return Status::Unimplemented(std::string(what));
}

// stop: a string or an array of strings.
Status ReadStop(Reader& r, std::vector<std::string>* out, std::string* param) {
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
  if (out->size() > model::kMaxStopStrings) {
    *param = "stop";
    return Status::InvalidArgument(fmt::format(
        "stop may hold at most {} strings", model::kMaxStopStrings));
  }
  return Status::Ok();
}

// logit_bias: {"token id": bias, ...}.
Status ReadLogitBias(Reader& r, std::vector<std::pair<int32_t, float>>* out,
                     std::string* param) {
  const json::value* v = r.Find("logit_bias");
  if (v == nullptr) return Status::Ok();
  if (!v->is_object())
    return r.TypeError("logit_bias", "an object mapping token ids to numbers",
                       *v);
  for (const auto& kv : v->get_object()) {
    const std::string key(kv.key());
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || end != key.c_str() + key.size() || id < 0 ||
        id > INT32_MAX) {
      *param = "logit_bias";
      return Status::InvalidArgument(
          fmt::format("logit_bias key '{}' is not a token id", key));
    }
    double bias = 0;
    if (kv.value().is_double()) {
      bias = kv.value().get_double();
    } else if (int64_t i = 0; Reader::ToInt(kv.value(), &i)) {
      bias = static_cast<double>(i);
    } else {
      return r.TypeError("logit_bias", "an object mapping token ids to numbers",
                         kv.value());
    }
    out->emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return Status::Ok();
}

// Fields both APIs share.
Status ReadCommon(Reader& r, InferenceRequest* out, std::string* param) {
  RL_RETURN_IF_ERROR(r.String("model", &out->model));
  RL_RETURN_IF_ERROR(r.Bool("stream", &out->stream));
  if (const json::value* so = r.Find("stream_options")) {
    if (!so->is_object())
      return r.TypeError("stream_options", "an object", *so);
    std::string sub_param;
    Reader sr(so->get_object(), &sub_param);
    Status s = sr.Bool("include_usage", &out->include_usage);
    if (s.ok()) s = sr.Bool("continuous_usage_stats", &out->continuous_usage);
    if (!s.ok()) {
      *param = "stream_options." + sub_param;
      return s;
    }
  }
  model::SamplingParams& sp = out->sampling;
  int64_t max_tokens = -1;
  bool has_max = false, has_max_completion = false;
  RL_RETURN_IF_ERROR(r.Int("max_tokens", &max_tokens, &has_max, 1, INT32_MAX));
  RL_RETURN_IF_ERROR(r.Int("max_completion_tokens", &max_tokens,
                           &has_max_completion, 1, INT32_MAX));
  if (has_max || has_max_completion) {
    sp.max_tokens = static_cast<int32_t>(max_tokens);
  } else {
    sp.max_tokens = out->kind == api::ApiKind::kCompletions
                        ? kCompletionsDefaultMaxTokens
                        : -1;
  }
  RL_RETURN_IF_ERROR(r.Float("temperature", &sp.temperature));
  RL_RETURN_IF_ERROR(r.Float("top_p", &sp.top_p));
  int64_t top_k = sp.top_k;
  RL_RETURN_IF_ERROR(r.Int("top_k", &top_k, nullptr, -1, INT32_MAX));
  sp.top_k = static_cast<int32_t>(top_k);
  RL_RETURN_IF_ERROR(r.Float("min_p", &sp.min_p));
  RL_RETURN_IF_ERROR(r.Float("presence_penalty", &sp.presence_penalty));
  RL_RETURN_IF_ERROR(r.Float("frequency_penalty", &sp.frequency_penalty));
  RL_RETURN_IF_ERROR(r.Float("repetition_penalty", &sp.repetition_penalty));
  bool has_seed = false;
  int64_t seed = 0;
  RL_RETURN_IF_ERROR(r.Int("seed", &seed, &has_seed));
  if (has_seed) sp.seed = static_cast<uint64_t>(seed);
  RL_RETURN_IF_ERROR(ReadStop(r, &sp.stop, param));
  RL_RETURN_IF_ERROR(ReadLogitBias(r, &sp.logit_bias, param));
  int64_t n = 1;
  RL_RETURN_IF_ERROR(r.Int("n", &n, nullptr, 1, kMaxChoices));
  out->n = static_cast<int>(n);
  int64_t min_tokens = 0;
  RL_RETURN_IF_ERROR(r.Int("min_tokens", &min_tokens, nullptr, 0, INT32_MAX));
  sp.min_tokens = static_cast<int32_t>(min_tokens);
  RL_RETURN_IF_ERROR(r.Bool("ignore_eos", &sp.ignore_eos));
  RL_RETURN_IF_ERROR(r.String("user", &out->user));
  if (const json::value* rf = r.Find("response_format")) {
    if (!rf->is_object())
      return r.TypeError("response_format", "an object", *rf);
    const json::value* type = rf->get_object().if_contains("type");
    if (type == nullptr || !type->is_string()) {
      *param = "response_format.type";
      return Status::InvalidArgument("response_format.type must be a string");
    }
    if (type->get_string() != "text") {
      return Unsupported(param, "response_format",
                         fmt::format("response_format type '{}' is not "
                                     "supported by this server (only 'text')",
                                     std::string_view(type->get_string())));
    }
  }
  int64_t best_of = 1;
  bool has_best_of = false;
  RL_RETURN_IF_ERROR(r.Int("best_of", &best_of, &has_best_of, 1, kMaxChoices));
  if (has_best_of && best_of != 1 && best_of != n) {
    return Unsupported(param, "best_of",
                       "best_of other than 1 (or n) is not supported");
  }
  return Status::Ok();
}

// Flattens a message's content: a string stays; an array of
// {"type":"text","text":...} parts becomes their concatenation.
Status FlattenContent(json::object& msg, size_t index, std::string* param) {
  json::value* content = msg.if_contains("content");
  const std::string where = fmt::format("messages[{}].content", index);
  if (content == nullptr || content->is_null() || content->is_string())
    return Status::Ok();
  if (!content->is_array()) {
    *param = where;
    return Status::InvalidArgument(fmt::format(
        "'{}' must be a string or an array of content parts, got {}", where,
        KindName(content->kind())));
  }
  std::string text;
  for (const json::value& part : content->get_array()) {
    const json::object* p = part.if_object();
    const json::value* type = p ? p->if_contains("type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      *param = where;
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
      *param = where;
      return Status::InvalidArgument(
          fmt::format("a text part of '{}' needs a string 'text'", where));
    }
    text += t->get_string();
  }
  *content = json::string(text);
  return Status::Ok();
}

Status ReadChat(json::object& obj, Reader& r, InferenceRequest* out,
                std::string* param) {
  json::value* messages = obj.if_contains("messages");
  if (messages == nullptr || messages->is_null()) {
    *param = "messages";
    return Status::InvalidArgument("'messages' is required");
  }
  if (!messages->is_array())
    return r.TypeError("messages", "an array", *messages);
  if (messages->get_array().empty()) {
    *param = "messages";
    return Status::InvalidArgument("'messages' must not be empty");
  }
  size_t i = 0;
  for (json::value& m : messages->get_array()) {
    json::object* msg = m.if_object();
    if (msg == nullptr) {
      *param = fmt::format("messages[{}]", i);
      return Status::InvalidArgument(fmt::format(
          "'messages[{}]' must be an object, got {}", i, KindName(m.kind())));
    }
    const json::value* role = msg->if_contains("role");
    if (role == nullptr || !role->is_string()) {
      *param = fmt::format("messages[{}].role", i);
      return Status::InvalidArgument(
          fmt::format("'messages[{}].role' must be a string", i));
    }
    const std::string_view rs = role->get_string();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool" &&
        rs != "developer" && rs != "function") {
      *param = fmt::format("messages[{}].role", i);
      return Status::InvalidArgument(
          fmt::format("'messages[{}].role' must be one of system, developer, "
                      "user, assistant, tool; got '{}'",
                      i, rs));
    }
    RL_RETURN_IF_ERROR(FlattenContent(*msg, i, param));
    const json::value* content = msg->if_contains("content");
    if ((content == nullptr || content->is_null()) && rs != "assistant") {
      *param = fmt::format("messages[{}].content", i);
      return Status::InvalidArgument(fmt::format(
          "'messages[{}].content' is required for role '{}'", i, rs));
    }
    ++i;
  }
  out->messages = std::move(messages->get_array());
  if (const json::value* tools = r.Find("tools")) {
    if (!tools->is_array()) return r.TypeError("tools", "an array", *tools);
    out->tools = tools->get_array();
  }
  bool logprobs = false;
  RL_RETURN_IF_ERROR(r.Bool("logprobs", &logprobs));
  int64_t top = 0;
  bool has_top = false;
  RL_RETURN_IF_ERROR(
      r.Int("top_logprobs", &top, &has_top, 0, model::kMaxTopLogprobs));
  if (has_top && top > 0 && !logprobs) {
    *param = "top_logprobs";
    return Status::InvalidArgument("top_logprobs requires logprobs: true");
  }
  out->sampling.logprobs = logprobs;
  out->sampling.top_logprobs = static_cast<int32_t>(top);
  return Status::Ok();
}

// An array of integers as token ids; false if any element is not one.
bool ReadIds(const json::array& a, std::vector<int32_t>* ids) {
  ids->clear();
  for (const json::value& v : a) {
    int64_t id = 0;
    if (!Reader::ToInt(v, &id) || id < 0 || id > INT32_MAX) return false;
    ids->push_back(static_cast<int32_t>(id));
  }
  return true;
}

Status ReadCompletions(Reader& r, InferenceRequest* out, std::string* param) {
  const json::value* p = r.Find("prompt");
  if (p == nullptr) {
    *param = "prompt";
    return Status::InvalidArgument("'prompt' is required");
  }
  constexpr std::string_view kPromptTypes =
      "a string, an array of token ids, or a one-element array of either";
  if (p->is_string()) {
    out->prompt_text = std::string(p->get_string());
  } else if (p->is_array()) {
    const json::array& a = p->get_array();
    if (a.empty()) {
      *param = "prompt";
      return Status::InvalidArgument("'prompt' must not be empty");
    }
    if (a[0].is_string() || a[0].is_array()) {
      if (a.size() != 1) {
        return Unsupported(param, "prompt",
                           "only one prompt per request is supported (use n "
                           "for several choices)");
      }
      if (a[0].is_string()) {
        out->prompt_text = std::string(a[0].get_string());
      } else if (ReadIds(a[0].get_array(), &out->prompt_ids) &&
                 !out->prompt_ids.empty()) {
        out->prompt_is_ids = true;
      } else {
        return r.TypeError("prompt", kPromptTypes, a[0]);
      }
    } else if (ReadIds(a, &out->prompt_ids)) {
      out->prompt_is_ids = true;
    } else {
      *param = "prompt";
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
  int64_t logprobs = 0;
  bool has_logprobs = false;
  RL_RETURN_IF_ERROR(
      r.Int("logprobs", &logprobs, &has_logprobs, 0, model::kMaxTopLogprobs));
  out->sampling.logprobs = has_logprobs;
  out->sampling.top_logprobs = static_cast<int32_t>(logprobs);
  return Status::Ok();
}

}  // namespace

Status ParseInferenceRequest(std::string_view body, api::ApiKind kind,
                             InferenceRequest* out, std::string* error_param) {
  error_param->clear();
  *out = InferenceRequest();
  out->kind = kind;
  boost::system::error_code ec;
  json::value root = json::parse(body, ec);
  if (ec)
    return Status::InvalidArgument("the body is not valid JSON: " +
                                   ec.message());
  json::object* obj = root.if_object();
  if (obj == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "the body must be a JSON object, got {}", KindName(root.kind())));
  }
  Reader r(*obj, error_param);
  RL_RETURN_IF_ERROR(ReadCommon(r, out, error_param));
  if (kind == api::ApiKind::kChat) return ReadChat(*obj, r, out, error_param);
  return ReadCompletions(r, out, error_param);
}

std::string ParamOfValidationMessage(std::string_view message) {
  static constexpr std::string_view kFields[] = {"temperature",
                                                 "top_k",
                                                 "top_p",
                                                 "min_p",
                                                 "repetition_penalty",
                                                 "presence_penalty",
                                                 "frequency_penalty",
                                                 "logit_bias",
                                                 "max_tokens",
                                                 "min_tokens",
                                                 "top_logprobs",
                                                 "stop"};
  for (std::string_view f : kFields) {
    if (message.starts_with(f)) return std::string(f);
  }
  if (message.find("stop string") != std::string_view::npos) return "stop";
  return {};
}

}  // namespace redline::server

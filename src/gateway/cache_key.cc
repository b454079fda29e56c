#include "gateway/cache_key.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "gateway/cache_config.h"
#include "gateway/hash.h"

namespace redline::gateway {
namespace {

namespace json = boost::json;

// JSON with object members sorted by key, recursively.
json::value Sorted(const json::value& v) {
  if (v.is_array()) {
    json::array a;
    for (const json::value& x : v.get_array()) a.push_back(Sorted(x));
    return a;
  }
  if (!v.is_object()) return v;
  std::vector<std::pair<std::string, const json::value*>> members;
  for (const auto& kv : v.get_object())
    members.emplace_back(std::string(kv.key()), &kv.value());
  std::sort(members.begin(), members.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  json::object o;
  for (const auto& [k, x] : members) o[k] = Sorted(*x);
  return o;
}

template <typename T>
void Opt(json::object& o, const char* name, const std::optional<T>& v) {
  if (v) o[name] = *v;
}

}  // namespace

CacheKey BuildCacheKey(const api::CompletionRequest& r,
                       std::string_view resolved_model,
                       std::string_view route_class, const json::object& body,
                       bool normalize_text) {
  auto text = [normalize_text](const std::string& t) {
    return normalize_text ? json::string(NormalizeQuestion(t))
                          : json::string(t);
  };
  // An ordered array, not an object: the order is fixed here, not by JSON.
  json::array k;
  k.push_back(r.kind == api::ApiKind::kChat ? "chat" : "completions");
  k.push_back(json::string(resolved_model));
  k.push_back(json::string(route_class));
  if (r.kind == api::ApiKind::kChat) {
    json::array msgs;
    for (const api::ChatMessage& m : r.messages) {
      json::array one;
      one.push_back(json::string(m.role));
      if (m.content_null) {
        one.push_back(nullptr);
      } else {
        one.push_back(text(m.content));
      }
      one.push_back(Sorted(m.extra));
      msgs.push_back(std::move(one));
    }
    k.push_back(std::move(msgs));
  } else if (r.prompt_is_ids()) {
    json::array ids;
    for (int32_t id : r.prompt_ids) ids.push_back(id);
    k.push_back(std::move(ids));
  } else {
    k.push_back(text(r.prompt));
  }
  k.push_back(normalize_text);
  const api::SamplingParams& s = r.sampling;
  json::object sp;
  Opt(sp, "max_tokens", s.max_tokens);
  Opt(sp, "temperature", s.temperature);
  Opt(sp, "top_p", s.top_p);
  Opt(sp, "top_k", s.top_k);
  Opt(sp, "min_p", s.min_p);
  Opt(sp, "frequency_penalty", s.frequency_penalty);
  Opt(sp, "presence_penalty", s.presence_penalty);
  Opt(sp, "repetition_penalty", s.repetition_penalty);
  Opt(sp, "seed", s.seed);
  Opt(sp, "min_tokens", s.min_tokens);
  Opt(sp, "ignore_eos", s.ignore_eos);
  json::array stop;
  for (const std::string& x : s.stop) stop.push_back(json::string(x));
  sp["stop"] = std::move(stop);
  json::array bias;
  for (const auto& [id, b] : s.logit_bias) bias.push_back(json::array{id, b});
  sp["logit_bias"] = std::move(bias);
  sp["logprobs"] = s.logprobs;
  sp["top_logprobs"] = s.top_logprobs;
  sp["n"] = r.n;
  sp["stream"] = r.stream;
  sp["include_usage"] = r.include_usage;
  sp["continuous_usage"] = r.continuous_usage;
  k.push_back(Sorted(sp));
  k.push_back(Sorted(json::value(r.tools)));
  for (const char* extra :
       {"response_format", "tool_choice", "parallel_tool_calls"}) {
    const json::value* v = body.if_contains(extra);
    k.push_back(v == nullptr ? json::value(nullptr) : Sorted(*v));
  }
  CacheKey out;
  out.canonical = json::serialize(k);
  const uint64_t a = Mix64(Fnv1a(out.canonical));
  const uint64_t b = Mix64(Fnv1a(out.canonical, a ^ 0x9e3779b97f4a7c15ull));
  out.hash_hex = fmt::format("{:016x}{:016x}", a, b);
  return out;
}

std::string StorageKey(std::string_view name_space, std::string_view cls,
                       std::string_view model, std::string_view hash_hex) {
  std::string m(model.substr(0, 128));
  // ':' and glob characters in a model name would blur prefix purges.
  for (char& c : m)
    if (c == ':' || c == '*' || c == '?' || c == '[' || c == ']' || c == '\\')
      c = '_';
  return fmt::format("{}:{}:{}:{}", name_space, cls, m, hash_hex);
}

std::string_view LastUserText(const api::CompletionRequest& r) {
  if (r.kind != api::ApiKind::kChat) return r.prompt;
  for (auto it = r.messages.rbegin(); it != r.messages.rend(); ++it)
    if (it->role == "user") return it->content;
  return {};
}

bool IsDeterministic(const api::CompletionRequest& r) {
  return (r.sampling.temperature && *r.sampling.temperature == 0.0) ||
         r.sampling.seed.has_value();
}

}  // namespace redline::gateway

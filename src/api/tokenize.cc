#include "api/tokenize.h"

#include <fmt/format.h>

#include <boost/json.hpp>

#include "api/json_reader.h"
#include "base/utf8.h"

namespace redline::api {
namespace json = boost::json;

namespace {

Status TooLarge(size_t bytes, size_t max_bytes) {
  return Status::ResourceExhausted(
      fmt::format("the response would be about {} bytes, over the limit of {} "
                  "bytes; send a shorter input",
                  bytes, max_bytes));
}

}  // namespace

Result<TokenizeRequest> ParseTokenizeRequest(std::string_view body,
                                             std::string* error_param) {
  error_param->clear();
  json::error_code ec;
  json::value root = json::parse(body, ec);
  if (ec || !root.is_object())
    return Status::InvalidArgument("the body must be a JSON object");
  const json::object& o = root.get_object();
  internal::Reader r(o, error_param);
  TokenizeRequest out;
  const json::value* content = r.Find("content");
  if (content == nullptr) {
    content = r.Find("prompt");
    out.add_special = true;
  }
  RL_RETURN_IF_ERROR(r.Bool("add_special", &out.add_special));
  RL_RETURN_IF_ERROR(r.Bool("add_special_tokens", &out.add_special));
  RL_RETURN_IF_ERROR(r.Bool("with_pieces", &out.with_pieces));
  RL_RETURN_IF_ERROR(r.String("model", &out.model));
  if (r.Find("messages") != nullptr) {
    json::object chat;
    chat["messages"] = o.at("messages");
    RL_ASSIGN_OR_RETURN(
        CompletionRequest cr,
        ParseRequest(json::serialize(chat), ApiKind::kChat, error_param));
    out.messages = std::move(cr.messages);
    return out;
  }
  if (content == nullptr || !content->is_string()) {
    *error_param = "content";
    return Status::InvalidArgument(
        "give 'content' (or 'prompt') as a string, or 'messages'");
  }
  out.text = std::string(content->get_string());
  return out;
}

Result<std::string> BuildTokenizeResponse(
    const std::vector<int32_t>& ids, const std::vector<std::string>* pieces,
    int64_t max_model_len, size_t max_bytes) {
  // Estimate first, so that the limit is checked before anything is built:
  // an id takes at most 11 bytes and a comma; a piece at most 6 bytes per
  // byte when escaped, plus the object's keys.
  size_t estimate = 64;
  for (size_t i = 0; i < ids.size(); ++i) {
    estimate += 12;
    if (pieces != nullptr) estimate += 24 + 6 * (*pieces)[i].size();
    if (estimate > max_bytes) return TooLarge(estimate, max_bytes);
  }
  json::array tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (pieces != nullptr) {
      json::object t;
      t["id"] = ids[i];
      t["piece"] = utf8::Sanitize((*pieces)[i]);
      tokens.push_back(std::move(t));
    } else {
      tokens.push_back(ids[i]);
    }
  }
  json::object out;
  out["tokens"] = std::move(tokens);
  out["count"] = static_cast<int64_t>(ids.size());
  out["max_model_len"] = max_model_len;
  return json::serialize(out);
}

Result<std::vector<int64_t>> ParseDetokenizeRequest(std::string_view body) {
  json::error_code ec;
  json::value root = json::parse(body, ec);
  const json::value* tokens = nullptr;
  if (!ec && root.is_object()) tokens = root.get_object().if_contains("tokens");
  if (tokens == nullptr || !tokens->is_array())
    return Status::InvalidArgument("the body must be {\"tokens\": [ids...]}");
  std::vector<int64_t> ids;
  ids.reserve(tokens->get_array().size());
  for (const json::value& v : tokens->get_array()) {
    int64_t id = 0;
    if (internal::ToInt(v, &id) != internal::IntRead::kOk || id < 0)
      return Status::InvalidArgument("'tokens' must hold token ids");
    ids.push_back(id);
  }
  return ids;
}

Result<std::string> BuildDetokenizeResponse(std::string_view text,
                                            size_t max_bytes) {
  // Two copies of the text, each at most 6 bytes per byte when escaped.
  const size_t estimate = 64 + 12 * text.size();
  if (estimate > max_bytes) return TooLarge(estimate, max_bytes);
  const std::string valid = utf8::Sanitize(text);
  json::object out;
  out["content"] = valid;  // llama.cpp
  out["prompt"] = valid;   // vLLM
  return json::serialize(out);
}

}  // namespace redline::api

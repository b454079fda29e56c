#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "server/api_error.h"

namespace redline::server {
namespace {

namespace json = boost::json;

json::value ParseData(const std::string& sse) {
  EXPECT_TRUE(sse.starts_with("data: ")) << sse;
  EXPECT_TRUE(sse.ends_with("\n\n")) << sse;
  return json::parse(sse.substr(6, sse.size() - 8));
}

TEST(OpenAiResponseTest, ChatChunks) {
  ResponseIds ids{"chatcmpl-1", "m", 123};
  ChunkChoice role;
  role.role = true;
  json::value v =
      ParseData(SseChunk(api::ApiKind::kChat, ids, {role}, nullptr, nullptr));
  EXPECT_EQ(v.at("object").as_string(), "chat.completion.chunk");
  EXPECT_EQ(v.at("choices").at(0).at("delta").at("role").as_string(),
            "assistant");
  EXPECT_EQ(v.at("choices").at(0).at("delta").at("content").as_string(), "");
  EXPECT_TRUE(v.at("choices").at(0).at("finish_reason").is_null());

  ChunkChoice text;
  text.index = 1;
  text.text = "hi \xff";  // invalid UTF-8 becomes U+FFFD
  v = ParseData(SseChunk(api::ApiKind::kChat, ids, {text}, nullptr, nullptr));
  EXPECT_EQ(v.at("choices").at(0).at("index").as_int64(), 1);
  EXPECT_EQ(v.at("choices").at(0).at("delta").at("content").as_string(),
            "hi \xEF\xBF\xBD");

  UsageCounts usage{10, 5, 4};
  v = ParseData(SseChunk(api::ApiKind::kChat, ids, {}, &usage, nullptr));
  EXPECT_TRUE(v.at("choices").as_array().empty());
  EXPECT_EQ(v.at("usage").at("total_tokens").as_int64(), 15);
  EXPECT_EQ(
      v.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(),
      4);
}

TEST(OpenAiResponseTest, CompletionResponse) {
  ResponseIds ids{"cmpl-1", "m", 123};
  FinalChoice c;
  c.text = "abc";
  c.finish_reason = "length";
  json::value v = json::parse(CompletionResponse(
      api::ApiKind::kCompletions, ids, {c}, {3, 2, 0}, nullptr, nullptr));
  EXPECT_EQ(v.at("object").as_string(), "text_completion");
  EXPECT_EQ(v.at("choices").at(0).at("text").as_string(), "abc");
  EXPECT_EQ(v.at("choices").at(0).at("finish_reason").as_string(), "length");
  EXPECT_EQ(v.at("usage").at("completion_tokens").as_int64(), 2);
}

TEST(OpenAiResponseTest, ErrorJson) {
  json::value v =
      json::parse(ApiErrorJson(ApiError::BadRequest("bad", "temperature")));
  EXPECT_EQ(v.at("error").at("type").as_string(), "invalid_request_error");
  EXPECT_EQ(v.at("error").at("param").as_string(), "temperature");
  EXPECT_EQ(v.at("error").at("code").as_string(), "invalid_value");
  v = json::parse(ApiErrorJson(ApiError::Overloaded("full", 0)));
  EXPECT_TRUE(v.at("error").at("param").is_null());
  EXPECT_EQ(ApiError::Overloaded("full", 0).retry_after_s, 1);
}

}  // namespace
}  // namespace redline::server

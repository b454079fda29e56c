#include "api/openai.h"

#include <gtest/gtest.h>

namespace redline::api {
namespace {

TEST(OpenAiTest, SerializesChatRequestWithUsageOption) {
  CompletionRequest r;
  r.model = "m";
  r.messages = {{"system", "be brief"}, {"user", "hi \"there\""}};
  r.sampling.max_tokens = 16;
  r.sampling.temperature = 0.5;
  r.extra_json = R"({"ignore_eos": true})";
  auto s = SerializeRequest(r);
  ASSERT_TRUE(s.ok());
  auto back = ParseRequest(*s, ApiKind::kChat);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->model, "m");
  ASSERT_EQ(back->messages.size(), 2u);
  EXPECT_EQ(back->messages[1].content, "hi \"there\"");
  EXPECT_EQ(*back->sampling.max_tokens, 16);
  EXPECT_DOUBLE_EQ(*back->sampling.temperature, 0.5);
  EXPECT_TRUE(back->stream);
  EXPECT_TRUE(back->include_usage);
  EXPECT_TRUE(*back->sampling.ignore_eos);

  r.extra_json = "[1]";
  EXPECT_FALSE(SerializeRequest(r).ok());
}

TEST(OpenAiTest, CompletionsRequestRoundTrip) {
  CompletionRequest r;
  r.kind = ApiKind::kCompletions;
  r.prompt = "Once";
  r.stream = false;
  auto s = SerializeRequest(r);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->find("stream_options"), std::string::npos);
  auto back = ParseRequest(*s, ApiKind::kCompletions);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->prompt, "Once");
  EXPECT_FALSE(back->stream);
  EXPECT_FALSE(ParseRequest("{}", ApiKind::kCompletions).ok());
  EXPECT_FALSE(ParseRequest("{}", ApiKind::kChat).ok());
  EXPECT_FALSE(ParseRequest("nope", ApiKind::kChat).ok());
}

TEST(OpenAiTest, ParsesChunkKindsThatMustNotStopTheTtftClock) {
  StreamChunk c;
  // Role-only first chunk, content null (llama.cpp) or "" (OpenAI).
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]})",
          &c)
          .ok());
  EXPECT_TRUE(c.content.empty());
  EXPECT_TRUE(c.has_role);
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null})",
          &c)
          .ok());
  EXPECT_TRUE(c.content.empty());
  EXPECT_FALSE(c.usage.has_value());
  // Finish chunk.
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", &c)
          .ok());
  EXPECT_TRUE(c.has_finish);
  EXPECT_EQ(c.finish_reason, "stop");
  // Usage-only chunk.
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})",
          &c)
          .ok());
  ASSERT_TRUE(c.usage.has_value());
  EXPECT_EQ(c.usage->completion_tokens, 7);
  EXPECT_EQ(c.num_choices, 0);
}

TEST(OpenAiTest, ParsesContentReasoningAndCompletionText) {
  StreamChunk c;
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})",
          &c)
          .ok());
  EXPECT_EQ(c.content, "Hi");
  EXPECT_FALSE(c.has_finish);
  ASSERT_TRUE(ParseStreamChunk(
                  R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})", &c)
                  .ok());
  EXPECT_EQ(c.reasoning, "hmm");
  EXPECT_TRUE(c.content.empty());
  ASSERT_TRUE(
      ParseStreamChunk(R"({"choices":[{"delta":{"reasoning":"r"}}]})", &c)
          .ok());
  EXPECT_EQ(c.reasoning, "r");
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"object":"text_completion","choices":[{"text":" world","finish_reason":null}]})",
          &c)
          .ok());
  EXPECT_EQ(c.content, " world");
}

TEST(OpenAiTest, ParsesInStreamErrorsAndRejectsGarbage) {
  StreamChunk c;
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"error":{"message":"boom","type":"server_error","code":500}})",
          &c)
          .ok());
  ASSERT_TRUE(c.error.has_value());
  EXPECT_EQ(c.error->message, "boom");
  EXPECT_EQ(c.error->code, "500");
  EXPECT_FALSE(ParseStreamChunk("{not json", &c).ok());
  EXPECT_FALSE(ParseStreamChunk(R"({"id":"x"})", &c).ok());
  EXPECT_FALSE(ParseStreamChunk("[]", &c).ok());
}

ChunkFields Fields(std::optional<std::string> role,
                   std::optional<std::string> content,
                   std::optional<std::string> finish,
                   std::optional<Usage> usage) {
  ChunkFields f;
  f.role = std::move(role);
  f.content = std::move(content);
  f.finish_reason = std::move(finish);
  f.usage = usage;
  return f;
}

TEST(OpenAiTest, BuildersProduceWhatTheParsersRead) {
  ResponseIdentity id{"chatcmpl-1", "m", 1700000000};
  StreamChunk c;
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kChat, id, Fields("assistant", "", {}, {})), &c)
          .ok());
  EXPECT_TRUE(c.has_role);
  EXPECT_TRUE(c.content.empty());
  ASSERT_TRUE(ParseStreamChunk(
                  BuildChunk(ApiKind::kChat, id, Fields({}, "tok", {}, {})), &c)
                  .ok());
  EXPECT_EQ(c.content, "tok");
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kCompletions, id, Fields({}, "t2", {}, {})), &c)
          .ok());
  EXPECT_EQ(c.content, "t2");
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kChat, id, Fields({}, {}, "length", {})), &c)
          .ok());
  EXPECT_TRUE(c.has_finish);
  Usage u;
  u.prompt_tokens = 3;
  u.completion_tokens = 4;
  ASSERT_TRUE(ParseStreamChunk(
                  BuildChunk(ApiKind::kChat, id, Fields({}, {}, {}, u)), &c)
                  .ok());
  ASSERT_TRUE(c.usage.has_value());
  EXPECT_EQ(c.usage->total_tokens, 7);

  auto r = ParseResponse(BuildResponse(ApiKind::kChat, id, "hello", "stop", u));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "hello");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->usage->completion_tokens, 4);
  auto e = ParseErrorBody(BuildErrorBody({"slow down", "rate_limit", "429"}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "slow down");
  EXPECT_EQ(JsonQuote("a\"b\n"), "\"a\\\"b\\n\"");
}

}  // namespace
}  // namespace redline::api

#include "api/request.h"

#include <gtest/gtest.h>

namespace redline::api {
namespace {

struct Parsed {
  Status status;
  std::string param;
  CompletionRequest req;
};

Parsed Parse(std::string_view body, ApiKind kind = ApiKind::kChat) {
  Parsed p;
  auto r = ParseRequest(body, kind, &p.param);
  p.status = r.status();
  if (r.ok()) p.req = std::move(r).value();
  return p;
}

TEST(RequestTest, ChatFields) {
  Parsed p = Parse(
      R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "max_tokens":12,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"presence_penalty":0.1,
    "frequency_penalty":0.2,"repetition_penalty":1.1,"seed":7,"stop":["x","y"],"n":2,"logprobs":true,
    "top_logprobs":3,"user":"u","stream":true,"stream_options":{"include_usage":true},"unknown":{"a":1},
    "logit_bias":{"5":-100}})");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  const CompletionRequest& r = p.req;
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(*r.sampling.max_tokens, 12);
  EXPECT_DOUBLE_EQ(*r.sampling.temperature, 0.5);
  EXPECT_EQ(*r.sampling.top_k, 40);
  EXPECT_EQ(*r.sampling.seed, 7);
  EXPECT_EQ(r.sampling.stop.size(), 2u);
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  ASSERT_EQ(r.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.sampling.logit_bias[0].first, 5);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
}

TEST(RequestTest, DefaultsAndNulls) {
  Parsed p = Parse(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":null,"temperature":null})");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_FALSE(p.req.sampling.max_tokens.has_value());
  EXPECT_FALSE(p.req.sampling.temperature.has_value());
  EXPECT_FALSE(p.req.stream);
  Parsed c = Parse(R"({"prompt":"hi"})", ApiKind::kCompletions);
  ASSERT_TRUE(c.status.ok());
  EXPECT_FALSE(c.req.sampling.max_tokens.has_value());
  Parsed mc = Parse(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"max_completion_tokens":9})");
  EXPECT_EQ(*mc.req.sampling.max_tokens, 9);
}

TEST(RequestTest, CompletionPrompts) {
  Parsed ids = Parse(R"({"prompt":[1,2,3]})", ApiKind::kCompletions);
  ASSERT_TRUE(ids.status.ok());
  EXPECT_TRUE(ids.req.prompt_is_ids());
  EXPECT_EQ(ids.req.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  Parsed nested =
      Parse(R"({"prompt":[[4,5]],"logprobs":2})", ApiKind::kCompletions);
  ASSERT_TRUE(nested.status.ok());
  EXPECT_EQ(nested.req.prompt_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(nested.req.sampling.logprobs);
  EXPECT_EQ(nested.req.sampling.top_logprobs, 2);
  Parsed text = Parse(R"({"prompt":["hello"]})", ApiKind::kCompletions);
  ASSERT_TRUE(text.status.ok());
  EXPECT_EQ(text.req.prompt, "hello");
  Parsed two = Parse(R"({"prompt":["a","b"]})", ApiKind::kCompletions);
  EXPECT_EQ(two.status.code(), StatusCode::kUnimplemented);
  Parsed bad = Parse(R"({"prompt":[1,"x"]})", ApiKind::kCompletions);
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.param, "prompt");
}

TEST(RequestTest, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {"{", ""},
      {"[1]", ""},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({})", "messages"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})",
       "temperature"},
      // Boost.JSON reads these as infinity and NaN.
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":1e400})",
       "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0e400})",
       "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})",
       "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1.5})",
       "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})",
       "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":0})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})",
       "top_logprobs"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":1}})",
       "stream_options.include_usage"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"a":1}})",
       "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"model":3})", "model"},
      // Fields kept as sent and written out again (message extras, tools,
      // unknown members) are refused too, wherever the number is.
      {R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"x":[1,2e999]}]}]})",
       "messages[1].tool_calls[0].x[1]"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"maximum":-1e400}}}]})",
       "tools[0].function.parameters.maximum"},
      {R"({"messages":[{"role":"user","content":"x"}],"vendor_knob":1e400})",
       "vendor_knob"},
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.body);
    EXPECT_EQ(p.status.code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(p.param, c.param) << c.body << " -> " << p.status.ToString();
  }
}

TEST(RequestTest, UnsupportedFeatures) {
  EXPECT_EQ(Parse(R"({"prompt":"x","echo":true})", ApiKind::kCompletions)
                .status.code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(
      Parse(
          R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})")
          .status.code(),
      StatusCode::kUnimplemented);
  EXPECT_TRUE(
      Parse(
          R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})")
          .status.ok());
}

TEST(RequestTest, AssistantToolCallsWithNullContent) {
  Parsed p = Parse(
      R"({"messages":[{"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
      "function":{"name":"get","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"sunny"}]})");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  ASSERT_EQ(p.req.messages.size(), 3u);
  EXPECT_TRUE(p.req.messages[1].content_null);
  EXPECT_TRUE(p.req.messages[1].extra.contains("tool_calls"));
  EXPECT_EQ(p.req.messages[2].extra.at("tool_call_id").as_string(), "c1");
  const boost::json::array a = MessagesToJson(p.req.messages);
  EXPECT_TRUE(a[1].as_object().at("content").is_null());
  EXPECT_TRUE(a[1].as_object().contains("tool_calls"));
}

TEST(RequestTest, HugeIntegersAreRangeErrors) {
  Parsed p = Parse(
      R"({"messages":[{"role":"user","content":"x"}],"seed":18446744073709551615})");
  EXPECT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.param, "seed");
  EXPECT_EQ(p.status.message().find("got an integer"), std::string::npos)
      << p.status.message();
  Parsed m = Parse(
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":9223372036854775808})");
  EXPECT_EQ(m.param, "max_tokens");
  EXPECT_NE(m.status.message().find("must be in"), std::string::npos)
      << m.status.message();
}

}  // namespace
}  // namespace redline::api

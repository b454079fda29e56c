#include "server/inference_request.h"

#include <gtest/gtest.h>

namespace redline::server {
namespace {

struct Parsed {
  Status status;
  std::string param;
  InferenceRequest req;
};

Parsed Parse(std::string_view body, api::ApiKind kind = api::ApiKind::kChat) {
  Parsed p;
  p.status = ParseInferenceRequest(body, kind, &p.req, &p.param);
  return p;
}

TEST(InferenceRequestTest, ChatFields) {
  Parsed p = Parse(
      R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "max_tokens":12,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"presence_penalty":0.1,
    "frequency_penalty":0.2,"repetition_penalty":1.1,"seed":7,"stop":["x","y"],"n":2,"logprobs":true,
    "top_logprobs":3,"user":"u","stream":true,"stream_options":{"include_usage":true},"unknown":{"a":1},
    "logit_bias":{"5":-100}})");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  const InferenceRequest& r = p.req;
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.sampling.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(*r.sampling.seed, 7u);
  EXPECT_EQ(r.sampling.stop.size(), 2u);
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  ASSERT_EQ(r.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.sampling.logit_bias[0].first, 5);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].as_object().at("content").as_string(), "ab");
}

TEST(InferenceRequestTest, DefaultsAndNulls) {
  Parsed p = Parse(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":null,"temperature":null})");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.req.sampling.max_tokens, -1);
  EXPECT_FALSE(p.req.stream);
  Parsed c = Parse(R"({"prompt":"hi"})", api::ApiKind::kCompletions);
  ASSERT_TRUE(c.status.ok());
  EXPECT_EQ(c.req.sampling.max_tokens, kCompletionsDefaultMaxTokens);
  Parsed mc = Parse(
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"max_completion_tokens":9})");
  EXPECT_EQ(mc.req.sampling.max_tokens, 9);
}

TEST(InferenceRequestTest, CompletionPrompts) {
  Parsed ids = Parse(R"({"prompt":[1,2,3]})", api::ApiKind::kCompletions);
  ASSERT_TRUE(ids.status.ok());
  EXPECT_TRUE(ids.req.prompt_is_ids);
  EXPECT_EQ(ids.req.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  Parsed nested =
      Parse(R"({"prompt":[[4,5]],"logprobs":2})", api::ApiKind::kCompletions);
  ASSERT_TRUE(nested.status.ok());
  EXPECT_EQ(nested.req.prompt_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(nested.req.sampling.logprobs);
  EXPECT_EQ(nested.req.sampling.top_logprobs, 2);
  Parsed text = Parse(R"({"prompt":["hello"]})", api::ApiKind::kCompletions);
  ASSERT_TRUE(text.status.ok());
  EXPECT_EQ(text.req.prompt_text, "hello");
  Parsed two = Parse(R"({"prompt":["a","b"]})", api::ApiKind::kCompletions);
  EXPECT_EQ(two.status.code(), StatusCode::kUnimplemented);
  Parsed bad = Parse(R"({"prompt":[1,"x"]})", api::ApiKind::kCompletions);
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.param, "prompt");
}

TEST(InferenceRequestTest, ErrorsNameTheField) {
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
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.body);
    EXPECT_EQ(p.status.code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(p.param, c.param) << c.body << " -> " << p.status.ToString();
  }
}

TEST(InferenceRequestTest, UnsupportedFeatures) {
  EXPECT_EQ(Parse(R"({"prompt":"x","echo":true})", api::ApiKind::kCompletions)
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

TEST(InferenceRequestTest, ParamOfValidationMessage) {
  EXPECT_EQ(ParamOfValidationMessage("top_p must be in (0, 1], got 2"),
            "top_p");
  EXPECT_EQ(ParamOfValidationMessage("something else"), "");
}

}  // namespace
}  // namespace redline::server

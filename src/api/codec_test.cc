#include <gtest/gtest.h>

#include <limits>

#include "api/access.h"
#include "api/error.h"
#include "api/models.h"
#include "api/request.h"
#include "api/response.h"
#include "api/tokenize.h"

namespace redline::api {
namespace {

TEST(CodecTest, SerializesChatRequestWithUsageOption) {
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
  EXPECT_EQ(back->messages[0].role, "system");

  r.extra_json = "[1]";
  EXPECT_FALSE(SerializeRequest(r).ok());
}

TEST(CodecTest, CompletionsRequestRoundTrip) {
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

TEST(CodecTest, ParsesChunkKindsThatMustNotStopTheTtftClock) {
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

TEST(CodecTest, ParsesContentReasoningAndCompletionText) {
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

// The first choice's token logprobs of a chunk (chat and completions
// shapes), as a non-streamed answer's; cleared by the next chunk.
TEST(CodecTest, ParsesChunkTokenLogprobs) {
  StreamChunk c;
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[{"delta":{"content":"Hi"},"logprobs":{"content":[)"
          R"({"token":"Hi","logprob":-0.5,"top_logprobs":[]}]}},)"
          R"({"delta":{"content":"x"},"logprobs":{"content":[{"logprob":-9}]}}]})",
          &c)
          .ok());
  EXPECT_EQ(c.token_logprobs, std::vector<double>{-0.5});
  ASSERT_TRUE(ParseStreamChunk(
                  R"({"choices":[{"text":" a","logprobs":{"tokens":[" a"],)"
                  R"("token_logprobs":[-1.25],"top_logprobs":null}}]})",
                  &c)
                  .ok());
  EXPECT_EQ(c.token_logprobs, std::vector<double>{-1.25});
  ASSERT_TRUE(
      ParseStreamChunk(R"({"choices":[{"delta":{"content":"y"}}]})", &c).ok());
  EXPECT_TRUE(c.token_logprobs.empty());
}

TEST(CodecTest, ParsesInStreamErrorsAndRejectsGarbage) {
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

ChunkChoice Choice(bool role, std::optional<std::string> text,
                   std::optional<std::string> finish) {
  ChunkChoice c;
  c.role = role;
  c.text = std::move(text);
  c.finish_reason = std::move(finish);
  return c;
}

TEST(CodecTest, BuildersProduceWhatTheParsersRead) {
  ResponseIdentity id{"chatcmpl-1", "m", 1700000000};
  StreamChunk c;
  ASSERT_TRUE(ParseStreamChunk(
                  BuildChunk(ApiKind::kChat, id, {Choice(true, {}, {})}), &c)
                  .ok());
  EXPECT_TRUE(c.has_role);
  EXPECT_TRUE(c.content.empty());
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kChat, id, {Choice(false, "tok", {})}), &c)
          .ok());
  EXPECT_EQ(c.content, "tok");
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kCompletions, id, {Choice(false, "t2", {})}), &c)
          .ok());
  EXPECT_EQ(c.content, "t2");
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kChat, id, {Choice(false, {}, "length")}), &c)
          .ok());
  EXPECT_TRUE(c.has_finish);
  EXPECT_EQ(c.finish_reason, "length");
  Usage u;
  u.prompt_tokens = 3;
  u.completion_tokens = 4;
  u.cached_tokens = 2;
  ASSERT_TRUE(
      ParseStreamChunk(BuildChunk(ApiKind::kChat, id, {}, &u), &c).ok());
  ASSERT_TRUE(c.usage.has_value());
  EXPECT_EQ(c.usage->total_tokens, 7);
  EXPECT_EQ(c.usage->cached_tokens, 2);
  EXPECT_EQ(c.num_choices, 0);

  // n = 2: both choices' text is summed by the client parser.
  ChunkChoice second = Choice(false, "b", {});
  second.index = 1;
  ASSERT_TRUE(
      ParseStreamChunk(
          BuildChunk(ApiKind::kChat, id, {Choice(false, "a", {}), second}), &c)
          .ok());
  EXPECT_EQ(c.num_choices, 2);
  EXPECT_EQ(c.content, "ab");

  FinalChoice f;
  f.text = "hello";
  f.finish_reason = "stop";
  ServerTimings t;
  t.ttft_ms = 12.5;
  const std::string body = BuildResponse(ApiKind::kChat, id, {f}, u, &t);
  auto r = ParseResponse(body);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "hello");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->usage->completion_tokens, 4);
  EXPECT_NE(body.find("\"ttft_ms\":1.25E1"), std::string::npos) << body;
  auto rc = ParseResponse(BuildResponse(ApiKind::kCompletions, id, {f}, u));
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->content, "hello");

  ApiError err = ApiError::Overloaded("slow down", 3);
  const std::string eb = BuildErrorBody(err);
  auto e = ParseErrorBody(eb);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "slow down");
  EXPECT_EQ(e->type, "rate_limit_error");
  EXPECT_EQ(e->code, "queue_full");
  EXPECT_NE(eb.find("\"param\":null"), std::string::npos);
  EXPECT_EQ(JsonQuote("a\"b\n"), "\"a\\\"b\\n\"");
}

TEST(CodecTest, InvalidUtf8IsSentAsReplacementWithExactBytes) {
  ResponseIdentity id{"chatcmpl-1", "m", 1};
  ChunkChoice c = Choice(false, std::string("a\xff"), {});
  LogprobEntry lp;
  lp.chosen = {std::string("\xe2\x82"), -0.5f};
  lp.top = {{"x", -1.0f}, {"y", -std::numeric_limits<float>::infinity()}};
  c.logprobs.push_back(lp);
  const std::string chunk = BuildChunk(ApiKind::kChat, id, {c});
  EXPECT_NE(chunk.find("a\xef\xbf\xbd"), std::string::npos) << chunk;
  EXPECT_NE(chunk.find("\"bytes\":[226,130]"), std::string::npos) << chunk;
  EXPECT_NE(chunk.find("-9.999E3"), std::string::npos) << chunk;
  StreamChunk parsed;
  EXPECT_TRUE(ParseStreamChunk(chunk, &parsed).ok());
  const std::string comp = BuildChunk(ApiKind::kCompletions, id, {c});
  EXPECT_NE(comp.find("\"text_offset\":[0]"), std::string::npos) << comp;
}

// Every request field the server reads and the bench sends survives
// SerializeRequest -> ParseRequest.
TEST(CodecTest, RequestRoundTripsEveryField) {
  CompletionRequest r;
  r.model = "light";
  r.messages = {{"system", "s"}, {"user", "u"}};
  ChatMessage tool_call{"assistant", ""};
  tool_call.content_null = true;
  tool_call.extra["tool_calls"] = boost::json::array{
      boost::json::object{{"id", "c1"}, {"type", "function"}}};
  r.messages.push_back(tool_call);
  r.tools.push_back(boost::json::object{{"type", "function"}});
  SamplingParams& s = r.sampling;
  s.max_tokens = 9;
  s.temperature = 0.25;
  s.top_p = 0.5;
  s.top_k = 7;
  s.min_p = 0.125;
  s.frequency_penalty = 0.5;
  s.presence_penalty = -0.5;
  s.repetition_penalty = 1.25;
  s.seed = 42;
  s.min_tokens = 2;
  s.ignore_eos = true;
  s.stop = {"x", "y"};
  s.logit_bias = {{5, -100.0}, {6, 2.5}};
  s.logprobs = true;
  s.top_logprobs = 3;
  r.n = 2;
  r.user = "me";
  r.stream = true;
  r.include_usage = true;
  r.continuous_usage = true;
  auto body = SerializeRequest(r);
  ASSERT_TRUE(body.ok());
  std::string param;
  auto back = ParseRequest(*body, ApiKind::kChat, &param);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << " " << param;
  const CompletionRequest& b = *back;
  EXPECT_EQ(b.model, "light");
  ASSERT_EQ(b.messages.size(), 3u);
  EXPECT_TRUE(b.messages[2].content_null);
  EXPECT_EQ(b.messages[2].extra, tool_call.extra);
  EXPECT_EQ(b.tools, r.tools);
  EXPECT_EQ(b.sampling.max_tokens, s.max_tokens);
  EXPECT_EQ(b.sampling.temperature, s.temperature);
  EXPECT_EQ(b.sampling.top_p, s.top_p);
  EXPECT_EQ(b.sampling.top_k, s.top_k);
  EXPECT_EQ(b.sampling.min_p, s.min_p);
  EXPECT_EQ(b.sampling.frequency_penalty, s.frequency_penalty);
  EXPECT_EQ(b.sampling.presence_penalty, s.presence_penalty);
  EXPECT_EQ(b.sampling.repetition_penalty, s.repetition_penalty);
  EXPECT_EQ(b.sampling.seed, s.seed);
  EXPECT_EQ(b.sampling.min_tokens, s.min_tokens);
  EXPECT_EQ(b.sampling.ignore_eos, s.ignore_eos);
  EXPECT_EQ(b.sampling.stop, s.stop);
  EXPECT_EQ(b.sampling.logit_bias, s.logit_bias);
  EXPECT_TRUE(b.sampling.logprobs);
  EXPECT_EQ(b.sampling.top_logprobs, 3);
  EXPECT_EQ(b.n, 2);
  EXPECT_EQ(b.user, "me");
  EXPECT_TRUE(b.stream);
  EXPECT_TRUE(b.include_usage);
  EXPECT_TRUE(b.continuous_usage);

  CompletionRequest c;
  c.kind = ApiKind::kCompletions;
  c.prompt_ids = {1, 2, 3};
  c.sampling.logprobs = true;
  c.sampling.top_logprobs = 2;
  c.stream = false;
  auto cb = SerializeRequest(c);
  ASSERT_TRUE(cb.ok());
  auto cback = ParseRequest(*cb, ApiKind::kCompletions);
  ASSERT_TRUE(cback.ok());
  EXPECT_EQ(cback->prompt_ids, c.prompt_ids);
  EXPECT_TRUE(cback->sampling.logprobs);
  EXPECT_EQ(cback->sampling.top_logprobs, 2);
  EXPECT_FALSE(cback->stream);
  EXPECT_FALSE(cback->include_usage);
}

TEST(CodecTest, ModelsListRoundTrip) {
  ModelCard a;
  a.id = "light";
  a.aliases = {"small"};
  ModelCard b;
  b.id = "full";
  b.meta = ModelMeta{32000, 2048, 1024, 64, 2, "llama", "f32"};
  auto ids = ParseModelIds(BuildModelList({a, b}));
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<std::string>{"light", "full"}));
  const std::string one = BuildModel(b);
  EXPECT_NE(one.find("\"max_model_len\":1024"), std::string::npos) << one;
  EXPECT_NE(BuildModel(a).find("\"meta\":null"), std::string::npos);
  EXPECT_FALSE(ParseModelIds("{}").ok());
}

TEST(CodecTest, TokenizeBodiesAndTheirLimits) {
  std::string param;
  auto t =
      ParseTokenizeRequest(R"({"content":"hi","with_pieces":true})", &param);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->text, "hi");
  EXPECT_FALSE(t->add_special);
  EXPECT_TRUE(t->with_pieces);
  auto v = ParseTokenizeRequest(R"({"prompt":"hi"})", &param);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->add_special);
  auto m = ParseTokenizeRequest(
      R"({"messages":[{"role":"user","content":"x"}]})", &param);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->messages.size(), 1u);
  EXPECT_FALSE(ParseTokenizeRequest(R"({"with_pieces":1})", &param).ok());
  EXPECT_EQ(param, "with_pieces");

  std::vector<int32_t> ids(1000, 7);
  std::vector<std::string> pieces(1000, "abc");
  EXPECT_TRUE(BuildTokenizeResponse(ids, &pieces, 512, 1 << 20).ok());
  auto big = BuildTokenizeResponse(ids, &pieces, 512, 4096);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  auto d = ParseDetokenizeRequest(R"({"tokens":[1,2]})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 2u);
  EXPECT_FALSE(ParseDetokenizeRequest(R"({"tokens":[-1]})").ok());
  EXPECT_FALSE(BuildDetokenizeResponse(std::string(1000, 'a'), 100).ok());
}

}  // namespace
}  // namespace redline::api

namespace redline::api {
namespace {

TEST(AccessTest, ApiKeysAndRouteRefusals) {
  const std::vector<std::string> keys = {"k1", "second"};
  EXPECT_TRUE(ApiKeyAccepted("", "", {}));
  EXPECT_TRUE(ApiKeyAccepted("", "Bearer k1", keys));
  EXPECT_TRUE(ApiKeyAccepted("second", "", keys));
  EXPECT_TRUE(ApiKeyAccepted("", "bearer second", keys));
  EXPECT_FALSE(ApiKeyAccepted("", "Bearer k", keys));
  EXPECT_FALSE(ApiKeyAccepted("", "Bearer k11", keys));
  EXPECT_FALSE(ApiKeyAccepted("", "Basic k1", keys));
  EXPECT_FALSE(ApiKeyAccepted("", "", keys));

  EXPECT_EQ(RouteRefusal("GET", "/nope", {}, true)->http_status, 404);
  const RouteRule chat{true, true, true};
  EXPECT_EQ(
      RouteRefusal("GET", "/v1/chat/completions", chat, true)->http_status,
      405);
  EXPECT_EQ(
      RouteRefusal("POST", "/v1/chat/completions", chat, false)->http_status,
      401);
  EXPECT_FALSE(RouteRefusal("POST", "/v1/chat/completions", chat, true));
  EXPECT_FALSE(RouteRefusal("HEAD", "/livez", {true, false, false}, false));
}

}  // namespace
}  // namespace redline::api

#include "api/server_timing.h"

#include <gtest/gtest.h>

#include "api/response.h"

namespace redline::api {
namespace {

TEST(ServerTimingTest, FormatsAndParsesBack) {
  ServerTimings t{1.25, 30.5, 32.0, 400.125, 432.0};
  const std::string v = FormatServerTiming(t);
  EXPECT_EQ(v,
            "queue;dur=1.250, prefill;dur=30.500, decode;dur=400.125, "
            "ttft;dur=32.000, e2e;dur=432.000");
  auto e = ParseServerTiming(AppendServerTiming(v, "gateway", 0.5));
  EXPECT_DOUBLE_EQ(TimingOf(e, "queue"), 1.25);
  EXPECT_DOUBLE_EQ(TimingOf(e, "decode"), 400.125);
  EXPECT_DOUBLE_EQ(TimingOf(e, "gateway"), 0.5);
  EXPECT_EQ(TimingOf(e, "absent"), -1);
}

TEST(ServerTimingTest, ToleratesWhatOtherServersSend) {
  auto e = ParseServerTiming(
      " cache;desc=\"Cache Read\";dur=23.2 ,db;dur=53, app;dur=x, ;dur=4,"
      "miss, total;dur=-3, dup;dur=1;dur=2");
  EXPECT_DOUBLE_EQ(TimingOf(e, "cache"), 23.2);
  EXPECT_DOUBLE_EQ(TimingOf(e, "db"), 53);
  EXPECT_EQ(TimingOf(e, "app"), -1);        // bad number: no dur
  EXPECT_EQ(TimingOf(e, "miss"), -1);       // no dur at all
  EXPECT_EQ(TimingOf(e, "total"), -1);      // negative
  EXPECT_DOUBLE_EQ(TimingOf(e, "dup"), 1);  // first dur wins
  std::string many;
  for (int i = 0; i < 500; ++i) many += "m;dur=1,";
  EXPECT_EQ(ParseServerTiming(many).size(), 64u);
}

// The last choice of a stream: finished, no text.
ChunkChoice StopChoice() {
  ChunkChoice c;
  c.index = 0;
  c.finish_reason = std::string("stop");
  return c;
}

TEST(ServerTimingTest, ChunksAndBodiesCarryTimings) {
  const ResponseIdentity id{"chatcmpl-1", "m", 1};
  ServerTimings t{1, 2, 3, 4, 7};
  const ChunkChoice c = StopChoice();
  StreamChunk chunk;
  ASSERT_TRUE(
      ParseStreamChunk(BuildChunk(ApiKind::kChat, id, {c}, nullptr, &t), &chunk)
          .ok());
  ASSERT_TRUE(chunk.timings.has_value());
  EXPECT_DOUBLE_EQ(chunk.timings->e2e_ms, 7);
  EXPECT_DOUBLE_EQ(chunk.timings->decode_ms, 4);
  // llama.cpp's names.
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[],"timings":{"prompt_ms":5.5,"predicted_ms":9}})",
          &chunk)
          .ok());
  ASSERT_TRUE(chunk.timings.has_value());
  EXPECT_DOUBLE_EQ(chunk.timings->prefill_ms, 5.5);
  EXPECT_DOUBLE_EQ(chunk.timings->decode_ms, 9);
  auto r = ParseResponse(
      BuildResponse(ApiKind::kChat, id, {FinalChoice{}}, Usage{}, &t));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->timings.has_value());
  EXPECT_DOUBLE_EQ(r->timings->queue_ms, 1);
}

TEST(ServerTimingTest, GatewayShareJoinsTheFinalChunksTimings) {
  const ResponseIdentity id{"chatcmpl-1", "m", 1};
  ServerTimings t{1, 2, 3, 4, 7};
  const ChunkChoice c = StopChoice();
  const std::string plain = BuildChunk(ApiKind::kChat, id, {c}, nullptr, &t);
  StreamChunk chunk;
  ASSERT_TRUE(ParseStreamChunk(plain, &chunk).ok());
  EXPECT_EQ(chunk.timings->gateway_ms, -1);  // absent
  const std::optional<std::string> with = AddGatewayTiming(plain, 0.75);
  ASSERT_TRUE(with.has_value());
  ASSERT_TRUE(ParseStreamChunk(*with, &chunk).ok());
  EXPECT_DOUBLE_EQ(chunk.timings->gateway_ms, 0.75);
  EXPECT_DOUBLE_EQ(chunk.timings->e2e_ms, 7);  // the server's are kept
  EXPECT_EQ(chunk.finish_reason, "stop");
  // llama.cpp's timings object takes it too.
  auto llama =
      AddGatewayTiming(R"({"choices":[],"timings":{"prompt_ms":5}})", 2);
  ASSERT_TRUE(llama.has_value());
  ASSERT_TRUE(ParseStreamChunk(*llama, &chunk).ok());
  EXPECT_DOUBLE_EQ(chunk.timings->prefill_ms, 5);
  EXPECT_DOUBLE_EQ(chunk.timings->gateway_ms, 2);
  // Nothing to add to.
  EXPECT_FALSE(AddGatewayTiming(R"({"choices":[]})", 1).has_value());
  EXPECT_FALSE(AddGatewayTiming(R"({"timings":3})", 1).has_value());
  EXPECT_FALSE(AddGatewayTiming("not json", 1).has_value());
  EXPECT_FALSE(AddGatewayTiming("[1]", 1).has_value());
  // A number beyond a double's range would serialise as "Infinity".
  EXPECT_FALSE(
      AddGatewayTiming(R"({"x":1e400,"timings":{"e2e_ms":1}})", 1).has_value());
  // And reads as no timing at all, as does 0e400 (NaN to Boost.JSON).
  ASSERT_TRUE(
      ParseStreamChunk(
          R"({"choices":[],"timings":{"e2e_ms":0e400,"decode_ms":1e400}})",
          &chunk)
          .ok());
  EXPECT_FALSE(chunk.timings.has_value());
  // A round trip through the builder keeps it.
  t.gateway_ms = 0.5;
  ASSERT_TRUE(
      ParseStreamChunk(BuildChunk(ApiKind::kChat, id, {c}, nullptr, &t), &chunk)
          .ok());
  EXPECT_DOUBLE_EQ(chunk.timings->gateway_ms, 0.5);
}

}  // namespace
}  // namespace redline::api

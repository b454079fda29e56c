#include "http/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redline::http {
namespace {

struct Collected {
  std::vector<std::string> data;
  std::vector<std::string> comments;
  std::vector<std::string> types;
};

void FeedAll(SseParser& p, const std::vector<std::string>& pieces,
             Collected& out) {
  for (const auto& piece : pieces) {
    p.Feed(piece, [&](const SseEvent& e) {
      if (e.kind == SseEvent::Kind::kComment) {
        out.comments.emplace_back(e.data);
      } else {
        out.data.emplace_back(e.data);
        out.types.emplace_back(e.event_type);
      }
    });
  }
}

TEST(SseParserTest, SplitsEventsAcrossArbitraryPieces) {
  const std::string stream = "data: {\"a\":1}\n\n: ping\n\ndata: [DONE]\n\n";
  // Every split point must give the same events.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser p;
    Collected c;
    FeedAll(p, {stream.substr(0, cut), stream.substr(cut)}, c);
    ASSERT_EQ(c.data.size(), 2u) << "cut=" << cut;
    EXPECT_EQ(c.data[0], "{\"a\":1}");
    EXPECT_EQ(c.data[1], "[DONE]");
    ASSERT_EQ(c.comments.size(), 1u);
    EXPECT_EQ(c.comments[0], "ping");
  }
}

TEST(SseParserTest, HandlesCrLfAndCrLineEndings) {
  for (std::string stream : {std::string("data: x\r\n\r\ndata: y\r\n\r\n"),
                             std::string("data: x\r\rdata: y\r\r")}) {
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      SseParser p;
      Collected c;
      FeedAll(p, {stream.substr(0, cut), stream.substr(cut)}, c);
      ASSERT_EQ(c.data.size(), 2u) << "cut=" << cut;
      EXPECT_EQ(c.data[0], "x");
      EXPECT_EQ(c.data[1], "y");
    }
  }
}

TEST(SseParserTest, JoinsMultipleDataLinesAndReadsEventType) {
  SseParser p;
  Collected c;
  FeedAll(p, {"event: error\ndata: a\ndata:b\n\n"}, c);
  ASSERT_EQ(c.data.size(), 1u);
  EXPECT_EQ(c.data[0], "a\nb");
  EXPECT_EQ(c.types[0], "error");
}

TEST(SseParserTest, FinishDispatchesUnterminatedEvent) {
  SseParser p;
  Collected c;
  FeedAll(p, {"data: [DONE]\n"}, c);
  EXPECT_TRUE(c.data.empty());
  bool got = p.Finish([&](const SseEvent& e) { c.data.emplace_back(e.data); });
  EXPECT_TRUE(got);
  ASSERT_EQ(c.data.size(), 1u);
  EXPECT_EQ(c.data[0], "[DONE]");
}

TEST(SseParserTest, FormatsEvents) {
  EXPECT_EQ(SseData("{}"), "data: {}\n\n");
  EXPECT_EQ(SseComment("ping"), ": ping\n\n");
}

}  // namespace
}  // namespace redline::http

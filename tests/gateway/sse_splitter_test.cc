// SseSplitter: event boundaries in any line-ending style, however the
// bytes are cut into pieces.
#include "gateway/sse_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redline::gateway {
namespace {

std::vector<std::string> Split(const std::string& stream, size_t piece) {
  SseSplitter s;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    s.Feed(std::string_view(stream).substr(i, piece),
           [&](std::string_view e) { events.emplace_back(e); });
  }
  std::string rest = s.TakeRest();
  if (!rest.empty()) events.push_back("REST:" + rest);
  return events;
}

TEST(SseSplitterTest, EveryLineEndingStyleInEveryPieceSize) {
  struct Case {
    std::string stream;
    std::vector<std::string> events;
  };
  const std::vector<Case> cases = {
      {"data: a\n\ndata: b\n\n", {"data: a\n\n", "data: b\n\n"}},
      {"data: a\r\n\r\ndata: b\r\n\r\n",
       {"data: a\r\n\r\n", "data: b\r\n\r\n"}},
      // A CR that ends the stream may still get its LF: the last event
      // waits for the end of the stream (TakeRest).
      {"data: a\r\rdata: b\r\r", {"data: a\r\r", "REST:data: b\r\r"}},
      {": ping\n\ndata: x\ndata: y\n\n",
       {": ping\n\n", "data: x\ndata: y\n\n"}},
      {"data: a\n\ndata: part", {"data: a\n\n", "REST:data: part"}},
  };
  for (const Case& c : cases) {
    for (size_t piece = 1; piece <= c.stream.size(); ++piece) {
      EXPECT_EQ(Split(c.stream, piece), c.events)
          << "piece " << piece << " of " << c.stream;
    }
  }
}

TEST(SseSplitterTest, TakeCompleteKeepsTheTail) {
  SseSplitter s;
  EXPECT_EQ(s.TakeComplete("data: 1\n\ndata: 2\n\ndata: 3"),
            "data: 1\n\ndata: 2\n\n");
  EXPECT_EQ(s.pending_bytes(), 7u);
  EXPECT_EQ(s.TakeComplete(""), "");
  EXPECT_EQ(s.TakeComplete("\n\n"), "data: 3\n\n");
  EXPECT_EQ(s.pending_bytes(), 0u);
  // A CR at the very end waits: an LF may complete it.
  EXPECT_EQ(s.TakeComplete("data: 4\r\n\r"), "");
  EXPECT_EQ(s.TakeComplete("\n"), "data: 4\r\n\r\n");
}

}  // namespace
}  // namespace redline::gateway

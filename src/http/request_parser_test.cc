// RequestParser without sockets: framing, the HTTP/1.1 checks, the limits,
// and that the outcome does not depend on how the input is split.
#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redline::http {
namespace {

using State = RequestParser::State;

struct Outcome {
  std::vector<ServerRequest> requests;
  int error_status = 0;
  std::string error_detail;
};

// Parses `input` as a sequence of requests, handing it over `piece` bytes at
// a time (0: all at once), the way a connection would.
Outcome ParseAll(std::string_view input, size_t piece = 0,
                 RequestLimits limits = {}) {
  Outcome out;
  RequestParser p(limits);
  std::string buf;
  size_t fed = 0;
  for (;;) {
    const size_t n =
        piece == 0 ? input.size() - fed : std::min(piece, input.size() - fed);
    buf.append(input.substr(fed, n));
    fed += n;
    for (;;) {
      const size_t used = p.Feed(buf);
      buf.erase(0, used);
      if (p.state() == State::kError) {
        out.error_status = p.error_status();
        out.error_detail = p.error_detail();
        return out;
      }
      if (p.state() != State::kDone) {
        if (used == 0) break;
        continue;
      }
      out.requests.push_back(std::move(p.request()));
      p.Reset();
    }
    if (fed == input.size()) return out;
  }
}

TEST(RequestParserTest, GetAndPostWithBody) {
  Outcome o = ParseAll(
      "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(o.error_status, 0) << o.error_detail;
  ASSERT_EQ(o.requests.size(), 2u);
  EXPECT_EQ(o.requests[0].method, "GET");
  EXPECT_EQ(o.requests[0].target, "/a?x=1");
  EXPECT_EQ(o.requests[0].HeaderValue("host"), "h");
  EXPECT_EQ(o.requests[1].body, "hello");
}

TEST(RequestParserTest, StopsAfterTheHeadBeforeTheBody) {
  RequestParser p({});
  const std::string in =
      "POST /b HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
      "Content-Length: 3\r\n\r\nabc";
  const size_t used = p.Feed(in);
  EXPECT_EQ(p.state(), State::kBody);
  EXPECT_EQ(in.substr(used), "abc");
  EXPECT_TRUE(p.expect_continue());
  EXPECT_EQ(p.request().method, "POST");
  EXPECT_TRUE(p.request().body.empty());
  EXPECT_EQ(p.Feed(in.substr(used)), 3u);
  EXPECT_EQ(p.state(), State::kDone);
  EXPECT_EQ(p.request().body, "abc");
}

TEST(RequestParserTest, DeclaredLengthReservesNothing) {
  RequestParser p({});
  p.Feed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 8388608\r\n\r\n");
  ASSERT_EQ(p.state(), State::kBody);
  p.Feed("0123456789");
  EXPECT_LT(p.request().body.capacity(), 4096u);
}

TEST(RequestParserTest, ChunkedBodyTrailersAreNotHeaders) {
  Outcome o = ParseAll(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
  ASSERT_EQ(o.error_status, 0) << o.error_detail;
  ASSERT_EQ(o.requests.size(), 1u);
  EXPECT_EQ(o.requests[0].body, "hello world");
  EXPECT_TRUE(o.requests[0].HeaderValue("X-Trailer").empty());
}

TEST(RequestParserTest, TransferEncodingNotEndingInChunkedIs400) {
  // The "body" must not become a second request.
  Outcome o = ParseAll(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"
      "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(o.error_status, 400);
  EXPECT_TRUE(o.requests.empty());
  EXPECT_EQ(ParseAll("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                     "chunked\r\nTransfer-Encoding: gzip\r\n\r\n")
                .error_status,
            400);
  EXPECT_EQ(ParseAll("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                     "chunked, chunked\r\n\r\n")
                .error_status,
            400);
}

TEST(RequestParserTest, UnknownTransferCodingIs501) {
  Outcome o = ParseAll(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
      "0\r\n\r\n");
  EXPECT_EQ(o.error_status, 501);
  EXPECT_NE(o.error_detail.find("gzip"), std::string::npos);
}

TEST(RequestParserTest, TransferEncodingWithContentLengthIs400) {
  for (const char* in :
       {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
        "Content-Length: 3\r\n\r\nabc",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
        "Transfer-Encoding: chunked\r\n\r\nabc",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
        "Content-Length: 3\r\n\r\nabc"}) {
    Outcome o = ParseAll(in);
    EXPECT_EQ(o.error_status, 400) << in;
    EXPECT_TRUE(o.requests.empty()) << in;
  }
}

TEST(RequestParserTest, HostRules) {
  EXPECT_EQ(ParseAll("GET / HTTP/1.1\r\n\r\n").error_status, 400);
  EXPECT_EQ(
      ParseAll("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").error_status,
      400);
  Outcome http10 = ParseAll("GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(http10.error_status, 0);
  EXPECT_EQ(http10.requests.size(), 1u);
  EXPECT_EQ(ParseAll("GET / HTTP/2.0\r\nHost: a\r\n\r\n").error_status, 400);
}

TEST(RequestParserTest, ObsFoldIs400) {
  EXPECT_EQ(ParseAll("GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n")
                .error_status,
            400);
  EXPECT_EQ(ParseAll("GET / HTTP/1.1\r\nHost: h\r\nX-A:\r\n\ttwo\r\n\r\n")
                .error_status,
            400);
  // In a trailer section too.
  EXPECT_EQ(
      ParseAll("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
               "\r\n0\r\nX-T: a\r\n b\r\n\r\n")
          .error_status,
      400);
}

TEST(RequestParserTest, HeaderBlockOverTheLimitIs431WithTheLimit) {
  RequestLimits limits;
  limits.max_header_bytes = 1024;
  const std::string head = "GET / HTTP/1.1\r\nHost: h\r\n";
  const std::string end = "\r\n";
  // Exactly at the limit passes; one byte more fails.
  std::string filler = "X-Pad: ";
  filler += std::string(1024 - head.size() - end.size() - 7 - 2, 'a');
  filler += "\r\n";
  const std::string at_limit = head + filler + end;
  ASSERT_EQ(at_limit.size(), 1024u);
  EXPECT_EQ(ParseAll(at_limit, 0, limits).error_status, 0);
  std::string over = head + "X-Pad: a" + filler.substr(7) + end;
  ASSERT_EQ(over.size(), 1025u);
  Outcome o = ParseAll(over, 0, limits);
  EXPECT_EQ(o.error_status, 431);
  EXPECT_NE(o.error_detail.find("1024"), std::string::npos) << o.error_detail;
  // Endless header without an empty line.
  EXPECT_EQ(ParseAll(head + std::string(5000, 'a'), 0, limits).error_status,
            431);
}

TEST(RequestParserTest, TrailersCountAgainstTheHeaderLimit) {
  RequestLimits limits;
  limits.max_header_bytes = 2048;
  const std::string head =
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string big_trailer =
      "1\r\na\r\n0\r\nX-T: " + std::string(3000, 'b') + "\r\n\r\n";
  Outcome o = ParseAll(head + big_trailer, 0, limits);
  EXPECT_EQ(o.error_status, 431);
  EXPECT_EQ(ParseAll(head + "1\r\na\r\n0\r\nX-T: small\r\n\r\n", 0, limits)
                .error_status,
            0);
}

TEST(RequestParserTest, BodyOverTheLimitIs413) {
  RequestLimits limits;
  limits.max_body_bytes = 10;
  Outcome declared = ParseAll(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", 0, limits);
  EXPECT_EQ(declared.error_status, 413);
  EXPECT_NE(declared.error_detail.find("10 bytes"), std::string::npos);
  Outcome chunked = ParseAll(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "6\r\nabcdef\r\n6\r\nghijkl\r\n0\r\n\r\n",
      0, limits);
  EXPECT_EQ(chunked.error_status, 413);
}

TEST(RequestParserTest, KeepAliveRules) {
  RequestParser p({});
  p.Feed("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_FALSE(p.keep_alive());
  p.Reset();
  p.Feed("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(p.keep_alive());
  p.Reset();
  p.Feed("GET / HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(p.keep_alive());
}

// Every byte split gives the same requests or the same error.
TEST(RequestParserTest, OutcomeDoesNotDependOnSplits) {
  RequestLimits limits;
  limits.max_header_bytes = 256;
  limits.max_body_bytes = 64;
  const std::vector<std::string> inputs = {
      "GET / HTTP/1.1\r\nHost: h\r\n\r\nPOST /p HTTP/1.1\r\nHost: h\r\n"
      "Content-Length: 4\r\n\r\nbodyGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(300, 'x') + "\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "1;" +
          std::string(2000, 'e') + "\r\na\r\n0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n c\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n",
  };
  for (const std::string& in : inputs) {
    const Outcome whole = ParseAll(in, 0, limits);
    for (size_t piece : {1, 2, 3, 7, 64}) {
      const Outcome split = ParseAll(in, piece, limits);
      EXPECT_EQ(split.error_status, whole.error_status)
          << "piece " << piece << " input " << in.substr(0, 60);
      ASSERT_EQ(split.requests.size(), whole.requests.size());
      for (size_t i = 0; i < whole.requests.size(); ++i) {
        EXPECT_EQ(split.requests[i].target, whole.requests[i].target);
        EXPECT_EQ(split.requests[i].body, whole.requests[i].body);
      }
    }
  }
}

}  // namespace
}  // namespace redline::http

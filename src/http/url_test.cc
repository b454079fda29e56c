#include "http/url.h"

#include <gtest/gtest.h>

namespace redline::http {
namespace {

TEST(UrlTest, ParsesSchemeHostPortAndPath) {
  auto u = ParseUrl("https://api.example.com/v1");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->origin.tls);
  EXPECT_EQ(u->origin.host, "api.example.com");
  EXPECT_EQ(u->origin.port, 443);
  EXPECT_EQ(u->target, "/v1");
  EXPECT_EQ(u->origin.HostHeader(), "api.example.com");

  auto v = ParseUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->origin.tls);
  EXPECT_EQ(v->origin.port, 8080);
  EXPECT_EQ(v->target, "/");
  EXPECT_EQ(v->origin.HostHeader(), "127.0.0.1:8080");

  auto w = ParseUrl("http://[::1]:9000/x?y=1");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->origin.host, "::1");
  EXPECT_EQ(w->target, "/x?y=1");
  EXPECT_EQ(w->origin.HostHeader(), "[::1]:9000");
}

TEST(UrlTest, RejectsOtherSchemesAndGarbage) {
  EXPECT_FALSE(ParseUrl("ftp://x/").ok());
  EXPECT_FALSE(ParseUrl("not a url").ok());
  EXPECT_FALSE(ParseUrl("http://h:99999/").ok());
}

TEST(UrlTest, JoinPathUsesOneSlash) {
  EXPECT_EQ(JoinPath("/v1/", "/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(JoinPath("/", "v1/models"), "/v1/models");
  EXPECT_EQ(JoinPath("", "health"), "/health");
}

}  // namespace
}  // namespace redline::http

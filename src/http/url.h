// URL parsing for the http client: splits "https://host:8443/v1" into the
// origin a connection pool is keyed on and the path prefix requests append to.
//
// Thread-safety: plain values; thread-compatible.
#ifndef REDLINE_HTTP_URL_H_
#define REDLINE_HTTP_URL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace redline::http {

// Where connections go: scheme, host and port. Equal origins share a pool.
struct Origin {
  bool tls = false;   // https
  std::string host;   // DNS name or IP literal, without brackets
  uint16_t port = 0;  // explicit or the scheme's default (80/443)

  // "host:port" as sent in the Host header (port omitted when default).
  std::string HostHeader() const;
  // "http://host:port" (used as the pool key and in messages).
  std::string ToString() const;
  bool operator==(const Origin&) const = default;
};

struct ParsedUrl {
  Origin origin;
  // Path plus query, never empty ("/" when the URL had none). No trailing
  // slash is stripped: callers join with JoinPath().
  std::string target;
};

// Accepts http:// and https:// URLs; anything else is InvalidArgument.
Result<ParsedUrl> ParseUrl(std::string_view url);

// Joins a base path and a relative path with exactly one '/' between them:
// JoinPath("/v1/", "/chat/completions") == "/v1/chat/completions".
std::string JoinPath(std::string_view base, std::string_view path);

}  // namespace redline::http

#endif  // REDLINE_HTTP_URL_H_

#include "api/access.h"

#include <fmt/format.h>

#include <algorithm>

namespace redline::api {
namespace {

bool SecretEquals(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

bool ApiKeyAccepted(std::string_view x_api_key, std::string_view authorization,
                    const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  std::string_view key = x_api_key;
  if (key.empty()) {
    constexpr std::string_view kBearer = "Bearer ";
    if (authorization.size() > kBearer.size() &&
        (authorization.starts_with(kBearer) ||
         authorization.starts_with("bearer ")))
      key = authorization.substr(kBearer.size());
  }
  if (key.empty()) return false;
  bool ok = false;
  for (const std::string& k : keys) ok |= SecretEquals(key, k);
  return ok;
}

std::optional<ApiError> RouteRefusal(std::string_view method,
                                     std::string_view path,
                                     const RouteRule& rule, bool key_accepted) {
  if (!rule.known) {
    return ApiError::NotFound(
        fmt::format("no route for {} {}", method.substr(0, 16),
                    path.substr(0, 256)),
        "", "not_found");
  }
  const bool get = method == "GET" || method == "HEAD";
  const bool post = method == "POST";
  if (rule.is_post ? !post : !get) {
    return ApiError::MethodNotAllowed(fmt::format(
        "{} does not accept {}", path.substr(0, 256), method.substr(0, 16)));
  }
  if (rule.needs_key && !key_accepted) {
    return ApiError::Unauthorized(
        "missing or invalid API key (send Authorization: Bearer KEY)");
  }
  return std::nullopt;
}

}  // namespace redline::api

// What an OpenAI front end (serve, gateway) checks before it reads a
// request's body: the API key (Authorization: Bearer KEY or X-Api-Key,
// compared in constant time) and the route (404 unknown, 405 wrong method,
// 401 missing or wrong key). Transport-free: callers pass header values.
//
// Thread-safety: pure functions. Cost: O(keys x key length).
#ifndef REDLINE_API_ACCESS_H_
#define REDLINE_API_ACCESS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/error.h"

namespace redline::api {

// True when `keys` is empty or the request's key (X-Api-Key, else the
// bearer token of Authorization) equals one of them. Every key is compared
// in full, so the time does not tell which prefix matched.
bool ApiKeyAccepted(std::string_view x_api_key, std::string_view authorization,
                    const std::vector<std::string>& keys);

// What a front end knows of a path: whether it has a route, whether the
// route takes POST (else GET/HEAD) and whether it needs a key.
struct RouteRule {
  bool known = false;
  bool is_post = false;
  bool needs_key = false;
};

// 404, 405 or 401 for a request to `path`, else nullopt.
std::optional<ApiError> RouteRefusal(std::string_view method,
                                     std::string_view path,
                                     const RouteRule& rule, bool key_accepted);

}  // namespace redline::api

#endif  // REDLINE_API_ACCESS_H_

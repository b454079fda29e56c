// Parsed JSON that can be written out again. Boost.JSON reads a number
// beyond a double's range (1e400) as infinity and 0e400-style overflows as
// NaN, and json::serialize writes those as "Infinity" / "NaN", which no
// JSON parser accepts. Whatever keeps client JSON to send on (a request's
// extra fields and messages, forwarded bodies) checks it here first.
// Thread-safe (no state).
#ifndef REDLINE_API_FINITE_JSON_H_
#define REDLINE_API_FINITE_JSON_H_

#include <boost/json.hpp>
#include <optional>
#include <string>

namespace redline::api {

// Where the first non-finite number of `v` is, as a member path
// ("messages[1].max_tokens"; "" for `v` itself), or nullopt when every
// number is finite. Cost: one pass over `v`; values nested deeper than
// kMaxFiniteCheckDepth (past Boost.JSON's default parse depth limit of 32)
// are reported as their container's path.
inline constexpr int kMaxFiniteCheckDepth = 64;
std::optional<std::string> FindNonFiniteNumber(const boost::json::value& v);

}  // namespace redline::api

#endif  // REDLINE_API_FINITE_JSON_H_

// Internal to src/api: typed reads of JSON object members with errors that
// name the member, and the lenient getters the client-side parsers use.
// Not a public header.
#ifndef REDLINE_API_JSON_READER_H_
#define REDLINE_API_JSON_READER_H_

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/error.h"
#include "base/status.h"

namespace redline::api::internal {

// "a string", "an integer", ... for error messages.
std::string_view KindName(boost::json::kind k);

// Reads typed members of one JSON object; the first error names its member
// in *param (prefixed with `prefix`, e.g. "stream_options.").
class Reader {
 public:
  Reader(const boost::json::object& obj, std::string* param,
         std::string prefix = {})
      : obj_(obj), param_(param), prefix_(std::move(prefix)) {}

  // Each leaves *out untouched when the member is absent or null.
  Status Bool(std::string_view key, std::optional<bool>* out);
  Status Bool(std::string_view key, bool* out);
  Status Number(std::string_view key, std::optional<double>* out);
  // Integers in [lo, hi]; a JSON number with an integral value (3.0) is
  // accepted.
  Status Int(std::string_view key, std::optional<int64_t>* out,
             int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
  Status String(std::string_view key, std::string* out);

  // The member, or nullptr when absent or null.
  const boost::json::value* Find(std::string_view key) const;

  Status TypeError(std::string_view key, std::string_view want,
                   const boost::json::value& got);
  Status RangeError(std::string_view key, std::string message);

 private:
  const boost::json::object& obj_;
  std::string* param_;
  std::string prefix_;
};

// An integral JSON number as int64. kOk, or kNotInteger / kTooLarge.
enum class IntRead { kOk, kNotInteger, kTooLarge };
IntRead ToInt(const boost::json::value& v, int64_t* out);

// Lenient getters for client-side parsing (wrong types, and numbers that
// name no int64 for GetInt, read as absent).
std::optional<int64_t> GetInt(const boost::json::object& o,
                              std::string_view key);
// Appends a string member when it is a string; true when it was non-empty.
bool AppendString(const boost::json::object& o, std::string_view key,
                  std::string* out);

// An error object ({"message", "type", "param", "code"}) or a bare string.
ApiError ErrorFromJson(const boost::json::value& v);

}  // namespace redline::api::internal

#endif  // REDLINE_API_JSON_READER_H_

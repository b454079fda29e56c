#include "api/json_reader.h"

#include <fmt/format.h>

#include <cmath>

namespace redline::api::internal {
namespace json = boost::json;

std::string_view KindName(json::kind k) {
  switch (k) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "an integer";
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

IntRead ToInt(const json::value& v, int64_t* out) {
  if (v.is_int64()) {
    *out = v.get_int64();
    return IntRead::kOk;
  }
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<uint64_t>(INT64_MAX))
      return IntRead::kTooLarge;
    *out = static_cast<int64_t>(v.get_uint64());
    return IntRead::kOk;
  }
  if (v.is_double()) {
    const double d = v.get_double();
    if (!std::isfinite(d) || d != std::floor(d)) return IntRead::kNotInteger;
    // Beyond 2^53 a double no longer names one integer.
    if (std::fabs(d) > 9.007199254740992e15) return IntRead::kTooLarge;
    *out = static_cast<int64_t>(d);
    return IntRead::kOk;
  }
  return IntRead::kNotInteger;
}

const json::value* Reader::Find(std::string_view key) const {
  const json::value* v = obj_.if_contains(key);
  if (v != nullptr && v->is_null()) return nullptr;
  return v;
}

Status Reader::TypeError(std::string_view key, std::string_view want,
                         const json::value& got) {
  const std::string name = prefix_ + std::string(key);
  if (param_ != nullptr) *param_ = name;
  return Status::InvalidArgument(
      fmt::format("'{}' must be {}, got {}", name, want, KindName(got.kind())));
}

Status Reader::RangeError(std::string_view key, std::string message) {
  if (param_ != nullptr) *param_ = prefix_ + std::string(key);
  return Status::InvalidArgument(std::move(message));
}

Status Reader::Bool(std::string_view key, std::optional<bool>* out) {
  const json::value* v = Find(key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_bool()) return TypeError(key, "a boolean", *v);
  *out = v->get_bool();
  return Status::Ok();
}

Status Reader::Bool(std::string_view key, bool* out) {
  std::optional<bool> b;
  RL_RETURN_IF_ERROR(Bool(key, &b));
  if (b) *out = *b;
  return Status::Ok();
}

Status Reader::Number(std::string_view key, std::optional<double>* out) {
  const json::value* v = Find(key);
  if (v == nullptr) return Status::Ok();
  if (v->is_double()) {
    // Boost.JSON reads 1e400 as infinity and 0e400 as NaN.
    if (!std::isfinite(v->get_double()))
      return RangeError(
          key, fmt::format("'{}{}' must be a finite number", prefix_, key));
    *out = v->get_double();
  } else if (v->is_int64()) {
    *out = static_cast<double>(v->get_int64());
  } else if (v->is_uint64()) {
    *out = static_cast<double>(v->get_uint64());
  } else {
    return TypeError(key, "a number", *v);
  }
  return Status::Ok();
}

Status Reader::Int(std::string_view key, std::optional<int64_t>* out,
                   int64_t lo, int64_t hi) {
  const json::value* v = Find(key);
  if (v == nullptr) return Status::Ok();
  int64_t value = 0;
  const std::string name = prefix_ + std::string(key);
  switch (ToInt(*v, &value)) {
    case IntRead::kOk:
      break;
    case IntRead::kNotInteger:
      return TypeError(key, "an integer", *v);
    case IntRead::kTooLarge:
      return RangeError(
          key, hi == INT64_MAX && lo == INT64_MIN
                   ? fmt::format("{} is too large (at most 2^63 - 1)", name)
                   : fmt::format("{} must be in [{}, {}]", name, lo, hi));
  }
  if (value < lo || value > hi) {
    if (hi == INT64_MAX)
      return RangeError(
          key, fmt::format("{} must be >= {}, got {}", name, lo, value));
    return RangeError(key, fmt::format("{} must be in [{}, {}], got {}", name,
                                       lo, hi, value));
  }
  *out = value;
  return Status::Ok();
}

Status Reader::String(std::string_view key, std::string* out) {
  const json::value* v = Find(key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return TypeError(key, "a string", *v);
  *out = std::string(v->get_string());
  return Status::Ok();
}

std::optional<int64_t> GetInt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  // Only what names one integer: a cast of 1e300 or of a uint64 above
  // INT64_MAX would be undefined or wrap.
  int64_t x = 0;
  if (ToInt(*v, &x) != IntRead::kOk) return std::nullopt;
  return x;
}

bool AppendString(const json::object& o, std::string_view key,
                  std::string* out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return false;
  const json::string& s = v->get_string();
  out->append(s.data(), s.size());
  return !s.empty();
}

ApiError ErrorFromJson(const json::value& v) {
  ApiError e;
  e.http_status = 0;
  if (v.is_string()) {
    e.message = std::string(v.get_string());
    return e;
  }
  if (!v.is_object()) return e;
  const json::object& o = v.get_object();
  AppendString(o, "message", &e.message);
  AppendString(o, "type", &e.type);
  AppendString(o, "param", &e.param);
  if (const json::value* c = o.if_contains("code")) {
    if (c->is_string()) {
      e.code = std::string(c->get_string());
    } else if (c->is_int64()) {
      e.code = std::to_string(c->get_int64());
    }
  }
  return e;
}

}  // namespace redline::api::internal

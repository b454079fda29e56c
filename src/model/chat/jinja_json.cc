#include "model/chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_interpreter.h"
#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {
namespace {

Result<Value> FromJson(const boost::json::value& j, int depth_left);

Result<Value> FromJsonArray(const boost::json::array& a, int depth_left) {
  if (depth_left <= 0)
    return Status::InvalidArgument("JSON input nests too deeply");
  std::vector<Value> items;
  items.reserve(a.size());
  for (const auto& e : a) {
    RL_ASSIGN_OR_RETURN(Value v, FromJson(e, depth_left - 1));
    items.push_back(std::move(v));
  }
  return Value::MakeList(std::move(items));
}

Result<Value> FromJson(const boost::json::value& j, int depth_left) {
  switch (j.kind()) {
    case boost::json::kind::null:
      return Value::None();
    case boost::json::kind::bool_:
      return Value::Bool(j.get_bool());
    case boost::json::kind::int64:
      return Value::Int(j.get_int64());
    case boost::json::kind::uint64: {
      const uint64_t u = j.get_uint64();
      if (u <= static_cast<uint64_t>(INT64_MAX))
        return Value::Int(static_cast<int64_t>(u));
      return Value::Float(static_cast<double>(u));
    }
    case boost::json::kind::double_:
      return Value::Float(j.get_double());
    case boost::json::kind::string:
      return Value::Str(std::string(j.get_string()));
    case boost::json::kind::array:
      return FromJsonArray(j.get_array(), depth_left);
    case boost::json::kind::object: {
      if (depth_left <= 0)
        return Status::InvalidArgument("JSON input nests too deeply");
      Dict d;
      for (const auto& kv : j.get_object()) {
        RL_ASSIGN_OR_RETURN(Value v, FromJson(kv.value(), depth_left - 1));
        d.SetStr(std::string(kv.key()), std::move(v));
      }
      return Value::MakeDict(std::move(d));
    }
  }
  return Status::Internal("unknown JSON kind");
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  char buf[16];
  if (!ensure_ascii) {
    for (char c : s) {
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            std::snprintf(buf, sizeof(buf), "\\u%04x",
                          static_cast<unsigned>(c));
            out->append(buf);
          } else {
            out->push_back(c);
          }
      }
    }
  } else {
    for (char32_t cp : CodePoints(s)) {
      switch (cp) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        default:
          if (cp >= 0x20 && cp <= 0x7E) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x10000) {
            std::snprintf(buf, sizeof(buf), "\\u%04x",
                          static_cast<unsigned>(cp));
            out->append(buf);
          } else {
            const char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                          static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            out->append(buf);
          }
      }
    }
  }
  out->push_back('"');
}

// Bytes AppendJsonString appends, so that they are checked before.
size_t JsonStringSize(std::string_view s, bool ensure_ascii) {
  size_t n = 2;
  auto escape = [](char32_t c) {
    return c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' ||
           c == '\b' || c == '\f';
  };
  if (!ensure_ascii) {
    for (char c : s) {
      const unsigned char u = static_cast<unsigned char>(c);
      n += escape(u) ? 2 : (u < 0x20 ? 6 : 1);
    }
    return n;
  }
  for (char32_t cp : CodePoints(s)) {
    if (escape(cp)) {
      n += 2;
    } else if (cp >= 0x20 && cp <= 0x7E) {
      n += 1;
    } else {
      n += cp < 0x10000 ? 6 : 12;
    }
  }
  return n;
}

std::string JsonFloat(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return FloatRepr(f);
}

class Dumper {
 public:
  Dumper(Renderer* r, const JsonDumpOptions& o) : r_(r), o_(o) {}

  Status Dump(const Value& v, int level, std::string* out) {
    switch (v.kind()) {
      case Value::Kind::kNone:
        return Append("null", out);
      case Value::Kind::kBool:
        return Append(v.bool_value() ? "true" : "false", out);
      case Value::Kind::kInt:
        return Append(std::to_string(v.int_value()), out);
      case Value::Kind::kFloat:
        return Append(JsonFloat(v.float_value()), out);
      case Value::Kind::kString:
        RL_RETURN_IF_ERROR(String(v.str(), o_.ensure_ascii, out));
        return Status::Ok();
      case Value::Kind::kList: {
        if (v.is_generator()) break;
        const auto& items = v.items();
        if (items.empty()) return Append("[]", out);
        RL_RETURN_IF_ERROR(Append("[", out));
        RL_RETURN_IF_ERROR(NewLine(level + 1, out));
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) {
            RL_RETURN_IF_ERROR(Append(o_.item_separator, out));
            RL_RETURN_IF_ERROR(NewLine(level + 1, out));
          }
          RL_RETURN_IF_ERROR(Dump(items[i], level + 1, out));
        }
        RL_RETURN_IF_ERROR(NewLine(level, out));
        return Append("]", out);
      }
      case Value::Kind::kDict: {
        const Dict& d = v.dict();
        if (d.empty()) return Append("{}", out);
        if (r_ != nullptr) {
          RL_RETURN_IF_ERROR(r_->Reserve(d.size() * sizeof(size_t)));
        }
        std::vector<size_t> order(d.size());
        std::iota(order.begin(), order.end(), 0);
        if (o_.sort_keys) {
          Meter* meter = nullptr;
          if (r_ != nullptr) {
            const int64_t n = static_cast<int64_t>(d.size());
            RL_RETURN_IF_ERROR(r_->Charge(
                n * (64 - __builtin_clzll(static_cast<uint64_t>(n) | 1))));
            meter = r_->meter();
          }
          Status error;
          std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            if (!error.ok()) return false;
            auto c = ThreeWay(d.items()[a].first, d.items()[b].first, meter);
            if (!c.ok()) {
              error = c.status();
              return false;
            }
            return *c < 0;
          });
          RL_RETURN_IF_ERROR(error);
        }
        RL_RETURN_IF_ERROR(Append("{", out));
        RL_RETURN_IF_ERROR(NewLine(level + 1, out));
        bool first = true;
        for (size_t i : order) {
          const auto& [k, val] = d.items()[i];
          if (!first) {
            RL_RETURN_IF_ERROR(Append(o_.item_separator, out));
            RL_RETURN_IF_ERROR(NewLine(level + 1, out));
          }
          first = false;
          switch (k.kind()) {
            case Value::Kind::kString:
              RL_RETURN_IF_ERROR(String(k.str(), o_.ensure_ascii, out));
              break;
            case Value::Kind::kFloat:
              RL_RETURN_IF_ERROR(
                  String(JsonFloat(k.float_value()), false, out));
              break;
            case Value::Kind::kBool:
              RL_RETURN_IF_ERROR(
                  Append(k.bool_value() ? "\"true\"" : "\"false\"", out));
              break;
            case Value::Kind::kInt:
              RL_RETURN_IF_ERROR(
                  Append("\"" + std::to_string(k.int_value()) + "\"", out));
              break;
            case Value::Kind::kNone:
              RL_RETURN_IF_ERROR(Append("\"null\"", out));
              break;
            default:
              return TypeError(
                  "keys must be str, int, float, bool or None, not " +
                  TypeName(k));
          }
          RL_RETURN_IF_ERROR(Append(o_.key_separator, out));
          RL_RETURN_IF_ERROR(Dump(val, level + 1, out));
        }
        RL_RETURN_IF_ERROR(NewLine(level, out));
        return Append("}", out);
      }
      default:
        break;
    }
    return TypeError("Object of type " + TypeName(v) +
                     " is not JSON serializable");
  }

 private:
  // Checks that `n` more bytes fit the output limit and the memory budget
  // and charges them, before they are appended.
  Status Room(size_t n, const std::string& out) {
    if (r_ == nullptr) return Status::Ok();
    RL_RETURN_IF_ERROR(r_->Charge(static_cast<int64_t>(n) + 1));
    if (n > r_->options().limits.max_output_bytes) return r_->TooLongError();
    RL_RETURN_IF_ERROR(r_->CheckStringSize(out.size() + n));
    return r_->Reserve(out.size() + n);
  }
  Status Append(std::string_view s, std::string* out) {
    RL_RETURN_IF_ERROR(Room(s.size(), *out));
    out->append(s);
    return Status::Ok();
  }
  Status String(std::string_view s, bool ensure_ascii, std::string* out) {
    if (r_ != nullptr) {
      RL_RETURN_IF_ERROR(r_->Charge(static_cast<int64_t>(s.size())));
      RL_RETURN_IF_ERROR(Room(JsonStringSize(s, ensure_ascii), *out));
    }
    AppendJsonString(s, ensure_ascii, out);
    return Status::Ok();
  }
  Status NewLine(int level, std::string* out) {
    if (!o_.indent) return Status::Ok();
    const unsigned __int128 n =
        1 + static_cast<unsigned __int128>(level) * o_.indent->size();
    if (r_ != nullptr && n > r_->options().limits.max_output_bytes)
      return r_->TooLongError();
    RL_RETURN_IF_ERROR(Room(static_cast<size_t>(n), *out));
    out->push_back('\n');
    for (int i = 0; i < level; ++i) out->append(*o_.indent);
    return Status::Ok();
  }

  Renderer* r_;
  const JsonDumpOptions& o_;
};

}  // namespace

Result<Value> ValueFromJson(const boost::json::value& json, int max_depth) {
  return FromJson(json, max_depth);
}

Result<Value> ValueFromJson(const boost::json::array& json, int max_depth) {
  return FromJsonArray(json, max_depth);
}

Result<std::string> JsonDump(Renderer* r, const Value& v,
                             const JsonDumpOptions& options) {
  std::string out;
  Dumper dumper(r, options);
  RL_RETURN_IF_ERROR(dumper.Dump(v, 0, &out));
  return out;
}

}  // namespace redline::model::chat::jinja

#include "model/chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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
    for (char32_t cp : DecodeUtf8(s)) {
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

std::string JsonFloat(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return FloatRepr(f);
}

class Dumper {
 public:
  Dumper(Renderer* r, const JsonDumpOptions& o) : r_(r), o_(o) {}

  Status Dump(const Value& v, int level, std::string* out) {
    if (r_ != nullptr) {
      RL_RETURN_IF_ERROR(r_->Charge(1));
      RL_RETURN_IF_ERROR(r_->CheckStringSize(out->size()));
    }
    switch (v.kind()) {
      case Value::Kind::kNone:
        out->append("null");
        return Status::Ok();
      case Value::Kind::kBool:
        out->append(v.bool_value() ? "true" : "false");
        return Status::Ok();
      case Value::Kind::kInt:
        out->append(std::to_string(v.int_value()));
        return Status::Ok();
      case Value::Kind::kFloat:
        out->append(JsonFloat(v.float_value()));
        return Status::Ok();
      case Value::Kind::kString:
        AppendJsonString(v.str(), o_.ensure_ascii, out);
        return Status::Ok();
      case Value::Kind::kList: {
        if (v.is_generator()) break;
        const auto& items = v.items();
        if (items.empty()) {
          out->append("[]");
          return Status::Ok();
        }
        out->push_back('[');
        NewLine(level + 1, out);
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) {
            out->append(o_.item_separator);
            NewLine(level + 1, out);
          }
          RL_RETURN_IF_ERROR(Dump(items[i], level + 1, out));
        }
        NewLine(level, out);
        out->push_back(']');
        return Status::Ok();
      }
      case Value::Kind::kDict: {
        const Dict& d = v.dict();
        if (d.empty()) {
          out->append("{}");
          return Status::Ok();
        }
        std::vector<size_t> order(d.size());
        std::iota(order.begin(), order.end(), 0);
        if (o_.sort_keys) {
          Status error;
          std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            auto c = ThreeWay(d.items()[a].first, d.items()[b].first);
            if (!c.ok()) {
              if (error.ok()) error = c.status();
              return false;
            }
            return *c < 0;
          });
          RL_RETURN_IF_ERROR(error);
        }
        out->push_back('{');
        NewLine(level + 1, out);
        bool first = true;
        for (size_t i : order) {
          const auto& [k, val] = d.items()[i];
          if (!first) {
            out->append(o_.item_separator);
            NewLine(level + 1, out);
          }
          first = false;
          switch (k.kind()) {
            case Value::Kind::kString:
              AppendJsonString(k.str(), o_.ensure_ascii, out);
              break;
            case Value::Kind::kFloat:
              AppendJsonString(JsonFloat(k.float_value()), false, out);
              break;
            case Value::Kind::kBool:
              out->append(k.bool_value() ? "\"true\"" : "\"false\"");
              break;
            case Value::Kind::kInt:
              out->append("\"" + std::to_string(k.int_value()) + "\"");
              break;
            case Value::Kind::kNone:
              out->append("\"null\"");
              break;
            default:
              return TypeError(
                  "keys must be str, int, float, bool or None, not " +
                  TypeName(k));
          }
          out->append(o_.key_separator);
          RL_RETURN_IF_ERROR(Dump(val, level + 1, out));
        }
        NewLine(level, out);
        out->push_back('}');
        return Status::Ok();
      }
      default:
        break;
    }
    return TypeError("Object of type " + TypeName(v) +
                     " is not JSON serializable");
  }

 private:
  void NewLine(int level, std::string* out) const {
    if (!o_.indent) return;
    out->push_back('\n');
    for (int i = 0; i < level; ++i) out->append(*o_.indent);
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

// Python operators on interpreter values: arithmetic, comparison, `in`,
// slicing and %-formatting.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_interpreter.h"
#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {
namespace {

const char* OpSymbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "** or pow()";
  }
  return "?";
}

Status Unsupported(BinOp op, const Value& a, const Value& b) {
  return TypeError(std::string("unsupported operand type(s) for ") +
                   OpSymbol(op) + ": '" + TypeName(a) + "' and '" +
                   TypeName(b) + "'");
}

Status Overflow() {
  return Status::InvalidArgument(
      "OverflowError: integer result out of 64-bit range");
}

Status ZeroDivision(std::string_view what) {
  return Status::InvalidArgument("ZeroDivisionError: " + std::string(what));
}

Result<Value> IntArith(BinOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case BinOp::kAdd:
      if (__builtin_add_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    case BinOp::kSub:
      if (__builtin_sub_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    case BinOp::kMul:
      if (__builtin_mul_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    case BinOp::kDiv:
      if (y == 0) return ZeroDivision("division by zero");
      return Value::Float(static_cast<double>(x) / static_cast<double>(y));
    case BinOp::kFloorDiv: {
      if (y == 0) return ZeroDivision("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        return Overflow();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::Int(q);
    }
    case BinOp::kMod: {
      if (y == 0) return ZeroDivision("integer modulo by zero");
      if (y == -1) return Value::Int(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Int(m);
    }
    case BinOp::kPow: {
      if (y < 0) {
        if (x == 0)
          return ZeroDivision("0.0 cannot be raised to a negative power");
        return Value::Float(
            std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      int64_t result = 1;
      int64_t base = x;
      int64_t e = y;
      while (e > 0) {
        if (e & 1) {
          if (__builtin_mul_overflow(result, base, &result)) return Overflow();
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base))
          return Overflow();
      }
      return Value::Int(result);
    }
  }
  return Status::Internal("bad operator");
}

Result<Value> FloatArith(BinOp op, double x, double y) {
  switch (op) {
    case BinOp::kAdd:
      return Value::Float(x + y);
    case BinOp::kSub:
      return Value::Float(x - y);
    case BinOp::kMul:
      return Value::Float(x * y);
    case BinOp::kDiv:
      if (y == 0) return ZeroDivision("float division by zero");
      return Value::Float(x / y);
    case BinOp::kFloorDiv:
    case BinOp::kMod: {
      if (y == 0) {
        return ZeroDivision(op == BinOp::kMod ? "float modulo"
                                              : "float floor division by zero");
      }
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::Float(op == BinOp::kMod ? mod : floordiv);
    }
    case BinOp::kPow:
      if (x == 0 && y < 0)
        return ZeroDivision("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) {
        return ValueError(
            "negative number cannot be raised to a fractional power");
      }
      return Value::Float(std::pow(x, y));
  }
  return Status::Internal("bad operator");
}

Result<Value> Repeat(Renderer& r, const Value& seq, int64_t times) {
  if (times <= 0) {
    if (seq.is_string())
      return seq.is_markup() ? Value::Markup("") : Value::Str("");
    return seq.is_tuple() ? Value::MakeTuple({}) : Value::MakeList({});
  }
  if (seq.is_string()) {
    const size_t n = seq.str().size();
    if (n != 0 && static_cast<uint64_t>(times) > (size_t{1} << 40) / n) {
      return r.TooLongError();
    }
    RL_RETURN_IF_ERROR(r.ReserveString(n * times));
    // Doubling copies far fewer, larger blocks than appending `times` times.
    const size_t total = n * static_cast<size_t>(times);
    std::string out;
    out.reserve(total);
    out = seq.str();
    while (out.size() < total) {
      out.append(out, 0, std::min(out.size(), total - out.size()));
    }
    return seq.is_markup() ? Value::Markup(std::move(out))
                           : Value::Str(std::move(out));
  }
  const auto& items = seq.items();
  const uint64_t total =
      static_cast<uint64_t>(items.size()) * static_cast<uint64_t>(times);
  if (!items.empty() &&
      static_cast<uint64_t>(times) > (uint64_t{1} << 40) / items.size()) {
    return r.OutOfMemoryError();
  }
  RL_RETURN_IF_ERROR(r.ReserveList(total));
  std::vector<Value> out;
  out.reserve(total);
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::MakeTuple(std::move(out))
                        : Value::MakeList(std::move(out));
}

}  // namespace

Result<Value> ApplyBinary(Renderer& r, BinOp op, const Value& a,
                          const Value& b) {
  if (a.is_undefined()) return FailUndefined(a);
  if (b.is_undefined()) return FailUndefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float())
      return FloatArith(op, a.AsDouble(), b.AsDouble());
    return IntArith(op, a.int_value(), b.int_value());
  }
  switch (op) {
    case BinOp::kAdd:
      if (a.is_string() && b.is_string()) {
        if (a.is_markup() || b.is_markup()) {
          RL_RETURN_IF_ERROR(
              r.Charge(static_cast<int64_t>(a.str().size() + b.str().size())));
          RL_RETURN_IF_ERROR(r.ReserveString(
              (a.is_markup() ? a.str().size() : HtmlEscapedSize(a.str())) +
              (b.is_markup() ? b.str().size() : HtmlEscapedSize(b.str()))));
          // markupsafe: the plain side is escaped, the result is Markup.
          std::string out = a.is_markup() ? a.str() : HtmlEscape(a.str());
          out += b.is_markup() ? b.str() : HtmlEscape(b.str());
          return Value::Markup(std::move(out));
        }
        RL_RETURN_IF_ERROR(r.ReserveString(a.str().size() + b.str().size()));
        std::string out;
        out.reserve(a.str().size() + b.str().size());
        out += a.str();
        out += b.str();
        return Value::Str(std::move(out));
      }
      if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
        RL_RETURN_IF_ERROR(r.ReserveList(a.items().size() + b.items().size()));
        std::vector<Value> out;
        out.reserve(a.items().size() + b.items().size());
        out.insert(out.end(), a.items().begin(), a.items().end());
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.is_tuple() ? Value::MakeTuple(std::move(out))
                            : Value::MakeList(std::move(out));
      }
      if ((a.is_string() && !a.is_markup()) || a.is_sequence()) {
        return TypeError("can only concatenate " + TypeName(a) + " (not \"" +
                         TypeName(b) + "\") to " + TypeName(a));
      }
      return Unsupported(op, a, b);
    case BinOp::kMul:
      if ((a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool())) {
        return Repeat(r, a, b.int_value());
      }
      if ((b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool())) {
        return Repeat(r, b, a.int_value());
      }
      if (a.is_string() || a.is_sequence() || b.is_string() ||
          b.is_sequence()) {
        return TypeError("can't multiply sequence by non-int of type '" +
                         TypeName(a.is_string() || a.is_sequence() ? b : a) +
                         "'");
      }
      return Unsupported(op, a, b);
    case BinOp::kMod:
      if (a.is_string()) return PercentFormat(r, a, b);
      return Unsupported(op, a, b);
    default:
      return Unsupported(op, a, b);
  }
}

Result<Value> ApplyUnary(const Value& v, bool negate) {
  if (v.is_undefined()) return FailUndefined(v);
  if (v.is_float())
    return Value::Float(negate ? -v.float_value() : v.float_value());
  if (v.is_int() || v.is_bool()) {
    const int64_t i = v.int_value();
    if (!negate) return Value::Int(i);
    if (i == std::numeric_limits<int64_t>::min()) return Overflow();
    return Value::Int(-i);
  }
  return TypeError(std::string("bad operand type for unary ") +
                   (negate ? "-" : "+") + ": '" + TypeName(v) + "'");
}

Result<int> ThreeWay(const Value& a, const Value& b, Meter* meter) {
  if (meter != nullptr && !meter->Spend(1)) return meter->status();
  if (a.is_undefined()) return FailUndefined(a);
  if (b.is_undefined()) return FailUndefined(b);
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = a.int_value();
      const int64_t y = b.int_value();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const double x = a.AsDouble();
    const double y = b.AsDouble();
    return x < y ? -1
                 : (x > y ? 1
                          : 0);  // NaN compares equal-ish, as sorting tolerates
  }
  if (a.is_string() && b.is_string()) {
    if (a.identity() == b.identity()) return 0;
    if (meter != nullptr && !meter->Spend(static_cast<int64_t>(
                                std::min(a.str().size(), b.str().size())))) {
      return meter->status();
    }
    const int c =
        a.str().compare(b.str());  // UTF-8 byte order == code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const bool equal = Equals(x[i], y[i], meter);
      if (meter != nullptr && meter->exhausted()) return meter->status();
      if (equal) continue;
      return ThreeWay(x[i], y[i], meter);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return TypeError("'<' not supported between instances of '" + TypeName(a) +
                   "' and '" + TypeName(b) + "'");
}

Result<bool> Contains(const Value& container, const Value& item, Meter* meter) {
  auto spend = [meter](size_t units) {
    return meter == nullptr || meter->Spend(static_cast<int64_t>(units));
  };
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " +
                         TypeName(item));
      }
      if (!spend(container.str().size() + item.str().size()))
        return meter->status();
      return FindSub(container.str(), item.str(), 0) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.items()) {
        const bool equal = Equals(v, item, meter);
        if (meter != nullptr && meter->exhausted()) return meter->status();
        if (equal) return true;
      }
      return false;
    case Value::Kind::kDict: {
      if (meter != nullptr && !meter->Spend(Dict::LookupUnits(item)))
        return meter->status();
      if (!Dict::IsHashable(item)) {
        if (item.is_undefined()) return false;
        return TypeError("unhashable type: '" + TypeName(item) + "'");
      }
      return container.dict().Find(item) != nullptr;
    }
    default:
      return TypeError("argument of type '" + TypeName(container) +
                       "' is not iterable");
  }
}

Result<bool> ApplyCompare(CmpOp op, const Value& a, const Value& b,
                          Meter* meter) {
  switch (op) {
    case CmpOp::kEq:
    case CmpOp::kNe: {
      const bool equal = Equals(a, b, meter);
      if (meter != nullptr && meter->exhausted()) return meter->status();
      return equal == (op == CmpOp::kEq);
    }
    case CmpOp::kIn:
      return Contains(b, a, meter);
    case CmpOp::kNotIn: {
      RL_ASSIGN_OR_RETURN(bool in, Contains(b, a, meter));
      return !in;
    }
    default:
      break;
  }
  auto c = ThreeWay(a, b, meter);
  if (!c.ok()) {
    if (meter != nullptr && meter->exhausted()) return meter->status();
    if (a.is_undefined() || b.is_undefined()) return c.status();
    static constexpr const char* kSym[] = {"==", "!=", "<", "<=", ">", ">="};
    return TypeError(std::string("'") + kSym[static_cast<int>(op)] +
                     "' not supported between instances of '" + TypeName(a) +
                     "' and '" + TypeName(b) + "'");
  }
  // NaN: every ordering comparison is false.
  if ((a.is_float() && std::isnan(a.float_value())) ||
      (b.is_float() && std::isnan(b.float_value()))) {
    return false;
  }
  switch (op) {
    case CmpOp::kLt:
      return *c < 0;
    case CmpOp::kLe:
      return *c <= 0;
    case CmpOp::kGt:
      return *c > 0;
    case CmpOp::kGe:
      return *c >= 0;
    default:
      return false;
  }
}

std::optional<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CountCodePoints(v.str()));
    case Value::Kind::kList:
      if (v.is_generator()) return std::nullopt;
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      return std::nullopt;
  }
}

Value StringIndex(const Value& s, int64_t index) {
  const std::string& str = s.str();
  const bool ascii = IsAscii(str);
  const int64_t n =
      static_cast<int64_t>(ascii ? str.size() : CountCodePoints(str));
  if (index < 0) index += n;
  if (index < 0 || index >= n)
    return Value::Undefined("str object has no element " +
                            std::to_string(index));
  if (ascii) return Value::Str(std::string(1, str[index]));
  const size_t at = CodePointOffset(str, static_cast<size_t>(index));
  size_t next = at;
  NextCodePoint(str, &next);
  return Value::Str(str.substr(at, next - at));
}

Result<Value> SliceValue(Renderer& r, const Value& obj,
                         const std::optional<int64_t>& start_arg,
                         const std::optional<int64_t>& stop_arg,
                         const std::optional<int64_t>& step_arg) {
  const int64_t step = step_arg.value_or(1);
  if (step == 0) return ValueError("slice step cannot be zero");
  if (!obj.is_string() && !obj.is_sequence()) {
    return Value::Undefined(ObjectTypeRepr(obj) + " has no element slice");
  }
  bool ascii = false;
  int64_t len;
  if (obj.is_list()) {
    len = static_cast<int64_t>(obj.items().size());
  } else {
    // IsAscii and CountCodePoints read the whole string.
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(obj.str().size())));
    ascii = IsAscii(obj.str());
    len = static_cast<int64_t>(ascii ? obj.str().size()
                                     : CountCodePoints(obj.str()));
  }
  auto adjust = [&](const std::optional<int64_t>& v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t start = adjust(start_arg, step < 0 ? len - 1 : 0);
  const int64_t stop = adjust(stop_arg, step < 0 ? -1 : len);
  // Number of selected indices, as Python's slice.indices() gives them.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start
                                 : static_cast<__int128>(start) - stop;
  const __int128 abs_step =
      step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  const size_t count =
      span <= 0 ? 0 : static_cast<size_t>((span + abs_step - 1) / abs_step);
  auto index = [&](size_t k) {
    return static_cast<int64_t>(start + static_cast<__int128>(k) * step);
  };
  if (obj.is_list()) {
    RL_RETURN_IF_ERROR(r.ReserveList(count));
    std::vector<Value> out;
    out.reserve(count);
    for (size_t k = 0; k < count; ++k) out.push_back(obj.items()[index(k)]);
    return obj.is_tuple() ? Value::MakeTuple(std::move(out))
                          : Value::MakeList(std::move(out));
  }
  const std::string& str = obj.str();
  std::string out;
  if (ascii) {
    RL_RETURN_IF_ERROR(r.ReserveString(count));
    if (step == 1) {
      out = str.substr(start, count);
    } else {
      out.reserve(count);
      for (size_t k = 0; k < count; ++k) out.push_back(str[index(k)]);
    }
  } else if (step == 1) {
    const size_t from = count == 0 ? 0 : CodePointOffset(str, start);
    const size_t to =
        count == 0
            ? 0
            : from + CodePointOffset(std::string_view(str).substr(from), count);
    RL_RETURN_IF_ERROR(r.ReserveString(to - from));
    out = str.substr(from, to - from);
  } else {
    RL_RETURN_IF_ERROR(r.Reserve(static_cast<size_t>(len) * 4));
    const std::u32string cps = DecodeUtf8(str);
    auto utf8_bytes = [](char32_t cp) -> size_t {
      if (cp < 0x80 || (cp >= 0xDC80 && cp <= 0xDCFF)) return 1;
      return cp < 0x800 ? 2 : (cp < 0x10000 ? 3 : 4);
    };
    size_t bytes = 0;
    for (size_t k = 0; k < count; ++k) bytes += utf8_bytes(cps[index(k)]);
    RL_RETURN_IF_ERROR(r.ReserveString(bytes));
    out.reserve(bytes);
    for (size_t k = 0; k < count; ++k) AppendUtf8(cps[index(k)], &out);
  }
  return obj.is_markup() ? Value::Markup(std::move(out))
                         : Value::Str(std::move(out));
}

// ---------------------------------------------------------------------------
// printf-style formatting

namespace {

struct FormatSpec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  int64_t width = -1;
  int64_t precision = -1;
  char conv = 's';
};

Result<std::string> PadField(Renderer& r, std::string body,
                             const FormatSpec& spec, bool numeric) {
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(body.size())));
  const int64_t len = static_cast<int64_t>(CountCodePoints(body));
  if (spec.width <= len) return body;
  const size_t pad = static_cast<size_t>(spec.width - len);
  RL_RETURN_IF_ERROR(r.ReserveString(body.size() + pad));
  if (spec.left) return body + std::string(pad, ' ');
  if (spec.zero && numeric) {
    size_t sign =
        (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
            ? 1
            : 0;
    return body.substr(0, sign) + std::string(pad, '0') + body.substr(sign);
  }
  return std::string(pad, ' ') + body;
}

Result<std::string> FormatOne(Renderer& r, const FormatSpec& spec,
                              const Value& v) {
  std::string flags;
  if (spec.left) flags += '-';
  if (spec.plus) flags += '+';
  if (spec.space) flags += ' ';
  if (spec.alt) flags += '#';
  // Digits a precision adds (the width pads later, in PadField).
  const size_t precision_bytes =
      spec.precision > 0 ? static_cast<size_t>(spec.precision) : 0;
  switch (spec.conv) {
    case 's':
    case 'r':
    case 'a': {
      std::string s;
      if (spec.conv == 's') {
        RL_ASSIGN_OR_RETURN(s, r.Str(v));
      } else {
        RL_ASSIGN_OR_RETURN(s, r.ReprOf(v));
      }
      if (spec.precision >= 0) {
        s.resize(CodePointOffset(s, static_cast<size_t>(spec.precision)));
      }
      return PadField(r, std::move(s), spec, false);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      int64_t i;
      if (v.is_int() || v.is_bool()) {
        i = v.int_value();
      } else if (v.is_float() && std::isfinite(v.float_value()) &&
                 std::fabs(v.float_value()) < 9.2e18) {
        i = static_cast<int64_t>(v.float_value());
      } else if (v.is_float()) {
        return Status::InvalidArgument(
            "OverflowError: cannot convert float to integer");
      } else {
        return TypeError(std::string("%") + spec.conv +
                         " format: a real number is required, not " +
                         TypeName(v));
      }
      RL_RETURN_IF_ERROR(r.ReserveString(precision_bytes + 32));
      const char conv = spec.conv == 'i' || spec.conv == 'u' ? 'd' : spec.conv;
      std::string fmt = "%" + flags;
      if (spec.precision >= 0) fmt += "." + std::to_string(spec.precision);
      fmt += "ll";
      fmt += conv;
      if (conv == 'd') {
        return PadField(r, CFormat(fmt, static_cast<long long>(i)), spec, true);
      }
      // Python formats the magnitude and puts the sign in front.
      std::string body =
          CFormat(fmt, static_cast<unsigned long long>(
                           i < 0 ? -static_cast<unsigned long long>(i) : i));
      if (i < 0) body.insert(body.begin(), '-');
      return PadField(r, std::move(body), spec, true);
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!v.is_number()) {
        return TypeError("must be real number, not " + TypeName(v));
      }
      // %f of 1e308 has 309 digits before the point.
      RL_RETURN_IF_ERROR(r.ReserveString(precision_bytes + 400));
      std::string fmt = "%" + flags;
      fmt += "." + std::to_string(spec.precision >= 0 ? spec.precision : 6);
      fmt += spec.conv;
      return PadField(r, CFormat(fmt, v.AsDouble()), spec, true);
    }
    case 'c': {
      std::string s;
      if (v.is_int()) {
        const int64_t cp = v.int_value();
        if (cp < 0 || cp > 0x10FFFF)
          return Status::InvalidArgument(
              "OverflowError: %c arg not in range(0x110000)");
        AppendUtf8(static_cast<char32_t>(cp), &s);
      } else if (v.is_string() && CountCodePoints(v.str()) == 1) {
        s = v.str();
      } else {
        return TypeError("%c requires int or char");
      }
      return PadField(r, s, spec, false);
    }
    default:
      return ValueError(std::string("unsupported format character '") +
                        spec.conv + "'");
  }
}

}  // namespace

Result<Value> PercentFormat(Renderer& r, const Value& fmt_value,
                            const Value& args) {
  const std::string& fmt = fmt_value.str();
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(fmt.size())));
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    RL_RETURN_IF_ERROR(r.ReserveList(args.items().size()));
    positional = args.items();
  } else {
    if (args.is_dict()) mapping = &args.dict();
    positional.push_back(args);
  }
  // A width or precision beyond the output limit could only build a string
  // the limit refuses; refuse it before building anything.
  const int64_t max_field = static_cast<int64_t>(std::min<size_t>(
      r.options().limits.max_output_bytes, std::numeric_limits<int>::max()));
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      RL_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
      continue;
    }
    if (++i >= fmt.size()) return ValueError("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos)
        return ValueError("incomplete format key");
      if (mapping == nullptr) return TypeError("format requires a mapping");
      value = mapping->Find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (value == nullptr) {
        return Status::InvalidArgument("KeyError: '" +
                                       fmt.substr(i + 1, close - i - 1) + "'");
      }
      used_mapping = true;
      i = close + 1;
    }
    FormatSpec spec;
    for (; i < fmt.size(); ++i) {
      const char c = fmt[i];
      if (c == '-') {
        spec.left = true;
      } else if (c == '+') {
        spec.plus = true;
      } else if (c == ' ') {
        spec.space = true;
      } else if (c == '#') {
        spec.alt = true;
      } else if (c == '0') {
        spec.zero = true;
      } else {
        break;
      }
    }
    auto read_number = [&](int64_t* target) -> Status {
      if (i < fmt.size() && fmt[i] == '*') {
        if (next >= positional.size())
          return TypeError("not enough arguments for format string");
        RL_ASSIGN_OR_RETURN(int64_t n,
                            ToIndex(positional[next++], "* wants int"));
        if (n > max_field || n < -max_field) return r.TooLongError();
        *target = n;
        ++i;
        return Status::Ok();
      }
      int64_t n = 0;
      bool any = false;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        n = n * 10 + (fmt[i] - '0');
        if (n > max_field) return r.TooLongError();
        ++i;
        any = true;
      }
      if (any) *target = n;
      return Status::Ok();
    };
    RL_RETURN_IF_ERROR(read_number(&spec.width));
    if (spec.width < -1) {
      spec.left = true;
      spec.width = -spec.width;
    }
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = 0;
      RL_RETURN_IF_ERROR(read_number(&spec.precision));
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L'))
      ++i;
    if (i >= fmt.size()) return ValueError("incomplete format");
    spec.conv = fmt[i];
    if (value == nullptr) {
      if (next >= positional.size())
        return TypeError("not enough arguments for format string");
      value = &positional[next++];
    }
    RL_ASSIGN_OR_RETURN(std::string piece, FormatOne(r, spec, *value));
    // Markup % args escapes what the arguments print as (markupsafe).
    if (fmt_value.is_markup() &&
        (spec.conv == 's' || spec.conv == 'r' || spec.conv == 'a') &&
        !(spec.conv == 's' && value->is_markup())) {
      RL_RETURN_IF_ERROR(r.ReserveString(HtmlEscapedSize(piece)));
      piece = HtmlEscape(piece);
    }
    RL_RETURN_IF_ERROR(r.CheckStringSize(out.size() + piece.size()));
    RL_RETURN_IF_ERROR(r.Reserve(out.size() + piece.size()));
    out += piece;
  }
  if (!used_mapping && mapping == nullptr && next < positional.size()) {
    return TypeError("not all arguments converted during string formatting");
  }
  if (fmt_value.is_markup()) return Value::Markup(std::move(out));
  return Value::Str(std::move(out));
}

}  // namespace redline::model::chat::jinja

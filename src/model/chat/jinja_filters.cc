// Jinja2 3.1 filters and tests, Hugging Face's tojson, and the globals a
// chat template sees (range, dict, namespace, joiner, raise_exception,
// strftime_now).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_interpreter.h"
#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {

// ---------------------------------------------------------------------------
// Argument binding

ArgBinder::ArgBinder(std::string_view what, const CallArgs& args,
                     std::initializer_list<std::string_view> names) {
  Bind(what, args, names, false);
}

ArgBinder ArgBinder::WithRest(std::string_view what, const CallArgs& args,
                              std::initializer_list<std::string_view> names) {
  ArgBinder b;
  b.Bind(what, args, names, true);
  return b;
}

void ArgBinder::Bind(std::string_view what, const CallArgs& args,
                     std::initializer_list<std::string_view> names,
                     bool allow_rest) {
  bound_.assign(names.size(), nullptr);
  const std::vector<std::string_view> params(names);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      bound_[i] = &args.positional[i];
    } else if (allow_rest) {
      rest_.push_back(args.positional[i]);
    } else {
      status_ = TypeError(std::string(what) + " takes at most " +
                          std::to_string(params.size()) + " argument(s) (" +
                          std::to_string(args.positional.size()) + " given)");
      return;
    }
  }
  for (const auto& [name, value] : args.keyword) {
    auto it = std::find(params.begin(), params.end(), name);
    if (it == params.end()) {
      status_ = TypeError(std::string(what) +
                          " got an unexpected keyword argument '" + name + "'");
      return;
    }
    const size_t i = static_cast<size_t>(it - params.begin());
    if (bound_[i] != nullptr) {
      status_ = TypeError(std::string(what) +
                          " got multiple values for argument '" + name + "'");
      return;
    }
    bound_[i] = &value;
  }
}

const Value* ArgBinder::Get(size_t i) const {
  return i < bound_.size() ? bound_[i] : nullptr;
}

Value ArgBinder::GetOr(size_t i, Value fallback) const {
  const Value* v = Get(i);
  return v ? *v : fallback;
}

Result<int64_t> ToIndex(const Value& v, std::string_view what) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  if (v.is_undefined()) return FailUndefined(v);
  return TypeError(std::string(what) + ": '" + TypeName(v) +
                   "' object cannot be interpreted as an integer");
}

namespace {

#define RL_BIND(binder, what, args, ...)       \
  ArgBinder binder(what, args, {__VA_ARGS__}); \
  RL_RETURN_IF_ERROR(binder.status())

Value Like(const Value& model, std::string s) {
  return model.is_markup() ? Value::Markup(std::move(s))
                           : Value::Str(std::move(s));
}

bool OptBool(const ArgBinder& b, size_t i, bool fallback) {
  const Value* v = b.Get(i);
  return v ? Truthy(*v) : fallback;
}

Result<Value> IgnoreCase(Renderer& r, const Value& v) {
  if (!v.is_string()) return v;
  RL_RETURN_IF_ERROR(r.ReserveString(v.str().size()));
  return Value::Str(PyLower(v.str()));
}

// make_attrgetter: item[attribute parts...], optionally lower-cased; a
// null attribute means the item itself.
Result<Value> AttrKey(Renderer& r, const Value& item, const Value* attribute,
                      bool ignore_case, const Value* fallback = nullptr) {
  Value v = item;
  if (attribute != nullptr && !attribute->is_none()) {
    if (attribute->is_int()) {
      RL_ASSIGN_OR_RETURN(v, r.GetItem(item, *attribute));
    } else {
      RL_ASSIGN_OR_RETURN(std::string path, r.Str(*attribute));
      RL_ASSIGN_OR_RETURN(v, r.GetAttrPath(item, path));
    }
    if (fallback != nullptr && v.is_undefined()) v = *fallback;
  }
  if (ignore_case) return IgnoreCase(r, v);
  return v;
}

// make_multi_attrgetter: "a,b" gives a tuple of keys.
Result<Value> MultiAttrKey(Renderer& r, const Value& item,
                           const Value* attribute, bool ignore_case) {
  if (attribute == nullptr || attribute->is_none() || !attribute->is_string() ||
      attribute->str().find(',') == std::string::npos) {
    return AttrKey(r, item, attribute, ignore_case);
  }
  std::vector<Value> keys;
  const std::string& spec = attribute->str();
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(spec.size())));
  RL_RETURN_IF_ERROR(r.ReserveList(
      static_cast<size_t>(std::count(spec.begin(), spec.end(), ',')) + 1));
  size_t start = 0;
  while (true) {
    const size_t comma = spec.find(',', start);
    Value part = Value::Str(
        spec.substr(start, comma == std::string::npos ? comma : comma - start));
    RL_ASSIGN_OR_RETURN(Value k, AttrKey(r, item, &part, ignore_case));
    keys.push_back(std::move(k));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Value::MakeList(std::move(keys));
}

// Stable sort of `items` by `keys` (same length), Python's sorted(). With
// `wrapped`, keys compare like the one-element lists Jinja's sort filter
// builds: equal keys never reach `<` (so Undefined keys do not fail).
Status SortByKeys(Renderer& r, std::vector<Value>* items,
                  const std::vector<Value>& keys, bool reverse,
                  bool wrapped = false) {
  // The order, the sort's buffer and the sorted copy.
  RL_RETURN_IF_ERROR(r.ReserveList(items->size()));
  RL_RETURN_IF_ERROR(r.Reserve(2 * items->size() * sizeof(size_t)));
  std::vector<size_t> order(items->size());
  std::iota(order.begin(), order.end(), 0);
  Status error;
  const int64_t n = static_cast<int64_t>(items->size());
  RL_RETURN_IF_ERROR(
      r.Charge(n * (64 - __builtin_clzll(static_cast<uint64_t>(n) | 1))));
  Meter* meter = r.meter();
  // After an error every comparison says "not less": a consistent order,
  // so the sort finishes quickly and safely.
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (!error.ok()) return false;
    if (wrapped && Equals(keys[x], keys[y], meter)) return false;
    auto c = reverse ? ThreeWay(keys[y], keys[x], meter)
                     : ThreeWay(keys[x], keys[y], meter);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c < 0;
  });
  RL_RETURN_IF_ERROR(r.BudgetStatus());
  RL_RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  sorted.reserve(items->size());
  for (size_t i : order) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
  return Status::Ok();
}

// ---- string filters ---------------------------------------------------------

Result<Value> FTrim(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'trim'", a, "chars");
  std::optional<std::string> chars;
  if (const Value* c = b.Get(0); c && !c->is_none()) {
    RL_ASSIGN_OR_RETURN(chars, r.Str(*c));
  }
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(in));
  const size_t chars_size = chars ? chars->size() : 0;
  RL_RETURN_IF_ERROR(
      r.Charge(static_cast<int64_t>(s.str().size() + chars_size)));
  // The result, and the code points of `chars` looked up while stripping.
  RL_RETURN_IF_ERROR(
      r.Reserve(StringValueBytes(s.str().size()) + 4 * chars_size));
  return Like(s, PyStrip(s.str(), chars, true, true));
}

// A string filter's input as a string, with the work and memory of a
// result of about its size reserved.
Result<Value> CaseInput(Renderer& r, const Value& in) {
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(in));
  RL_RETURN_IF_ERROR(r.ReserveString(s.str().size()));
  return s;
}

Result<Value> FUpper(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'upper'", a);
  RL_ASSIGN_OR_RETURN(Value s, CaseInput(r, in));
  return Like(s, PyUpper(s.str()));
}

Result<Value> FLower(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'lower'", a);
  RL_ASSIGN_OR_RETURN(Value s, CaseInput(r, in));
  return Like(s, PyLower(s.str()));
}

Result<Value> FCapitalize(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'capitalize'", a);
  RL_ASSIGN_OR_RETURN(Value s, CaseInput(r, in));
  return Like(s, PyCapitalize(s.str()));
}

// Jinja's title: words start after "-", whitespace, "(", "{", "[" or "<".
Result<Value> FTitle(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'title'", a);
  RL_ASSIGN_OR_RETURN(Value s, CaseInput(r, in));
  std::string out;
  out.reserve(s.str().size());
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' ||
           IsSpace(c);
  };
  // The first code point of each run of separators or non-separators is
  // upper-cased, the rest lower-cased.
  bool first = true;
  bool prev_sep = false;
  for (char32_t cp : CodePoints(s.str())) {
    const bool sep = is_sep(cp);
    const bool starts_run = first || sep != prev_sep;
    AppendUtf8(starts_run ? ToUpper(cp) : ToLower(cp), &out);
    first = false;
    prev_sep = sep;
  }
  return Value::Str(std::move(out));
}

Result<Value> FReplace(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'replace'", a, "old", "new", "count");
  if (!b.has(0) || !b.has(1))
    return TypeError("filter 'replace' needs old and new");
  int64_t count = -1;
  if (const Value* c = b.Get(2); c && !c->is_none()) {
    RL_ASSIGN_OR_RETURN(count, ToIndex(*c, "count"));
  }
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(in));
  RL_ASSIGN_OR_RETURN(std::string old_s, r.Str(*b.Get(0)));
  RL_ASSIGN_OR_RETURN(std::string new_s, r.Str(*b.Get(1)));
  RL_ASSIGN_OR_RETURN(std::string out,
                      ReplaceChecked(r, s.str(), old_s, new_s, count));
  return Value::Str(std::move(out));
}

Result<Value> FIndent(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'indent'", a, "width", "first", "blank");
  if (in.is_undefined()) return FailUndefined(in);
  if (!in.is_string()) {
    return TypeError("unsupported operand type(s) for +=: '" + TypeName(in) +
                     "' and 'str'");
  }
  std::string indention;
  if (const Value* w = b.Get(0); w && w->is_string()) {
    indention = w->str();
  } else {
    int64_t width = 4;
    if (w) {
      RL_ASSIGN_OR_RETURN(width, ToIndex(*w, "width"));
    }
    const size_t spaces = static_cast<size_t>(std::max<int64_t>(width, 0));
    RL_RETURN_IF_ERROR(r.ReserveString(spaces));
    indention.assign(spaces, ' ');
  }
  const bool first = OptBool(b, 1, false);
  const bool blank = OptBool(b, 2, false);
  // Jinja appends a newline before splitting the lines.
  RL_RETURN_IF_ERROR(r.ReserveString(in.str().size() + 1));
  const std::string text = in.str() + "\n";
  // Measure the result before building it: a million short lines indented
  // by a long string make terabytes.
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(text.size())));
  uint64_t lines = 0;
  uint64_t line_bytes = 0;
  uint64_t indented = 0;  // non-empty lines after the first
  for (size_t start = 0, next = 0; start < text.size(); start = next) {
    const size_t end = LineEnd(text, start, &next);
    line_bytes += end - start;
    if (lines > 0 && end > start) ++indented;
    ++lines;
  }
  const unsigned __int128 w = indention.size();
  const unsigned __int128 breaks = lines > 0 ? lines - 1 : 0;
  unsigned __int128 size =
      line_bytes + breaks + (blank ? breaks : indented) * w + (first ? w : 0);
  if (size > r.options().limits.max_output_bytes) return r.TooLongError();
  RL_RETURN_IF_ERROR(r.ReserveString(static_cast<size_t>(size)));
  std::string rv;
  rv.reserve(static_cast<size_t>(size));
  if (first) rv += indention;
  bool first_line = true;
  for (size_t start = 0, next = 0; start < text.size(); start = next) {
    const size_t end = LineEnd(text, start, &next);
    if (!first_line) {
      rv += '\n';
      if (blank || end > start) rv += indention;
    }
    rv.append(text, start, end - start);
    first_line = false;
  }
  return Like(in, std::move(rv));
}

Result<Value> FCenter(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'center'", a, "width");
  CallArgs m;
  m.positional.push_back(b.GetOr(0, Value::Int(80)));
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(in));
  return CallMethod(r, s, "center", m);
}

Result<Value> FFormat(Renderer& r, const Value& in, CallArgs& a) {
  Value args;
  if (!a.keyword.empty()) {
    if (!a.positional.empty()) {
      return TypeError(
          "can't handle positional and keyword arguments at the same time");
    }
    Dict d;
    for (const auto& [k, v] : a.keyword) d.SetStr(k, v);
    args = Value::MakeDict(std::move(d));
  } else {
    RL_RETURN_IF_ERROR(r.ReserveList(a.positional.size()));
    args = Value::MakeTuple(a.positional);
  }
  RL_ASSIGN_OR_RETURN(Value fmt, r.SoftStr(in));
  return PercentFormat(r, fmt, args);
}

Result<Value> FTruncate(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'truncate'", a, "length", "killwords", "end", "leeway");
  int64_t length = 255;
  if (const Value* l = b.Get(0)) {
    RL_ASSIGN_OR_RETURN(length, ToIndex(*l, "length"));
  }
  const bool killwords = OptBool(b, 1, false);
  std::string end = "...";
  if (b.has(2)) {
    RL_ASSIGN_OR_RETURN(end, r.Str(*b.Get(2)));
  }
  int64_t leeway = 5;
  if (const Value* l = b.Get(3); l && !l->is_none()) {
    RL_ASSIGN_OR_RETURN(leeway, ToIndex(*l, "leeway"));
  }
  const int64_t end_len = static_cast<int64_t>(CountCodePoints(end));
  if (length < end_len) {
    return Status::InvalidArgument(
        "AssertionError: expected length >= " + std::to_string(end_len) +
        ", got " + std::to_string(length));
  }
  if (leeway < 0)
    return Status::InvalidArgument("AssertionError: expected leeway >= 0");
  RL_ASSIGN_OR_RETURN(Value in_str, r.SoftStr(in));
  const std::string& s = in_str.str();
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(2 * s.size())));
  if (static_cast<int64_t>(CountCodePoints(s)) <= length + leeway)
    return in_str;
  const size_t head_bytes =
      CodePointOffset(s, static_cast<size_t>(length - end_len));
  std::string_view head = std::string_view(s).substr(0, head_bytes);
  if (!killwords) {
    const size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head = head.substr(0, sp);
  }
  RL_RETURN_IF_ERROR(r.ReserveString(head.size() + end.size()));
  std::string out(head);
  out += end;
  return Value::Str(std::move(out));
}

Result<Value> FWordcount(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'wordcount'", a);
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(in));
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(s.str().size())));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t cp : CodePoints(s.str())) {
    const bool w = IsAlnum(cp) || cp == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

Result<Value> FString(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'string'", a);
  return r.SoftStr(in);
}

Result<Value> FSafe(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'safe'", a);
  if (in.is_markup()) return in;
  RL_ASSIGN_OR_RETURN(std::string s, r.Str(in));
  return Value::Markup(std::move(s));
}

// markupsafe.escape with its size checked first (up to five bytes per
// byte).
Result<Value> Escaped(Renderer& r, const Value& in) {
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(in));
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(s.str().size())));
  RL_RETURN_IF_ERROR(r.ReserveString(HtmlEscapedSize(s.str())));
  return Value::Markup(HtmlEscape(s.str()));
}

Result<Value> FEscape(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'escape'", a);
  if (in.is_markup()) return in;
  return Escaped(r, in);
}

Result<Value> FForceEscape(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'forceescape'", a);
  return Escaped(r, in);
}

Result<Value> FPprint(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'pprint'", a);
  RL_ASSIGN_OR_RETURN(std::string s, r.ReprOf(in));
  return Value::Str(std::move(s));
}

// ---- numbers
// ------------------------------------------------------------------

// Python int(str, base): optional sign, digits with single underscores.
bool ParsePyInt(std::string_view s, int base, int64_t* out) {
  std::string t = PyStrip(s, std::nullopt, true, true);
  if (t.empty()) return false;
  size_t i = 0;
  bool neg = false;
  if (t[0] == '+' || t[0] == '-') {
    neg = t[0] == '-';
    ++i;
  }
  if (i >= t.size()) return false;
  // Base prefixes are allowed when they match the base (or base 0 picks).
  if (i + 1 < t.size() && t[i] == '0') {
    const char p = static_cast<char>(t[i + 1] | 0x20);
    const int prefixed = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      i += 2;
      if (i < t.size() && t[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (i >= t.size()) return false;
  unsigned __int128 v = 0;
  bool prev_digit = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_' && prev_digit && i + 1 < t.size() && t[i + 1] != '_') {
      prev_digit = false;
      continue;
    }
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'z') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'Z') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    if (d >= base) return false;
    v = v * base + d;
    if (v > static_cast<unsigned __int128>(INT64_MAX) + 1) return false;
    prev_digit = true;
  }
  if (!prev_digit) return false;
  if (!neg && v > INT64_MAX) return false;
  *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v))
             : static_cast<int64_t>(v);
  return true;
}

// Python float(str).
bool ParsePyFloat(std::string_view s, double* out) {
  std::string t = PyStrip(s, std::nullopt, true, true);
  if (t.empty()) return false;
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      if (i == 0 || i + 1 >= t.size() ||
          !std::isdigit(static_cast<unsigned char>(t[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(t[i + 1]))) {
        return false;
      }
      continue;
    }
    clean.push_back(t[i]);
  }
  std::string lower = PyLower(clean);
  std::string_view body = lower;
  if (!body.empty() && (body[0] == '+' || body[0] == '-'))
    body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    *out = lower[0] == '-' ? -v : v;
    return true;
  }
  for (char c : body) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' ||
          c == '+' || c == '-')) {
      return false;
    }
  }
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return end != nullptr && *end == '\0' && end != clean.c_str();
}

// Parsing a number from a string makes three copies of it.
Status ChargeNumberParse(Renderer& r, const Value& in) {
  if (!in.is_string()) return Status::Ok();
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(3 * in.str().size())));
  return r.Reserve(3 * in.str().size());
}

Result<Value> FInt(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'int'", a, "default", "base");
  const Value fallback = b.GetOr(0, Value::Int(0));
  int64_t base = 10;
  if (const Value* bv = b.Get(1)) {
    RL_ASSIGN_OR_RETURN(base, ToIndex(*bv, "base"));
  }
  if (in.is_undefined()) return FailUndefined(in);
  if (in.is_int() || in.is_bool()) return Value::Int(in.int_value());
  if (in.is_float()) {
    const double f = in.float_value();
    if (std::isnan(f)) return fallback;
    if (std::isinf(f) || std::fabs(f) >= 9.2e18) {
      return Status::InvalidArgument(
          "OverflowError: cannot convert float to integer");
    }
    return Value::Int(static_cast<int64_t>(f));
  }
  if (in.is_string()) {
    RL_RETURN_IF_ERROR(ChargeNumberParse(r, in));
    int64_t v;
    if ((base == 0 || (base >= 2 && base <= 36)) &&
        ParsePyInt(in.str(), static_cast<int>(base), &v)) {
      return Value::Int(v);
    }
    double f;
    if (ParsePyFloat(in.str(), &f) && std::isfinite(f) &&
        std::fabs(f) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(f));
    }
  }
  return fallback;
}

Result<Value> FFloat(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'float'", a, "default");
  const Value fallback = b.GetOr(0, Value::Float(0.0));
  if (in.is_undefined()) return FailUndefined(in);
  if (in.is_number()) return Value::Float(in.AsDouble());
  RL_RETURN_IF_ERROR(ChargeNumberParse(r, in));
  double f;
  if (in.is_string() && ParsePyFloat(in.str(), &f)) return Value::Float(f);
  return fallback;
}

Result<Value> FAbs(Renderer&, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'abs'", a);
  if (in.is_undefined()) return FailUndefined(in);
  if (in.is_float()) return Value::Float(std::fabs(in.float_value()));
  if (in.is_int() || in.is_bool()) {
    const int64_t i = in.int_value();
    if (i == INT64_MIN)
      return Status::InvalidArgument(
          "OverflowError: integer result out of 64-bit range");
    return Value::Int(i < 0 ? -i : i);
  }
  return TypeError("bad operand type for abs(): '" + TypeName(in) + "'");
}

// Python's round(x, ndigits): correctly rounded, ties to even.
double PyRound(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    if (ndigits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-ndigits));
  const double y = x / p;
  double r = std::nearbyint(y);  // default rounding mode: ties to even
  return r * p;
}

Result<Value> FRound(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'round'", a, "precision", "method");
  int64_t precision = 0;
  if (const Value* p = b.Get(0)) {
    RL_ASSIGN_OR_RETURN(precision, ToIndex(*p, "precision"));
  }
  std::string method = "common";
  if (b.has(1)) {
    RL_ASSIGN_OR_RETURN(method, r.Str(*b.Get(1)));
  }
  if (method != "common" && method != "ceil" && method != "floor") {
    return Status::InvalidArgument(
        "FilterArgumentError: method must be common, ceil or floor");
  }
  if (in.is_undefined()) return FailUndefined(in);
  if (!in.is_number())
    return TypeError("type " + TypeName(in) +
                     " doesn't define __round__ method");
  if (method == "common") {
    if (!in.is_float()) {
      if (precision >= 0) return Value::Int(in.int_value());
      const double p = std::pow(10.0, static_cast<double>(-precision));
      return Value::Int(static_cast<int64_t>(
          std::nearbyint(static_cast<double>(in.int_value()) / p) * p));
    }
    return Value::Float(PyRound(in.float_value(), precision));
  }
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double x = in.AsDouble() * p;
  return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

// ---- sequences
// ------------------------------------------------------------------

Result<Value> FLength(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'length'", a);
  if (in.is_string()) {
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(in.str().size())));
  }
  std::optional<int64_t> n = Length(in);
  if (!n) {
    return TypeError("object of type '" + TypeName(in) + "' has no len()");
  }
  return Value::Int(*n);
}

Result<Value> FList(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'list'", a);
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  RL_RETURN_IF_ERROR(r.ReserveList(items->size()));
  return Value::MakeList(*items);
}

// The first or last code point of a non-empty string, without splitting
// the whole string into one-character strings.
Value EndCodePoint(const Value& in, bool last) {
  const std::string& s = in.str();
  size_t at = 0;
  size_t next = 0;
  NextCodePoint(s, &next);
  while (last && next < s.size()) {
    at = next;
    NextCodePoint(s, &next);
  }
  return Value::Str(s.substr(at, next - at));
}

Result<Value> FFirst(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'first'", a);
  if (in.is_string() && !in.str().empty()) return EndCodePoint(in, false);
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  if (items->empty())
    return Value::Undefined("No first item, sequence was empty.");
  return items->front();
}

Result<Value> FLast(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'last'", a);
  if (in.is_generator())
    return TypeError("'generator' object is not reversible");
  if (in.is_string() && !in.str().empty()) {
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(in.str().size())));
    return EndCodePoint(in, true);
  }
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  if (items->empty())
    return Value::Undefined("No last item, sequence was empty.");
  return items->back();
}

Result<Value> FReverse(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'reverse'", a);
  if (in.is_string()) return SliceValue(r, in, std::nullopt, std::nullopt, -1);
  auto items = r.Iterate(in);
  if (!items.ok()) {
    if (items.status().code() == StatusCode::kResourceExhausted)
      return items.status();
    return Status::InvalidArgument(
        "FilterArgumentError: argument must be iterable");
  }
  RL_RETURN_IF_ERROR(r.ReserveList((*items)->size()));
  std::vector<Value> out((*items)->rbegin(), (*items)->rend());
  return Value::MakeList(std::move(out));
}

Result<Value> FJoin(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'join'", a, "d", "attribute");
  std::string sep;
  if (b.has(0)) {
    RL_ASSIGN_OR_RETURN(sep, r.Str(*b.Get(0)));
  }
  const Value sep_value = Value::Str(sep);
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  // Every append is bounded (Renderer::AppendStr), so a separator or item
  // repeated a million times fails at the output limit, not in the
  // allocator.
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) {
      RL_RETURN_IF_ERROR(r.AppendStr(sep_value, &out));
    }
    if (b.has(1)) {
      RL_ASSIGN_OR_RETURN(Value v, AttrKey(r, (*items)[i], b.Get(1), false));
      RL_RETURN_IF_ERROR(r.AppendStr(v, &out));
    } else {
      RL_RETURN_IF_ERROR(r.AppendStr((*items)[i], &out));
    }
  }
  return Value::Str(std::move(out));
}

// Before making `n` (key, value) tuples and a list of them.
Status ReservePairs(Renderer& r, size_t n) {
  RL_RETURN_IF_ERROR(r.ReserveList(n));
  return r.Reserve(n * (ContainerValueBytes() + 2 * sizeof(Value)));
}

Result<Value> FItems(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'items'", a);
  if (in.is_undefined()) return Value::MakeGenerator({});
  if (!in.is_dict())
    return TypeError("Can only get item pairs from a mapping.");
  RL_RETURN_IF_ERROR(ReservePairs(r, in.dict().size()));
  std::vector<Value> out;
  out.reserve(in.dict().size());
  for (const auto& [k, v] : in.dict().items())
    out.push_back(Value::MakeTuple({k, v}));
  return Value::MakeGenerator(std::move(out));
}

Result<Value> FDictsort(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'dictsort'", a, "case_sensitive", "by", "reverse");
  const bool case_sensitive = OptBool(b, 0, false);
  std::string by = "key";
  if (b.has(1)) {
    RL_ASSIGN_OR_RETURN(by, r.Str(*b.Get(1)));
  }
  if (by != "key" && by != "value") {
    return Status::InvalidArgument(
        "FilterArgumentError: You can only sort by either \"key\" or "
        "\"value\"");
  }
  if (!in.is_dict()) {
    if (in.is_undefined()) return FailUndefined(in);
    return Status::InvalidArgument("AttributeError: '" + TypeName(in) +
                                   "' object has no attribute 'items'");
  }
  RL_RETURN_IF_ERROR(ReservePairs(r, in.dict().size()));
  RL_RETURN_IF_ERROR(r.ReserveList(in.dict().size()));
  std::vector<Value> items;
  std::vector<Value> keys;
  for (const auto& [k, v] : in.dict().items()) {
    items.push_back(Value::MakeTuple({k, v}));
    const Value& key = by == "key" ? k : v;
    if (case_sensitive) {
      keys.push_back(key);
    } else {
      RL_ASSIGN_OR_RETURN(Value folded, IgnoreCase(r, key));
      keys.push_back(std::move(folded));
    }
  }
  RL_RETURN_IF_ERROR(SortByKeys(r, &items, keys, OptBool(b, 2, false)));
  return Value::MakeList(std::move(items));
}

Result<Value> FSort(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'sort'", a, "reverse", "case_sensitive", "attribute");
  RL_ASSIGN_OR_RETURN(auto src, r.Iterate(in));
  RL_RETURN_IF_ERROR(r.ReserveList(2 * src->size()));
  std::vector<Value> items = *src;
  std::vector<Value> keys;
  keys.reserve(items.size());
  const bool ignore_case = !OptBool(b, 1, false);
  for (const Value& item : items) {
    RL_ASSIGN_OR_RETURN(Value k, MultiAttrKey(r, item, b.Get(2), ignore_case));
    keys.push_back(std::move(k));
  }
  RL_RETURN_IF_ERROR(
      SortByKeys(r, &items, keys, OptBool(b, 0, false), /*wrapped=*/true));
  return Value::MakeList(std::move(items));
}

Result<Value> FUnique(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'unique'", a, "case_sensitive", "attribute");
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  const bool ignore_case = !OptBool(b, 0, false);
  RL_RETURN_IF_ERROR(r.ReserveList(2 * items->size()));
  std::vector<Value> out;
  std::vector<Value> seen;
  for (const Value& item : *items) {
    RL_ASSIGN_OR_RETURN(Value k, AttrKey(r, item, b.Get(1), ignore_case));
    if (!Dict::IsHashable(k) && !k.is_undefined())
      return TypeError("unhashable type: '" + TypeName(k) + "'");
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(seen.size())));
    bool dup = false;
    for (const Value& s : seen) {
      RL_ASSIGN_OR_RETURN(dup, r.Equal(s, k));
      if (dup) break;
    }
    if (dup) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::MakeGenerator(std::move(out));
}

Result<Value> MinMax(Renderer& r, const Value& in, CallArgs& a, bool want_max) {
  RL_BIND(b, want_max ? "filter 'max'" : "filter 'min'", a, "case_sensitive",
          "attribute");
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  if (items->empty())
    return Value::Undefined("No aggregated item, sequence was empty.");
  const bool ignore_case = !OptBool(b, 0, false);
  size_t best = 0;
  RL_ASSIGN_OR_RETURN(Value best_key,
                      AttrKey(r, (*items)[0], b.Get(1), ignore_case));
  for (size_t i = 1; i < items->size(); ++i) {
    RL_ASSIGN_OR_RETURN(Value k,
                        AttrKey(r, (*items)[i], b.Get(1), ignore_case));
    RL_ASSIGN_OR_RETURN(int c, ThreeWay(k, best_key, r.meter()));
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return (*items)[best];
}

Result<Value> FMin(Renderer& r, const Value& in, CallArgs& a) {
  return MinMax(r, in, a, false);
}
Result<Value> FMax(Renderer& r, const Value& in, CallArgs& a) {
  return MinMax(r, in, a, true);
}

Result<Value> FSum(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'sum'", a, "attribute", "start");
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  Value total = b.GetOr(1, Value::Int(0));
  if (total.is_string())
    return TypeError("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : *items) {
    RL_ASSIGN_OR_RETURN(Value v, AttrKey(r, item, b.Get(0), false));
    RL_ASSIGN_OR_RETURN(total, ApplyBinary(r, BinOp::kAdd, total, v));
  }
  return total;
}

Result<Value> FBatch(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'batch'", a, "linecount", "fill_with");
  if (!b.has(0)) return TypeError("filter 'batch' needs linecount");
  RL_ASSIGN_OR_RETURN(int64_t n, ToIndex(*b.Get(0), "linecount"));
  if (n <= 0) return ValueError("linecount must be positive");
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  // A fill value pads the last batch to `n` items: [x]|batch(10**9, 0)
  // would make a billion.
  const Value* fill_with = b.Get(1);
  const bool fills = fill_with != nullptr && !fill_with->is_none();
  const uint64_t batches =
      (items->size() + static_cast<uint64_t>(n) - 1) / static_cast<uint64_t>(n);
  const unsigned __int128 elements =
      fills ? static_cast<unsigned __int128>(batches) * n : items->size();
  if (elements > r.meter()->budget().max_memory_bytes)
    return r.OutOfMemoryError();
  RL_RETURN_IF_ERROR(r.ReserveList(static_cast<size_t>(elements)));
  RL_RETURN_IF_ERROR(r.ReserveList(batches));
  RL_RETURN_IF_ERROR(r.Reserve(batches * ContainerValueBytes()));
  std::vector<Value> out;
  std::vector<Value> cur;
  for (const Value& item : *items) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::MakeList(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (const Value* fill = b.Get(1); fill && !fill->is_none()) {
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    }
    out.push_back(Value::MakeList(std::move(cur)));
  }
  return Value::MakeGenerator(std::move(out));
}

Result<Value> FSlice(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'slice'", a, "slices", "fill_with");
  if (!b.has(0)) return TypeError("filter 'slice' needs slices");
  RL_ASSIGN_OR_RETURN(int64_t slices, ToIndex(*b.Get(0), "slices"));
  if (slices <= 0) return ValueError("slices must be positive");
  RL_ASSIGN_OR_RETURN(auto src, r.Iterate(in));
  const std::vector<Value>& seq = *src;
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t items_per_slice = length / slices;
  const int64_t slices_with_extra = length % slices;
  // One list per slice, each with room for a fill value.
  if (static_cast<uint64_t>(slices) > r.meter()->budget().max_memory_bytes)
    return r.OutOfMemoryError();
  RL_RETURN_IF_ERROR(r.ReserveList(static_cast<size_t>(slices) + seq.size()));
  RL_RETURN_IF_ERROR(r.Reserve(static_cast<size_t>(slices) *
                               (ContainerValueBytes() + sizeof(Value))));
  int64_t offset = 0;
  std::vector<Value> out;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * items_per_slice;
    if (i < slices_with_extra) ++offset;
    const int64_t end = offset + (i + 1) * items_per_slice;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (const Value* fill = b.Get(1);
        fill && !fill->is_none() && i >= slices_with_extra) {
      part.push_back(*fill);
    }
    out.push_back(Value::MakeList(std::move(part)));
  }
  return Value::MakeGenerator(std::move(out));
}

Result<Value> FAttr(Renderer& r, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'attr'", a, "name");
  if (!b.has(0)) return TypeError("filter 'attr' needs a name");
  RL_ASSIGN_OR_RETURN(const std::string name, r.Str(*b.Get(0)));
  // attr() reads Python attributes only, never items.
  bool unsafe = false;
  if (in.is_dict() && !HasMethod(in, name, &unsafe)) {
    return Value::Undefined("'dict object' has no attribute '" + name + "'");
  }
  return r.GetAttr(in, name);
}

// select/reject/selectattr/rejectattr share Jinja's select_or_reject.
Result<Value> SelectOrReject(Renderer& r, const Value& in, CallArgs& a,
                             bool select, bool by_attr) {
  if (!Truthy(in)) return Value::MakeGenerator({});
  size_t off = 0;
  const Value* attr = nullptr;
  if (by_attr) {
    if (a.positional.empty()) {
      return Status::InvalidArgument(
          "FilterArgumentError: Missing parameter for attribute name");
    }
    attr = &a.positional[0];
    off = 1;
  }
  std::string test;
  CallArgs test_args;
  const bool has_test = a.positional.size() > off;
  if (has_test) {
    RL_ASSIGN_OR_RETURN(test, r.Str(a.positional[off]));
    test_args.positional.assign(a.positional.begin() + off + 1,
                                a.positional.end());
    test_args.keyword = a.keyword;
  }
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  RL_RETURN_IF_ERROR(r.ReserveList(items->size()));
  std::vector<Value> out;
  for (const Value& item : *items) {
    RL_ASSIGN_OR_RETURN(Value v, AttrKey(r, item, attr, false));
    bool keep;
    if (has_test) {
      CallArgs args = test_args;
      RL_ASSIGN_OR_RETURN(keep, r.ApplyTest(test, v, args));
    } else {
      keep = Truthy(v);
    }
    if (keep == select) out.push_back(item);
  }
  return Value::MakeGenerator(std::move(out));
}

Result<Value> FSelect(Renderer& r, const Value& in, CallArgs& a) {
  return SelectOrReject(r, in, a, true, false);
}
Result<Value> FReject(Renderer& r, const Value& in, CallArgs& a) {
  return SelectOrReject(r, in, a, false, false);
}
Result<Value> FSelectAttr(Renderer& r, const Value& in, CallArgs& a) {
  return SelectOrReject(r, in, a, true, true);
}
Result<Value> FRejectAttr(Renderer& r, const Value& in, CallArgs& a) {
  return SelectOrReject(r, in, a, false, true);
}

Result<Value> FMap(Renderer& r, const Value& in, CallArgs& a) {
  if (!Truthy(in)) return Value::MakeGenerator({});
  RL_ASSIGN_OR_RETURN(auto items, r.Iterate(in));
  RL_RETURN_IF_ERROR(r.ReserveList(items->size()));
  std::vector<Value> out;
  out.reserve(items->size());
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [k, v] : a.keyword) {
    if (k == "attribute") attribute = &v;
    if (k == "default") fallback = &v;
  }
  if (a.positional.empty() && attribute != nullptr) {
    for (const auto& [k, v] : a.keyword) {
      if (k != "attribute" && k != "default") {
        return Status::InvalidArgument(
            "FilterArgumentError: Unexpected keyword argument '" + k + "'");
      }
    }
    const Value* use_default =
        (fallback && !fallback->is_none()) ? fallback : nullptr;
    for (const Value& item : *items) {
      RL_ASSIGN_OR_RETURN(Value v,
                          AttrKey(r, item, attribute, false, use_default));
      out.push_back(std::move(v));
    }
    return Value::MakeGenerator(std::move(out));
  }
  if (a.positional.empty()) {
    return Status::InvalidArgument(
        "FilterArgumentError: map requires a filter argument");
  }
  RL_ASSIGN_OR_RETURN(const std::string filter, r.Str(a.positional[0]));
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : *items) {
    CallArgs args = rest;
    RL_ASSIGN_OR_RETURN(Value v, r.ApplyFilter(filter, item, args));
    out.push_back(std::move(v));
  }
  return Value::MakeGenerator(std::move(out));
}

Result<Value> FDefault(Renderer&, const Value& in, CallArgs& a) {
  RL_BIND(b, "filter 'default'", a, "default_value", "boolean");
  const bool boolean = OptBool(b, 1, false);
  if (in.is_undefined() || (boolean && !Truthy(in)))
    return b.GetOr(0, Value::Str(""));
  return in;
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False). A positional integer or string is taken
// as the indent (Jinja's own tojson signature); a positional bool as
// ensure_ascii.
Result<Value> FToJson(Renderer& r, const Value& in, CallArgs& a) {
  JsonDumpOptions opts;
  const Value* ensure_ascii = nullptr;
  const Value* indent = nullptr;
  const Value* separators = nullptr;
  const Value* sort_keys = nullptr;
  const Value* slots[4] = {nullptr, nullptr, nullptr, nullptr};
  size_t next = 0;
  for (const Value& v : a.positional) {
    if (next == 0 && !v.is_bool())
      next = 1;  // first positional non-bool: the indent
    if (next >= 4)
      return TypeError("filter 'tojson' takes at most 4 arguments");
    slots[next++] = &v;
  }
  ensure_ascii = slots[0];
  indent = slots[1];
  separators = slots[2];
  sort_keys = slots[3];
  for (const auto& [k, v] : a.keyword) {
    const Value** target = k == "ensure_ascii" ? &ensure_ascii
                           : k == "indent"     ? &indent
                           : k == "separators" ? &separators
                           : k == "sort_keys"  ? &sort_keys
                                               : nullptr;
    if (target == nullptr)
      return TypeError("tojson() got an unexpected keyword argument '" + k +
                       "'");
    if (*target != nullptr)
      return TypeError("tojson() got multiple values for argument '" + k + "'");
    *target = &v;
  }
  opts.ensure_ascii = ensure_ascii && Truthy(*ensure_ascii);
  opts.sort_keys = sort_keys && Truthy(*sort_keys);
  if (indent && !indent->is_none()) {
    if (indent->is_string()) {
      opts.indent = indent->str();
    } else {
      RL_ASSIGN_OR_RETURN(int64_t n, ToIndex(*indent, "indent"));
      const size_t width = static_cast<size_t>(std::max<int64_t>(n, 0));
      RL_RETURN_IF_ERROR(r.ReserveString(width));
      opts.indent = std::string(width, ' ');
    }
    opts.item_separator = ",";
  }
  if (separators && !separators->is_none()) {
    if (!separators->is_sequence() || separators->items().size() != 2 ||
        !separators->items()[0].is_string() ||
        !separators->items()[1].is_string()) {
      return ValueError(
          "separators must be a (item_separator, key_separator) pair of "
          "strings");
    }
    opts.item_separator = separators->items()[0].str();
    opts.key_separator = separators->items()[1].str();
  }
  RL_ASSIGN_OR_RETURN(std::string out, JsonDump(&r, in, opts));
  return Value::Str(std::move(out));
}

// ---- tests
// ----------------------------------------------------------------------

Result<bool> NoArgs(const CallArgs& a, std::string_view name) {
  if (!a.positional.empty() || !a.keyword.empty()) {
    return TypeError("test '" + std::string(name) + "' takes no arguments");
  }
  return true;
}

const Value* OneArg(const CallArgs& a) {
  if (!a.positional.empty()) return &a.positional[0];
  if (!a.keyword.empty()) return &a.keyword[0].second;
  return nullptr;
}

#define RL_SIMPLE_TEST(fn, name, expr)                      \
  Result<bool> fn(Renderer&, const Value& v, CallArgs& a) { \
    RL_RETURN_IF_ERROR(NoArgs(a, name).status());           \
    return (expr);                                          \
  }

RL_SIMPLE_TEST(TDefined, "defined", !v.is_undefined())
RL_SIMPLE_TEST(TUndefined, "undefined", v.is_undefined())
RL_SIMPLE_TEST(TNone, "none", v.is_none())
RL_SIMPLE_TEST(TBoolean, "boolean", v.is_bool())
RL_SIMPLE_TEST(TTrue, "true", v.is_bool() && v.bool_value())
RL_SIMPLE_TEST(TFalse, "false", v.is_bool() && !v.bool_value())
RL_SIMPLE_TEST(TString, "string", v.is_string())
RL_SIMPLE_TEST(TNumber, "number", v.is_number())
RL_SIMPLE_TEST(TInteger, "integer", v.is_int())
RL_SIMPLE_TEST(TFloat, "float", v.is_float())
RL_SIMPLE_TEST(TMapping, "mapping", v.is_dict())
RL_SIMPLE_TEST(TCallable, "callable", v.is_callable() || v.is_undefined())
RL_SIMPLE_TEST(TEscaped, "escaped", v.is_markup())
RL_SIMPLE_TEST(TIterable, "iterable",
               v.is_undefined() || v.is_string() || v.is_list() ||
                   v.is_dict() || v.is_loop())
RL_SIMPLE_TEST(TSequence, "sequence",
               v.is_undefined() || v.is_string() || v.is_sequence() ||
                   v.is_dict())
// str(v).islower() / isupper().
Result<bool> CaseTest(Renderer& r, const Value& v, CallArgs& a, bool lower) {
  RL_RETURN_IF_ERROR(NoArgs(a, lower ? "lower" : "upper").status());
  RL_ASSIGN_OR_RETURN(Value s, r.SoftStr(v));
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(s.str().size())));
  bool cased = false;
  for (char32_t cp : CodePoints(s.str())) {
    if (lower ? IsUpper(cp) : IsLower(cp)) return false;
    cased |= lower ? IsLower(cp) : IsUpper(cp);
  }
  return cased;
}
Result<bool> TLower(Renderer& r, const Value& v, CallArgs& a) {
  return CaseTest(r, v, a, true);
}
Result<bool> TUpper(Renderer& r, const Value& v, CallArgs& a) {
  return CaseTest(r, v, a, false);
}

Result<bool> Parity(Renderer& r, const Value& v, CallArgs& a, bool want_even) {
  RL_RETURN_IF_ERROR(NoArgs(a, want_even ? "even" : "odd").status());
  RL_ASSIGN_OR_RETURN(Value m, ApplyBinary(r, BinOp::kMod, v, Value::Int(2)));
  const bool even = Equals(m, Value::Int(0));
  return even == want_even;
}
Result<bool> TEven(Renderer& r, const Value& v, CallArgs& a) {
  return Parity(r, v, a, true);
}
Result<bool> TOdd(Renderer& r, const Value& v, CallArgs& a) {
  return Parity(r, v, a, false);
}

Result<bool> TDivisibleBy(Renderer& r, const Value& v, CallArgs& a) {
  const Value* n = OneArg(a);
  if (n == nullptr) return TypeError("test 'divisibleby' needs a number");
  RL_ASSIGN_OR_RETURN(Value m, ApplyBinary(r, BinOp::kMod, v, *n));
  return Equals(m, Value::Int(0));
}

template <CmpOp kOp>
Result<bool> TCompare(Renderer& r, const Value& v, CallArgs& a) {
  const Value* other = OneArg(a);
  if (other == nullptr) return TypeError("comparison test needs an argument");
  return ApplyCompare(kOp, v, *other, r.meter());
}

Result<bool> TIn(Renderer& r, const Value& v, CallArgs& a) {
  const Value* seq = OneArg(a);
  if (seq == nullptr) return TypeError("test 'in' needs a sequence");
  return Contains(*seq, v, r.meter());
}

Result<bool> TSameAs(Renderer&, const Value& v, CallArgs& a) {
  const Value* other = OneArg(a);
  if (other == nullptr) return TypeError("test 'sameas' needs an argument");
  if (v.kind() != other->kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      return Equals(v, *other);
    default:
      return v.identity() == other->identity();
  }
}

Result<bool> TFilter(Renderer&, const Value& v, CallArgs& a) {
  RL_RETURN_IF_ERROR(NoArgs(a, "filter").status());
  return v.is_string() && FindFilter(v.str()) != nullptr;
}

Result<bool> TTest(Renderer&, const Value& v, CallArgs& a) {
  RL_RETURN_IF_ERROR(NoArgs(a, "test").status());
  return v.is_string() && FindTest(v.str()) != nullptr;
}

// ---- globals
// ----------------------------------------------------------------------

// The sandbox refuses ranges longer than this (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Result<Value> GRange(Renderer& r, CallArgs& a) {
  if (!a.keyword.empty())
    return TypeError("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const Value& v : a.positional) {
    RL_ASSIGN_OR_RETURN(int64_t i, ToIndex(v, "range()"));
    n.push_back(i);
  }
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (n.size() == 1) {
    stop = n[0];
  } else if (n.size() == 2 || n.size() == 3) {
    start = n[0];
    stop = n[1];
    if (n.size() == 3) step = n[2];
  } else {
    return TypeError("range expected 1 to 3 arguments, got " +
                     std::to_string(n.size()));
  }
  if (step == 0) return ValueError("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start
                                 : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (count > kMaxRange) {
    return Status::InvalidArgument(
        "OverflowError: Range too big. The sandbox blocks ranges larger than "
        "MAX_RANGE (100000).");
  }
  RL_RETURN_IF_ERROR(r.ReserveList(static_cast<size_t>(count)));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i)
    out.push_back(Value::Int(static_cast<int64_t>(start + i * step)));
  return Value::MakeList(std::move(out));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) share this.
Result<Dict> BuildDict(Renderer& r, CallArgs& a, std::string_view what) {
  Dict d;
  if (a.positional.size() > 1) {
    return TypeError(std::string(what) + " expected at most 1 argument, got " +
                     std::to_string(a.positional.size()));
  }
  // An entry, and the copy of a string key its index keeps.
  auto reserve_entry = [&r](const Value& key) -> Status {
    RL_RETURN_IF_ERROR(r.Charge(Dict::LookupUnits(key)));
    if (!key.is_string()) return r.Reserve(4 * sizeof(Value));
    return r.Reserve(4 * sizeof(Value) + StringValueBytes(key.str().size()));
  };
  if (a.positional.size() == 1) {
    const Value& src = a.positional[0];
    if (src.is_dict() || src.is_namespace()) {
      const Dict& sd = src.is_dict() ? src.dict() : src.namespace_attrs();
      for (const auto& [k, v] : sd.items()) {
        RL_RETURN_IF_ERROR(reserve_entry(k));
        RL_RETURN_IF_ERROR(d.Set(k, v));
      }
    } else {
      RL_ASSIGN_OR_RETURN(auto items, r.Iterate(src));
      for (const Value& pair : *items) {
        if (!pair.is_sequence() || pair.items().size() != 2) {
          return ValueError(
              "dictionary update sequence element has wrong length; 2 is "
              "required");
        }
        RL_RETURN_IF_ERROR(reserve_entry(pair.items()[0]));
        RL_RETURN_IF_ERROR(d.Set(pair.items()[0], pair.items()[1]));
      }
    }
  }
  for (const auto& [k, v] : a.keyword) d.SetStr(k, v);
  return d;
}

Result<Value> GDict(Renderer& r, CallArgs& a) {
  RL_ASSIGN_OR_RETURN(Dict d, BuildDict(r, a, "dict"));
  Value v = Value::MakeDict(std::move(d));
  RL_RETURN_IF_ERROR(r.CheckValueDepth(v));
  return v;
}

Result<Value> GNamespace(Renderer& r, CallArgs& a) {
  RL_ASSIGN_OR_RETURN(Dict d, BuildDict(r, a, "namespace"));
  for (const auto& [k, v] : d.items()) {
    if (v.is_namespace() || v.is_loop() || v.is_callable()) {
      return Status::InvalidArgument(
          "TemplateRuntimeError: a namespace attribute cannot hold a "
          "namespace, loop "
          "or callable object");
    }
    RL_RETURN_IF_ERROR(r.CheckValueDepth(v));
  }
  return Value::MakeNamespace(std::move(d));
}

Result<Value> GJoiner(Renderer& r, CallArgs& a) {
  ArgBinder b("joiner", a, {"sep"});
  RL_RETURN_IF_ERROR(b.status());
  std::string sep = ", ";
  if (b.has(0)) {
    RL_ASSIGN_OR_RETURN(sep, r.Str(*b.Get(0)));
  }
  auto used = std::make_shared<bool>(false);
  return Value::MakeCallable(
      "joiner", [sep, used](Renderer&, CallArgs&) -> Result<Value> {
        if (!*used) {
          *used = true;
          return Value::Str("");
        }
        return Value::Str(sep);
      });
}

Result<Value> GRaiseException(Renderer& r, CallArgs& a) {
  ArgBinder b("raise_exception()", a, {"message"});
  RL_RETURN_IF_ERROR(b.status());
  if (!b.has(0))
    return TypeError(
        "raise_exception() missing 1 required positional argument: 'message'");
  RL_ASSIGN_OR_RETURN(std::string message, r.Str(*b.Get(0)));
  return r.RaiseTemplateError(std::move(message));
}

// datetime.now().strftime(format) at the render's injected time.
Result<Value> GStrftimeNow(Renderer& r, CallArgs& a) {
  ArgBinder b("strftime_now", a, {"format"});
  RL_RETURN_IF_ERROR(b.status());
  if (!b.has(0) || !b.Get(0)->is_string())
    return TypeError("strftime_now() argument must be str");
  const std::string& fmt = b.Get(0)->str();
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(fmt.size())));
  RL_RETURN_IF_ERROR(r.Reserve(2 * fmt.size()));
  // Python handles %f, %z and %Z itself (a naive datetime has no zone).
  std::string c_fmt;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      const char c = fmt[i + 1];
      if (c == 'f') {
        c_fmt += "000000";
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      c_fmt += fmt[i];
      c_fmt += c;
      ++i;
      continue;
    }
    c_fmt += fmt[i];
  }
  if (c_fmt.empty()) return Value::Str("");
  std::tm tm = r.options().now;
  for (size_t cap = 256; cap <= (size_t{1} << 20); cap *= 4) {
    RL_RETURN_IF_ERROR(r.ReserveString(cap));
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), c_fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value::Str(std::move(buf));
    }
  }
  return Value::Str("");
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},
    {"attr", FAttr},
    {"batch", FBatch},
    {"capitalize", FCapitalize},
    {"center", FCenter},
    {"count", FLength},
    {"d", FDefault},
    {"default", FDefault},
    {"dictsort", FDictsort},
    {"e", FEscape},
    {"escape", FEscape},
    {"first", FFirst},
    {"float", FFloat},
    {"forceescape", FForceEscape},
    {"format", FFormat},
    {"indent", FIndent},
    {"int", FInt},
    {"items", FItems},
    {"join", FJoin},
    {"last", FLast},
    {"length", FLength},
    {"list", FList},
    {"lower", FLower},
    {"map", FMap},
    {"max", FMax},
    {"min", FMin},
    {"pprint", FPprint},
    {"reject", FReject},
    {"rejectattr", FRejectAttr},
    {"replace", FReplace},
    {"reverse", FReverse},
    {"round", FRound},
    {"safe", FSafe},
    {"select", FSelect},
    {"selectattr", FSelectAttr},
    {"slice", FSlice},
    {"sort", FSort},
    {"string", FString},
    {"sum", FSum},
    {"title", FTitle},
    {"tojson", FToJson},
    {"trim", FTrim},
    {"truncate", FTruncate},
    {"unique", FUnique},
    {"upper", FUpper},
    {"wordcount", FWordcount},
};

// Jinja2 3.1 filters Redline does not implement (rendering fails if used).
constexpr std::string_view kUnsupportedFilters[] = {
    "filesizeformat", "groupby", "random",   "striptags",
    "urlencode",      "urlize",  "wordwrap", "xmlattr"};

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"!=", TCompare<CmpOp::kNe>},
    {"<", TCompare<CmpOp::kLt>},
    {"<=", TCompare<CmpOp::kLe>},
    {"==", TCompare<CmpOp::kEq>},
    {">", TCompare<CmpOp::kGt>},
    {">=", TCompare<CmpOp::kGe>},
    {"boolean", TBoolean},
    {"callable", TCallable},
    {"defined", TDefined},
    {"divisibleby", TDivisibleBy},
    {"eq", TCompare<CmpOp::kEq>},
    {"equalto", TCompare<CmpOp::kEq>},
    {"escaped", TEscaped},
    {"even", TEven},
    {"false", TFalse},
    {"filter", TFilter},
    {"float", TFloat},
    {"ge", TCompare<CmpOp::kGe>},
    {"greaterthan", TCompare<CmpOp::kGt>},
    {"gt", TCompare<CmpOp::kGt>},
    {"in", TIn},
    {"integer", TInteger},
    {"iterable", TIterable},
    {"le", TCompare<CmpOp::kLe>},
    {"lessthan", TCompare<CmpOp::kLt>},
    {"lower", TLower},
    {"lt", TCompare<CmpOp::kLt>},
    {"mapping", TMapping},
    {"ne", TCompare<CmpOp::kNe>},
    {"none", TNone},
    {"number", TNumber},
    {"odd", TOdd},
    {"sameas", TSameAs},
    {"sequence", TSequence},
    {"string", TString},
    {"test", TTest},
    {"true", TTrue},
    {"undefined", TUndefined},
    {"upper", TUpper},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const auto& f : kFilters) {
    if (f.name == name) return f.fn;
  }
  return nullptr;
}

TestFn FindTest(std::string_view name) {
  for (const auto& t : kTests) {
    if (t.name == name) return t.fn;
  }
  return nullptr;
}

bool IsJinjaFilter(std::string_view name) {
  if (FindFilter(name) != nullptr) return true;
  for (std::string_view f : kUnsupportedFilters) {
    if (f == name) return true;
  }
  return false;
}

bool IsJinjaTest(std::string_view name) { return FindTest(name) != nullptr; }

const Value* FindGlobal(std::string_view name) {
  // Built once; the callables are stateless, so sharing them between
  // threads is safe.
  static const auto* globals = [] {
    auto* m = new std::unordered_map<std::string_view, Value>();
    (*m)["range"] = Value::MakeCallable("range", GRange);
    (*m)["dict"] = Value::MakeCallable("dict", GDict);
    (*m)["namespace"] = Value::MakeCallable("namespace", GNamespace);
    (*m)["joiner"] = Value::MakeCallable("joiner", GJoiner);
    (*m)["raise_exception"] =
        Value::MakeCallable("raise_exception", GRaiseException);
    (*m)["strftime_now"] = Value::MakeCallable("strftime_now", GStrftimeNow);
    return m;
  }();
  auto it = globals->find(name);
  return it == globals->end() ? nullptr : &it->second;
}

}  // namespace redline::model::chat::jinja

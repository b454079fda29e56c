// Python methods of str, dict, list and Jinja's loop object, as the
// immutable sandbox exposes them.
#include <algorithm>
#include <array>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_interpreter.h"
#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {
namespace {

constexpr std::array<std::string_view, 40> kStrMethods = {
    "strip",      "lstrip",     "rstrip",       "split",        "rsplit",
    "splitlines", "startswith", "endswith",     "upper",        "lower",
    "title",      "capitalize", "swapcase",     "casefold",     "replace",
    "find",       "rfind",      "index",        "rindex",       "count",
    "join",       "isdigit",    "isalpha",      "isalnum",      "isspace",
    "isupper",    "islower",    "istitle",      "isnumeric",    "isdecimal",
    "format",     "center",     "ljust",        "rjust",        "zfill",
    "partition",  "rpartition", "removeprefix", "removesuffix", "expandtabs"};
constexpr std::array<std::string_view, 5> kDictMethods = {
    "items", "keys", "values", "get", "copy"};
constexpr std::array<std::string_view, 5> kDictUnsafe = {
    "pop", "popitem", "setdefault", "update", "clear"};
constexpr std::array<std::string_view, 3> kListMethods = {"index", "count",
                                                          "copy"};
constexpr std::array<std::string_view, 8> kListUnsafe = {
    "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
// markupsafe escapes these arguments of Markup methods (replace's `new`,
// the fill character of ljust/rjust/center).
struct MarkupEscapedArg {
  std::string_view method;
  size_t index;
  std::string_view keyword;
};
constexpr MarkupEscapedArg kMarkupEscaped[] = {{"replace", 1, "new"},
                                               {"ljust", 1, "fillchar"},
                                               {"rjust", 1, "fillchar"},
                                               {"center", 1, "fillchar"}};

template <size_t N>
bool In(const std::array<std::string_view, N>& set, std::string_view name) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

// A string argument, or a TypeError.
Result<std::string> StrArg(const Value* v, std::string_view what) {
  if (v == nullptr || !v->is_string()) {
    return TypeError(std::string(what) + " must be str, not " +
                     (v ? TypeName(*v) : "None"));
  }
  return v->str();
}

// Optional chars argument of strip(): None means whitespace.
Result<std::optional<std::string>> CharsArg(const Value* v,
                                            std::string_view method) {
  if (v == nullptr || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) {
    return TypeError(std::string(method) + " arg must be None or str");
  }
  return std::optional<std::string>(v->str());
}

// Code point index of byte offset `byte` in `s`.
int64_t CodePointIndex(std::string_view s, size_t byte) {
  return static_cast<int64_t>(CountCodePoints(s.substr(0, byte)));
}

// Byte offset of code point index `cp` (clamped to the ends, negative from
// the end, as Python's start/end arguments).
size_t ByteOffset(std::string_view s, int64_t cp) {
  if (IsAscii(s)) {
    const int64_t n = static_cast<int64_t>(s.size());
    if (cp < 0) cp = std::max<int64_t>(0, cp + n);
    return static_cast<size_t>(std::min(cp, n));
  }
  std::u32string cps = DecodeUtf8(s);
  const int64_t n = static_cast<int64_t>(cps.size());
  if (cp < 0) cp = std::max<int64_t>(0, cp + n);
  cp = std::min(cp, n);
  return EncodeUtf8(std::u32string_view(cps).substr(0, cp)).size();
}

// The [start, end) byte window of a str method's optional start/end args.
Result<std::pair<size_t, size_t>> Window(std::string_view s, const Value* start,
                                         const Value* end) {
  size_t b = 0;
  size_t e = s.size();
  if (start && !start->is_none()) {
    RL_ASSIGN_OR_RETURN(int64_t i, ToIndex(*start, "slice indices"));
    b = ByteOffset(s, i);
  }
  if (end && !end->is_none()) {
    RL_ASSIGN_OR_RETURN(int64_t i, ToIndex(*end, "slice indices"));
    e = ByteOffset(s, i);
  }
  return std::make_pair(b, std::max(b, e));
}

std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit,
                                         bool from_right) {
  std::u32string cps = DecodeUtf8(s);
  std::vector<std::u32string> parts;
  if (!from_right) {
    size_t i = 0;
    const size_t n = cps.size();
    while (true) {
      while (i < n && IsSpace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(cps.substr(i));
        break;
      }
      size_t j = i;
      while (j < n && !IsSpace(cps[j])) ++j;
      parts.push_back(cps.substr(i, j - i));
      i = j;
    }
  } else {
    int64_t i = static_cast<int64_t>(cps.size()) - 1;
    while (true) {
      while (i >= 0 && IsSpace(cps[i])) --i;
      if (i < 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(cps.substr(0, i + 1));
        break;
      }
      int64_t j = i;
      while (j >= 0 && !IsSpace(cps[j])) --j;
      parts.push_back(cps.substr(j + 1, i - j));
      i = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(EncodeUtf8(p));
  return out;
}

std::vector<std::string> SplitSep(std::string_view s, std::string_view sep,
                                  int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t p = s.find(sep, start);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(start, p - start));
      start = p + sep.size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  std::vector<std::string> rev;
  while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t p = s.rfind(sep, end - sep.size());
    if (p == std::string_view::npos) break;
    rev.emplace_back(s.substr(p + sep.size(), end - p - sep.size()));
    end = p;
  }
  rev.emplace_back(s.substr(0, end));
  out.assign(rev.rbegin(), rev.rend());
  return out;
}

Value StrLike(const Value& receiver, std::string s) {
  return receiver.is_markup() ? Value::Markup(std::move(s))
                              : Value::Str(std::move(s));
}

Value StrList(const Value& receiver, const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(StrLike(receiver, p));
  return Value::MakeList(std::move(items));
}

template <typename Pred>
bool AllCodePoints(std::string_view s, Pred pred) {
  if (s.empty()) return false;
  for (char32_t cp : DecodeUtf8(s)) {
    if (!pred(cp)) return false;
  }
  return true;
}

// Python str.format: {} {0} {name} {name.attr} {name[key]}, !r/!s and a
// [[fill]align][sign][0][width][.precision][type] spec.
Result<std::string> StrFormat(Renderer& r, const std::string& fmt,
                              const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return ValueError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      return ValueError("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    char conversion = 0;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 1 < field.size()) conversion = field[bang + 1];
      field.resize(bang);
    }
    // Split off attribute / index accessors.
    size_t acc = field.find_first_of(".[");
    std::string head = field.substr(0, acc);
    Value value;
    if (head.empty()) {
      if (auto_index >= args.positional.size()) {
        return Status::InvalidArgument(
            "IndexError: Replacement index " + std::to_string(auto_index) +
            " out of range for positional args tuple");
      }
      value = args.positional[auto_index++];
    } else if (std::all_of(head.begin(), head.end(),
                           [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const std::optional<int64_t> parsed = ParseDigits(head);
      const size_t idx = parsed ? static_cast<size_t>(*parsed) : SIZE_MAX;
      if (idx >= args.positional.size()) {
        return Status::InvalidArgument(
            "IndexError: Replacement index " + head +
            " out of range for positional args tuple");
      }
      value = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, v] : args.keyword) {
        if (k == head) {
          value = v;
          found = true;
        }
      }
      if (!found) return Status::InvalidArgument("KeyError: '" + head + "'");
    }
    while (acc != std::string::npos && acc < field.size()) {
      if (field[acc] == '.') {
        const size_t e = field.find_first_of(".[", acc + 1);
        RL_ASSIGN_OR_RETURN(
            value,
            r.GetAttr(value, field.substr(acc + 1, e == std::string::npos
                                                       ? std::string::npos
                                                       : e - acc - 1)));
        acc = e;
      } else {
        const size_t e = field.find(']', acc);
        if (e == std::string::npos)
          return ValueError("Missing ']' in format string");
        std::string key = field.substr(acc + 1, e - acc - 1);
        const std::optional<int64_t> index = ParseDigits(key);
        Value k = index ? Value::Int(*index) : Value::Str(key);
        RL_ASSIGN_OR_RETURN(value, r.GetItem(value, k));
        acc = e + 1;
      }
    }
    if (value.is_undefined()) return FailUndefined(value);
    std::string text;
    char type = 0;
    // Parse the spec.
    char fill = ' ';
    char align = 0;
    char sign = 0;
    int width = -1;
    int precision = -1;
    size_t p = 0;
    std::u32string spec_cps = DecodeUtf8(spec);
    std::string fill_str = " ";
    if (spec_cps.size() >= 2 && (spec_cps[1] == '<' || spec_cps[1] == '>' ||
                                 spec_cps[1] == '^' || spec_cps[1] == '=')) {
      fill_str.clear();
      AppendUtf8(spec_cps[0], &fill_str);
      align = static_cast<char>(spec_cps[1]);
      spec = EncodeUtf8(std::u32string_view(spec_cps).substr(2));
    } else if (!spec.empty() && (spec[0] == '<' || spec[0] == '>' ||
                                 spec[0] == '^' || spec[0] == '=')) {
      align = spec[0];
      p = 1;
    }
    (void)fill;
    if (p < spec.size() && (spec[p] == '+' || spec[p] == '-' || spec[p] == ' '))
      sign = spec[p++];
    if (p < spec.size() && spec[p] == '0') {
      if (align == 0) {
        align = '=';
        fill_str = "0";
      }
      ++p;
    }
    while (p < spec.size() && spec[p] >= '0' && spec[p] <= '9') {
      width = std::min((width < 0 ? 0 : width) * 10 + (spec[p++] - '0'), 4096);
    }
    if (p < spec.size() && spec[p] == '.') {
      ++p;
      precision = 0;
      while (p < spec.size() && spec[p] >= '0' && spec[p] <= '9') {
        precision = std::min(precision * 10 + (spec[p++] - '0'), 100);
      }
    }
    if (p < spec.size()) type = spec[p++];
    if (p != spec.size()) return ValueError("Invalid format specifier");
    const bool numeric = value.is_number() && conversion == 0;
    if (conversion == 'r') {
      text = Repr(value);
    } else if (!numeric || type == 's') {
      text = ToStr(value);
      if (precision >= 0) {
        std::u32string cps = DecodeUtf8(text);
        if (static_cast<int64_t>(cps.size()) > precision)
          text = EncodeUtf8(std::u32string_view(cps).substr(0, precision));
      }
    } else {
      char buf[256];
      std::string f = "%";
      if (sign == '+' || sign == ' ') f.push_back(sign);
      if (type == 'd' || (type == 0 && !value.is_float())) {
        if (value.is_float())
          return ValueError(
              "Unknown format code 'd' for object of type 'float'");
        std::snprintf(buf, sizeof(buf), (f + "lld").c_str(),
                      static_cast<long long>(value.int_value()));
        text = buf;
      } else if (type == 0) {
        text = ToStr(value);
        if (precision >= 0) {
          std::snprintf(buf, sizeof(buf), (f + ".*g").c_str(), precision,
                        value.AsDouble());
          text = buf;
        } else if (sign == '+' && value.AsDouble() >= 0) {
          text = "+" + text;
        }
      } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' ||
                 type == 'g' || type == 'G' || type == '%') {
        double d = value.AsDouble();
        if (type == '%') d *= 100;
        std::snprintf(buf, sizeof(buf),
                      (f + ".*" + (type == '%' ? 'f' : type)).c_str(),
                      precision >= 0 ? precision : 6, d);
        text = buf;
        if (type == '%') text += "%";
      } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
        if (!(value.is_int() || value.is_bool()))
          return ValueError("Unknown format code");
        const int64_t iv = value.int_value();
        unsigned long long mag =
            iv < 0 ? -static_cast<unsigned long long>(iv) : iv;
        if (type == 'b') {
          std::string bits;
          do {
            bits.insert(bits.begin(), static_cast<char>('0' + (mag & 1)));
            mag >>= 1;
          } while (mag);
          text = bits;
        } else {
          std::snprintf(buf, sizeof(buf),
                        type == 'o' ? "%llo" : (type == 'x' ? "%llx" : "%llX"),
                        mag);
          text = buf;
        }
        if (iv < 0) text = "-" + text;
      } else {
        return ValueError(std::string("Unknown format code '") + type + "'");
      }
    }
    const int64_t len = static_cast<int64_t>(CountCodePoints(text));
    if (width > len) {
      const int64_t pad = width - len;
      if (align == 0) align = numeric ? '>' : '<';
      auto repeat = [&](int64_t n) {
        std::string s;
        for (int64_t k = 0; k < n; ++k) s += fill_str;
        return s;
      };
      if (align == '<') {
        text += repeat(pad);
      } else if (align == '>') {
        text = repeat(pad) + text;
      } else if (align == '^') {
        text = repeat(pad / 2) + text + repeat(pad - pad / 2);
      } else {  // '=': after the sign
        const size_t s = (!text.empty() &&
                          (text[0] == '-' || text[0] == '+' || text[0] == ' '))
                             ? 1
                             : 0;
        text = text.substr(0, s) + repeat(pad) + text.substr(s);
      }
    }
    out += text;
    RL_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
  }
  return out;
}

Result<Value> StrMethod(Renderer& r, const Value& self, std::string_view name,
                        CallArgs& args) {
  const std::string& s = self.str();
  const std::string what = "str." + std::string(name) + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder b(what, args, {"chars"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(auto chars, CharsArg(b.Get(0), name));
    return StrLike(self, PyStrip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgBinder b(what, args, {"sep", "maxsplit"});
    RL_RETURN_IF_ERROR(b.status());
    int64_t maxsplit = -1;
    if (const Value* m = b.Get(1)) {
      RL_ASSIGN_OR_RETURN(maxsplit, ToIndex(*m, "maxsplit"));
    }
    const Value* sep = b.Get(0);
    std::vector<std::string> parts;
    if (sep == nullptr || sep->is_none()) {
      parts = SplitWhitespace(s, maxsplit, name == "rsplit");
    } else {
      RL_ASSIGN_OR_RETURN(std::string sep_s, StrArg(sep, "sep"));
      if (sep_s.empty()) return ValueError("empty separator");
      parts = SplitSep(s, sep_s, maxsplit, name == "rsplit");
    }
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(parts.size())));
    return StrList(self, parts);
  }
  if (name == "splitlines") {
    ArgBinder b(what, args, {"keepends"});
    RL_RETURN_IF_ERROR(b.status());
    return StrList(self, PySplitLines(s));
  }
  if (name == "startswith" || name == "endswith") {
    ArgBinder b(what, args, {"prefix", "start", "end"});
    RL_RETURN_IF_ERROR(b.status());
    const Value* p = b.Get(0);
    if (p == nullptr)
      return TypeError(what + " takes at least 1 argument (0 given)");
    RL_ASSIGN_OR_RETURN(auto window, Window(s, b.Get(1), b.Get(2)));
    std::string_view sub =
        std::string_view(s).substr(window.first, window.second - window.first);
    std::vector<Value> candidates;
    if (p->is_tuple()) {
      candidates = p->items();
    } else if (p->is_string()) {
      candidates.push_back(*p);
    } else {
      return TypeError(std::string(name) +
                       " first arg must be str or a tuple of str, not " +
                       TypeName(*p));
    }
    for (const Value& c : candidates) {
      if (!c.is_string())
        return TypeError("tuple for " + std::string(name) +
                         " must only contain str");
      const std::string& x = c.str();
      if (name == "startswith" ? sub.substr(0, x.size()) == x
                               : (sub.size() >= x.size() &&
                                  sub.substr(sub.size() - x.size()) == x)) {
        return Value::Bool(true);
      }
    }
    return Value::Bool(false);
  }
  if (name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize" || name == "swapcase" || name == "casefold") {
    ArgBinder b(what, args, {});
    RL_RETURN_IF_ERROR(b.status());
    if (name == "upper") return StrLike(self, PyUpper(s));
    if (name == "lower" || name == "casefold") return StrLike(self, PyLower(s));
    if (name == "title") return StrLike(self, PyTitle(s));
    if (name == "capitalize") return StrLike(self, PyCapitalize(s));
    std::string out;
    for (char32_t cp : DecodeUtf8(s))
      AppendUtf8(IsUpper(cp) ? ToLower(cp) : ToUpper(cp), &out);
    return StrLike(self, std::move(out));
  }
  if (name == "replace") {
    ArgBinder b(what, args, {"old", "new", "count"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(std::string old_s,
                        StrArg(b.Get(0), "replace() argument 1"));
    RL_ASSIGN_OR_RETURN(std::string new_s,
                        StrArg(b.Get(1), "replace() argument 2"));
    int64_t count = -1;
    if (const Value* c = b.Get(2)) {
      RL_ASSIGN_OR_RETURN(count, ToIndex(*c, "count"));
    }
    std::optional<std::string> out =
        PyReplace(s, old_s, new_s, count, r.options().limits.max_output_bytes);
    if (!out) return r.CheckStringSize(r.options().limits.max_output_bytes + 1);
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(out->size() / 64)));
    return StrLike(self, std::move(*out));
  }
  if (name == "find" || name == "rfind" || name == "index" ||
      name == "rindex" || name == "count") {
    ArgBinder b(what, args, {"sub", "start", "end"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(std::string sub, StrArg(b.Get(0), "must be str"));
    RL_ASSIGN_OR_RETURN(auto window, Window(s, b.Get(1), b.Get(2)));
    std::string_view hay =
        std::string_view(s).substr(window.first, window.second - window.first);
    if (name == "count") {
      if (sub.empty())
        return Value::Int(static_cast<int64_t>(CountCodePoints(hay)) + 1);
      int64_t n = 0;
      for (size_t p = hay.find(sub); p != std::string_view::npos;
           p = hay.find(sub, p + sub.size()))
        ++n;
      return Value::Int(n);
    }
    const size_t p =
        (name == "find" || name == "index") ? hay.find(sub) : hay.rfind(sub);
    if (p == std::string_view::npos) {
      if (name == "index" || name == "rindex")
        return ValueError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CodePointIndex(s, window.first + p));
  }
  if (name == "join") {
    ArgBinder b(what, args, {"iterable"});
    RL_RETURN_IF_ERROR(b.status());
    if (!b.has(0))
      return TypeError("str.join() takes exactly one argument (0 given)");
    RL_ASSIGN_OR_RETURN(auto items, r.Iterate(*b.Get(0)));
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      const Value& item = (*items)[i];
      if (!item.is_string()) {
        return TypeError("sequence item " + std::to_string(i) +
                         ": expected str instance, " + TypeName(item) +
                         " found");
      }
      if (i) out += s;
      out += self.is_markup() && !item.is_markup() ? HtmlEscape(item.str())
                                                   : item.str();
      RL_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
    }
    return StrLike(self, std::move(out));
  }
  if (name.substr(0, 2) == "is") {
    ArgBinder b(what, args, {});
    RL_RETURN_IF_ERROR(b.status());
    if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
      return Value::Bool(AllCodePoints(s, IsDigit));
    }
    if (name == "isalpha") return Value::Bool(AllCodePoints(s, IsAlpha));
    if (name == "isalnum") return Value::Bool(AllCodePoints(s, IsAlnum));
    if (name == "isspace") return Value::Bool(AllCodePoints(s, IsSpace));
    bool any_cased = false;
    bool upper_ok = true;
    bool lower_ok = true;
    bool title_ok = true;
    bool prev_cased = false;
    for (char32_t cp : DecodeUtf8(s)) {
      if (IsUpper(cp)) {
        any_cased = true;
        lower_ok = false;
        if (prev_cased) title_ok = false;
        prev_cased = true;
      } else if (IsLower(cp)) {
        any_cased = true;
        upper_ok = false;
        if (!prev_cased) title_ok = false;
        prev_cased = true;
      } else {
        prev_cased = false;
      }
    }
    if (name == "isupper") return Value::Bool(any_cased && upper_ok);
    if (name == "islower") return Value::Bool(any_cased && lower_ok);
    return Value::Bool(any_cased && title_ok);
  }
  if (name == "format") {
    RL_ASSIGN_OR_RETURN(std::string out, StrFormat(r, s, args));
    return StrLike(self, std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ArgBinder b(what, args, {"width", "fillchar"});
    RL_RETURN_IF_ERROR(b.status());
    if (!b.has(0))
      return TypeError(what + " takes at least 1 argument (0 given)");
    RL_ASSIGN_OR_RETURN(int64_t width, ToIndex(*b.Get(0), "width"));
    std::string fill = " ";
    if (const Value* f = b.Get(1)) {
      if (!f->is_string() || CountCodePoints(f->str()) != 1) {
        return TypeError(
            "The fill character must be exactly one character long");
      }
      fill = f->str();
    }
    const int64_t len = static_cast<int64_t>(CountCodePoints(s));
    if (width <= len) return self;
    RL_RETURN_IF_ERROR(
        r.CheckStringSize(static_cast<size_t>(width) * fill.size()));
    const int64_t pad = width - len;
    int64_t left = 0;
    if (name == "rjust") {
      left = pad;
    } else if (name == "center") {
      // CPython: left = pad / 2 + (pad & width & 1)
      left = pad / 2 + (pad & width & 1);
    }
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += fill;
    out += s;
    for (int64_t i = 0; i < pad - left; ++i) out += fill;
    return StrLike(self, std::move(out));
  }
  if (name == "zfill") {
    ArgBinder b(what, args, {"width"});
    RL_RETURN_IF_ERROR(b.status());
    if (!b.has(0))
      return TypeError("zfill() takes exactly one argument (0 given)");
    RL_ASSIGN_OR_RETURN(int64_t width, ToIndex(*b.Get(0), "width"));
    const int64_t len = static_cast<int64_t>(CountCodePoints(s));
    if (width <= len) return self;
    RL_RETURN_IF_ERROR(r.CheckStringSize(static_cast<size_t>(width)));
    const size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    return StrLike(self, s.substr(0, sign) + std::string(width - len, '0') +
                             s.substr(sign));
  }
  if (name == "partition" || name == "rpartition") {
    ArgBinder b(what, args, {"sep"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(std::string sep, StrArg(b.Get(0), "sep"));
    if (sep.empty()) return ValueError("empty separator");
    const size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (p == std::string::npos) {
      if (name == "partition") {
        parts = {StrLike(self, s), StrLike(self, ""), StrLike(self, "")};
      } else {
        parts = {StrLike(self, ""), StrLike(self, ""), StrLike(self, s)};
      }
    } else {
      parts = {StrLike(self, s.substr(0, p)), StrLike(self, sep),
               StrLike(self, s.substr(p + sep.size()))};
    }
    return Value::MakeTuple(std::move(parts));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder b(what, args, {"affix"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(std::string affix, StrArg(b.Get(0), "argument"));
    if (name == "removeprefix") {
      if (s.compare(0, affix.size(), affix) == 0)
        return StrLike(self, s.substr(affix.size()));
    } else if (s.size() >= affix.size() &&
               s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
      return StrLike(self, s.substr(0, s.size() - affix.size()));
    }
    return self;
  }
  if (name == "expandtabs") {
    ArgBinder b(what, args, {"tabsize"});
    RL_RETURN_IF_ERROR(b.status());
    int64_t tab = 8;
    if (const Value* t = b.Get(0)) {
      RL_ASSIGN_OR_RETURN(tab, ToIndex(*t, "tabsize"));
    }
    tab = std::clamp<int64_t>(tab, 0, 4096);
    std::string out;
    int64_t col = 0;
    for (char32_t cp : DecodeUtf8(s)) {
      if (cp == '\t') {
        if (tab > 0) {
          const int64_t n = tab - col % tab;
          out.append(n, ' ');
          col += n;
        }
      } else {
        AppendUtf8(cp, &out);
        col = (cp == '\n' || cp == '\r') ? 0 : col + 1;
      }
      RL_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
    }
    return StrLike(self, std::move(out));
  }
  return Status::InvalidArgument(
      "AttributeError: 'str' object has no attribute '" + std::string(name) +
      "'");
}

Result<Value> DictMethod(Renderer& r, const Value& self, std::string_view name,
                         CallArgs& args) {
  const Dict& d = self.dict();
  const std::string what = "dict." + std::string(name) + "()";
  if (name == "get") {
    ArgBinder b(what, args, {"key", "default"});
    RL_RETURN_IF_ERROR(b.status());
    if (!b.has(0)) return TypeError("get expected at least 1 argument, got 0");
    std::string key;
    if (!Dict::KeyOf(*b.Get(0), &key))
      return TypeError("unhashable type: '" + TypeName(*b.Get(0)) + "'");
    if (const Value* v = d.Find(*b.Get(0))) return *v;
    return b.GetOr(1, Value::None());
  }
  ArgBinder b(what, args, {});
  RL_RETURN_IF_ERROR(b.status());
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(d.size())));
  std::vector<Value> out;
  out.reserve(d.size());
  if (name == "copy") return self;
  for (const auto& [k, v] : d.items()) {
    if (name == "items") {
      out.push_back(Value::MakeTuple({k, v}));
    } else if (name == "keys") {
      out.push_back(k);
    } else {
      out.push_back(v);
    }
  }
  return Value::MakeList(std::move(out));
}

Result<Value> ListMethod(Renderer& r, const Value& self, std::string_view name,
                         CallArgs& args) {
  const std::string what = "list." + std::string(name) + "()";
  if (name == "copy") {
    ArgBinder b(what, args, {});
    RL_RETURN_IF_ERROR(b.status());
    return self;
  }
  ArgBinder b(what, args, {"value"});
  RL_RETURN_IF_ERROR(b.status());
  if (!b.has(0))
    return TypeError(what + " takes exactly one argument (0 given)");
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(self.items().size())));
  int64_t count = 0;
  for (size_t i = 0; i < self.items().size(); ++i) {
    if (Equals(self.items()[i], *b.Get(0))) {
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++count;
    }
  }
  if (name == "index") return ValueError(Repr(*b.Get(0)) + " is not in list");
  return Value::Int(count);
}

Result<Value> LoopMethod(Renderer& r, const Value& self, std::string_view name,
                         CallArgs& args) {
  LoopState& loop = self.loop();
  if (name == "cycle") {
    if (!args.keyword.empty())
      return TypeError("loop.cycle() takes no keyword arguments");
    if (args.positional.empty()) return TypeError("no items for cycling given");
    return args
        .positional[loop.index0 % static_cast<int64_t>(args.positional.size())];
  }
  // changed(*values): true when the values differ from the previous call.
  Value current = Value::MakeTuple(args.positional);
  const bool changed =
      !loop.changed_called || !Equals(loop.changed_last, current);
  loop.changed_called = true;
  loop.changed_last = std::move(current);
  return Value::Bool(changed);
}

}  // namespace

bool HasMethod(const Value& obj, std::string_view name, bool* unsafe) {
  *unsafe = false;
  switch (obj.kind()) {
    case Value::Kind::kString:
      return In(kStrMethods, name);
    case Value::Kind::kDict:
      if (In(kDictUnsafe, name)) *unsafe = true;
      return *unsafe || In(kDictMethods, name);
    case Value::Kind::kList:
      if (obj.is_tuple()) return name == "index" || name == "count";
      if (In(kListUnsafe, name)) *unsafe = true;
      return *unsafe || In(kListMethods, name);
    case Value::Kind::kLoop:
      return name == "cycle" || name == "changed";
    default:
      return false;
  }
}

Result<Value> CallMethod(Renderer& r, const Value& obj, std::string_view name,
                         CallArgs& args) {
  bool unsafe = false;
  if (!HasMethod(obj, name, &unsafe)) {
    return Status::InvalidArgument("AttributeError: '" + TypeName(obj) +
                                   "' object has no attribute '" +
                                   std::string(name) + "'");
  }
  if (unsafe) {
    return Status::InvalidArgument("SecurityError: access to attribute '" +
                                   std::string(name) + "' of '" +
                                   TypeName(obj) + "' object is unsafe.");
  }
  RL_RETURN_IF_ERROR(r.Charge(1));
  switch (obj.kind()) {
    case Value::Kind::kString:
      if (obj.is_markup()) {
        for (const MarkupEscapedArg& e : kMarkupEscaped) {
          if (e.method != name) continue;
          CallArgs escaped = args;
          auto escape = [](Value* v) {
            if (v->is_string() && !v->is_markup())
              *v = Value::Markup(HtmlEscape(v->str()));
          };
          if (escaped.positional.size() > e.index)
            escape(&escaped.positional[e.index]);
          for (auto& [k, v] : escaped.keyword) {
            if (k == e.keyword) escape(&v);
          }
          return StrMethod(r, obj, name, escaped);
        }
      }
      return StrMethod(r, obj, name, args);
    case Value::Kind::kDict:
      return DictMethod(r, obj, name, args);
    case Value::Kind::kList:
      return ListMethod(r, obj, name, args);
    case Value::Kind::kLoop:
      return LoopMethod(r, obj, name, args);
    default:
      return Status::Internal("no methods");
  }
}

Value BoundMethod(const Value& obj, std::string_view name) {
  std::string method(name);
  return Value::MakeCallable(TypeName(obj) + "." + method,
                             [obj, method](Renderer& r, CallArgs& args) {
                               return CallMethod(r, obj, method, args);
                             });
}

// ---------------------------------------------------------------------------
// String helpers

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars,
                    bool left, bool right) {
  if (IsAscii(s) && (!chars || IsAscii(*chars))) {
    auto strip_char = [&](char c) {
      if (!chars)
        return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
      return chars->find(c) != std::string::npos;
    };
    size_t b = 0;
    size_t e = s.size();
    if (left) {
      while (b < e && strip_char(s[b])) ++b;
    }
    if (right) {
      while (e > b && strip_char(s[e - 1])) --e;
    }
    return std::string(s.substr(b, e - b));
  }
  std::u32string cps = DecodeUtf8(s);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip_cp = [&](char32_t cp) {
    if (!chars) return IsSpace(cp);
    return set.find(cp) != std::u32string::npos;
  };
  size_t b = 0;
  size_t e = cps.size();
  if (left) {
    while (b < e && strip_cp(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_cp(cps[e - 1])) --e;
  }
  return EncodeUtf8(std::u32string_view(cps).substr(b, e - b));
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s)
      out.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t cp : DecodeUtf8(s)) {
    if (cp == 0xDF) {
      out += "SS";  // ß has no single upper-case letter
    } else {
      AppendUtf8(ToUpper(cp), &out);
    }
  }
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s)
      out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c);
    return out;
  }
  for (char32_t cp : DecodeUtf8(s)) AppendUtf8(ToLower(cp), &out);
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::u32string cps = DecodeUtf8(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cps.size(); ++i)
    AppendUtf8(i == 0 ? ToUpper(cps[i]) : ToLower(cps[i]), &out);
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (char32_t cp : DecodeUtf8(s)) {
    if (IsCased(cp)) {
      AppendUtf8(prev_cased ? ToLower(cp) : ToUpper(cp), &out);
      prev_cased = true;
    } else {
      AppendUtf8(cp, &out);
      prev_cased = false;
    }
  }
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> out;
  std::u32string cps = DecodeUtf8(s);
  std::u32string cur;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t cp = cps[i];
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C ||
                     cp == 0x1C || cp == 0x1D || cp == 0x1E || cp == 0x85 ||
                     cp == 0x2028 || cp == 0x2029;
    if (!brk) {
      cur.push_back(cp);
      continue;
    }
    if (cp == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    out.push_back(EncodeUtf8(cur));
    cur.clear();
  }
  if (!cur.empty()) out.push_back(EncodeUtf8(cur));
  return out;
}

std::optional<std::string> PyReplace(std::string_view s, std::string_view old_s,
                                     std::string_view new_s, int64_t count,
                                     size_t max_bytes) {
  // Count the replacements first so that the size can be checked before
  // anything is built.
  uint64_t occurrences = 0;
  if (old_s.empty()) {
    occurrences = CountCodePoints(s) + 1;
  } else {
    for (size_t p = s.find(old_s); p != std::string_view::npos;
         p = s.find(old_s, p + old_s.size())) {
      ++occurrences;
    }
  }
  if (count >= 0)
    occurrences = std::min<uint64_t>(occurrences, static_cast<uint64_t>(count));
  const uint64_t size =
      s.size() + occurrences * new_s.size() - occurrences * old_s.size();
  if (size > max_bytes) return std::nullopt;
  std::string out;
  out.reserve(size);
  if (old_s.empty()) {
    // Python inserts `new` before every code point and at the end.
    uint64_t done = 0;
    for (char32_t cp : DecodeUtf8(s)) {
      if (done < occurrences) {
        out += new_s;
        ++done;
      }
      AppendUtf8(cp, &out);
    }
    if (done < occurrences) out += new_s;
    return out;
  }
  size_t start = 0;
  for (uint64_t done = 0; done < occurrences; ++done) {
    const size_t p = s.find(old_s, start);
    out.append(s.substr(start, p - start));
    out.append(new_s);
    start = p + old_s.size();
  }
  out.append(s.substr(start));
  return out;
}

std::optional<int64_t> ParseDigits(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;  // 18 digits always fit
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace redline::model::chat::jinja

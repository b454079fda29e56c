// Python methods of str, dict, list and Jinja's loop object, as the
// immutable sandbox exposes them.
#include <string.h>

#include <algorithm>
#include <array>
#include <limits>

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
  const bool ascii = IsAscii(s);
  const int64_t n = static_cast<int64_t>(ascii ? s.size() : CountCodePoints(s));
  if (cp < 0) cp = std::max<int64_t>(0, cp + n);
  cp = std::min(cp, n);
  return ascii ? static_cast<size_t>(cp)
               : CodePointOffset(s, static_cast<size_t>(cp));
}

// The [start, end) byte window of a str method's optional start/end args.
// O(size of s) when either is given (the caller charges it).
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

// Byte ranges of the whitespace-separated words of `s`.
std::vector<std::pair<size_t, size_t>> Words(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> words;
  bool in_word = false;
  const CodePoints cps(s);
  for (CodePoints::Iterator it = cps.begin(); it != cps.end(); ++it) {
    const bool space = IsSpace(*it);
    if (!space && !in_word) words.emplace_back(it.offset(), s.size());
    if (space && in_word) words.back().second = it.offset();
    in_word = !space;
  }
  return words;
}

size_t CountWords(std::string_view s) {
  size_t n = 0;
  bool in_word = false;
  for (char32_t cp : CodePoints(s)) {
    const bool space = IsSpace(cp);
    n += !space && !in_word;
    in_word = !space;
  }
  return n;
}

// Python str.split() / rsplit() without a separator.
std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit,
                                         bool from_right) {
  const std::vector<std::pair<size_t, size_t>> words = Words(s);
  const size_t n = words.size();
  auto word = [&](size_t i) {
    return std::string(
        s.substr(words[i].first, words[i].second - words[i].first));
  };
  std::vector<std::string> out;
  if (maxsplit < 0 || static_cast<uint64_t>(maxsplit) >= n) {
    for (size_t i = 0; i < n; ++i) out.push_back(word(i));
    return out;
  }
  const size_t k = static_cast<size_t>(maxsplit);
  if (!from_right) {
    // The rest keeps its inner and trailing whitespace.
    for (size_t i = 0; i < k; ++i) out.push_back(word(i));
    out.emplace_back(s.substr(words[k].first));
  } else {
    out.emplace_back(s.substr(0, words[n - k - 1].second));
    for (size_t i = n - k; i < n; ++i) out.push_back(word(i));
  }
  return out;
}

// Non-overlapping occurrences of `sep` in `s`, at most `maxsplit` (< 0: all)
// and at most `limit`.
size_t CountSep(std::string_view s, std::string_view sep, int64_t maxsplit,
                size_t limit = std::numeric_limits<size_t>::max()) {
  const size_t most =
      maxsplit < 0 ? limit : std::min(limit, static_cast<size_t>(maxsplit));
  size_t n = 0;
  for (size_t p = FindSub(s, sep, 0); p != std::string_view::npos && n < most;
       p = FindSub(s, sep, p + sep.size())) {
    ++n;
  }
  return n;
}

// More parts than this cannot be held; counting stops there.
size_t MaxParts(Renderer& r) {
  return r.meter()->memory_headroom() / (sizeof(Value) + StringValueBytes(0)) +
         1;
}

std::string Reversed(std::string_view s) {
  return std::string(s.rbegin(), s.rend());
}

std::vector<std::string> SplitSep(std::string_view s, std::string_view sep,
                                  int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (from_right) {
    // Matches taken from the right differ from those from the left where
    // they overlap ('aaa'.rsplit('aa')); splitting the reversed string from
    // the left finds them in linear time.
    const std::string rs = Reversed(s);
    const std::string rsep = Reversed(sep);
    std::vector<std::string> parts = SplitSep(rs, rsep, maxsplit, false);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it)
      out.push_back(Reversed(*it));
    return out;
  }
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t p = FindSub(s, sep, start);
    if (p == std::string_view::npos) break;
    out.emplace_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  out.emplace_back(s.substr(start));
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
  for (char32_t cp : CodePoints(s)) {
    if (!pred(cp)) return false;
  }
  return true;
}

// Python str.format: {} {0} {name} {name.attr} {name[key]}, !r/!s and a
// [[fill]align][sign][0][width][.precision][type] spec.
Result<std::string> StrFormat(Renderer& r, const std::string& fmt,
                              const CallArgs& args) {
  RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(fmt.size())));
  // A width beyond the output limit could only build a string the limit
  // refuses; it is refused before anything is built.
  const int64_t max_field = static_cast<int64_t>(std::min<size_t>(
      r.options().limits.max_output_bytes, std::numeric_limits<int>::max()));
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
      RL_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
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
    char align = 0;
    char sign = 0;
    int64_t width = -1;
    int64_t precision = -1;
    size_t p = 0;
    std::string fill_str = " ";
    auto is_align = [](char32_t a) {
      return a == '<' || a == '>' || a == '^' || a == '=';
    };
    size_t second = 0;
    if (!spec.empty()) NextCodePoint(spec, &second);
    if (second < spec.size() &&
        is_align(static_cast<unsigned char>(spec[second]))) {
      fill_str = spec.substr(0, second);
      align = spec[second];
      spec.erase(0, second + 1);
    } else if (!spec.empty() && is_align(static_cast<unsigned char>(spec[0]))) {
      align = spec[0];
      p = 1;
    }
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
      width = (width < 0 ? 0 : width) * 10 + (spec[p++] - '0');
      if (width > max_field) return r.TooLongError();
    }
    if (p < spec.size() && spec[p] == '.') {
      ++p;
      precision = 0;
      while (p < spec.size() && spec[p] >= '0' && spec[p] <= '9') {
        precision = precision * 10 + (spec[p++] - '0');
        if (precision > max_field) return r.TooLongError();
      }
    }
    if (p < spec.size()) type = spec[p++];
    if (p != spec.size()) return ValueError("Invalid format specifier");
    const bool numeric = value.is_number() && conversion == 0;
    if (conversion == 'r') {
      RL_ASSIGN_OR_RETURN(text, r.ReprOf(value));
    } else if (!numeric || type == 's') {
      RL_ASSIGN_OR_RETURN(text, r.Str(value));
      if (precision >= 0)
        text.resize(CodePointOffset(text, static_cast<size_t>(precision)));
    } else {
      // %f of 1e308 has 309 digits before the point.
      RL_RETURN_IF_ERROR(r.ReserveString(
          static_cast<size_t>(std::max<int64_t>(precision, 0)) + 400));
      const int digits = static_cast<int>(precision >= 0 ? precision : 6);
      std::string f = "%";
      if (sign == '+' || sign == ' ') f.push_back(sign);
      if (type == 'd' || (type == 0 && !value.is_float())) {
        if (value.is_float())
          return ValueError(
              "Unknown format code 'd' for object of type 'float'");
        text = CFormat(f + "lld", static_cast<long long>(value.int_value()));
      } else if (type == 0) {
        text = ToStr(value);
        if (precision >= 0) {
          text = CFormat(f + ".*g", digits, value.AsDouble());
        } else if (sign == '+' && value.AsDouble() >= 0) {
          text = "+" + text;
        }
      } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' ||
                 type == 'g' || type == 'G' || type == '%') {
        double d = value.AsDouble();
        if (type == '%') d *= 100;
        text = CFormat(f + ".*" + (type == '%' ? 'f' : type), digits, d);
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
          text = CFormat(type == 'o' ? "%llo" : (type == 'x' ? "%llx" : "%llX"),
                         mag);
        }
        if (iv < 0) text = "-" + text;
      } else {
        return ValueError(std::string("Unknown format code '") + type + "'");
      }
    }
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(text.size())));
    const int64_t len = static_cast<int64_t>(CountCodePoints(text));
    if (width > len) {
      const int64_t pad = width - len;
      RL_RETURN_IF_ERROR(r.ReserveString(
          text.size() + static_cast<size_t>(pad) * fill_str.size()));
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
    RL_RETURN_IF_ERROR(r.CheckStringSize(out.size() + text.size()));
    RL_RETURN_IF_ERROR(r.Reserve(out.size() + text.size()));
    out += text;
  }
  return out;
}

// The strings of `parts` as a list, after reserving what it will hold.
Result<Value> StrListOf(Renderer& r, const Value& receiver,
                        const std::vector<std::string>& parts) {
  RL_RETURN_IF_ERROR(r.ReserveList(parts.size()));
  for (const auto& part : parts)
    RL_RETURN_IF_ERROR(r.Reserve(StringValueBytes(part.size())));
  return StrList(receiver, parts);
}

// Before splitting `s` into `n` parts: the parts' strings (at most the
// bytes of `s` in all), their list, and the byte ranges or strings of the
// intermediate vectors.
Status ReserveParts(Renderer& r, std::string_view s, size_t n) {
  if (n > r.meter()->budget().max_memory_bytes / StringValueBytes(0))
    return r.OutOfMemoryError();
  RL_RETURN_IF_ERROR(r.ReserveList(n));
  return r.Reserve(2 * (n * StringValueBytes(0) + s.size()));
}

Result<Value> StrMethod(Renderer& r, const Value& self, std::string_view name,
                        CallArgs& args) {
  const std::string& s = self.str();
  const int64_t size = static_cast<int64_t>(s.size());
  const std::string what = "str." + std::string(name) + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder b(what, args, {"chars"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(auto chars, CharsArg(b.Get(0), name));
    const size_t chars_size = chars ? chars->size() : 0;
    RL_RETURN_IF_ERROR(r.Charge(size + static_cast<int64_t>(chars_size)));
    // The result, and the code points of `chars` looked up while stripping.
    RL_RETURN_IF_ERROR(r.Reserve(StringValueBytes(s.size()) + 4 * chars_size));
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
    // Count the parts first, so that their memory is known before any is
    // made.
    std::vector<std::string> parts;
    if (sep == nullptr || sep->is_none()) {
      RL_RETURN_IF_ERROR(r.Charge(size));
      const size_t n = CountWords(s);
      RL_RETURN_IF_ERROR(r.Charge(size));
      RL_RETURN_IF_ERROR(ReserveParts(r, s, n + 1));
      RL_RETURN_IF_ERROR(r.Reserve(n * sizeof(std::pair<size_t, size_t>)));
      parts = SplitWhitespace(s, maxsplit, name == "rsplit");
    } else {
      RL_ASSIGN_OR_RETURN(std::string sep_s, StrArg(sep, "sep"));
      if (sep_s.empty()) return ValueError("empty separator");
      RL_RETURN_IF_ERROR(
          r.Charge(2 * (size + static_cast<int64_t>(sep_s.size()))));
      const size_t n =
          CountSep(s, sep_s, name == "rsplit" ? -1 : maxsplit, MaxParts(r));
      // rsplit works on reversed copies.
      RL_RETURN_IF_ERROR(ReserveParts(r, s, n + 1));
      RL_RETURN_IF_ERROR(r.Charge(2 * size));
      parts = SplitSep(s, sep_s, maxsplit, name == "rsplit");
    }
    return StrListOf(r, self, parts);
  }
  if (name == "splitlines") {
    ArgBinder b(what, args, {"keepends"});
    RL_RETURN_IF_ERROR(b.status());
    RL_RETURN_IF_ERROR(r.Charge(2 * size));
    size_t n = 0;
    const size_t most = MaxParts(r);
    for (size_t start = 0, next = 0; start < s.size() && n < most;
         start = next) {
      LineEnd(s, start, &next);
      ++n;
    }
    RL_RETURN_IF_ERROR(ReserveParts(r, s, n));
    return StrListOf(r, self, PySplitLines(s));
  }
  if (name == "startswith" || name == "endswith") {
    ArgBinder b(what, args, {"prefix", "start", "end"});
    RL_RETURN_IF_ERROR(b.status());
    const Value* p = b.Get(0);
    if (p == nullptr)
      return TypeError(what + " takes at least 1 argument (0 given)");
    if (b.has(1) || b.has(2)) {
      RL_RETURN_IF_ERROR(r.Charge(size));
    }
    RL_ASSIGN_OR_RETURN(auto window, Window(s, b.Get(1), b.Get(2)));
    std::string_view sub =
        std::string_view(s).substr(window.first, window.second - window.first);
    std::vector<Value> candidates;
    if (p->is_tuple()) {
      RL_RETURN_IF_ERROR(r.ReserveList(p->items().size()));
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
      RL_RETURN_IF_ERROR(
          r.Charge(static_cast<int64_t>(std::min(x.size(), sub.size()))));
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
    // Case mapping keeps the size within a few bytes per code point; the
    // result is checked again when it is used.
    RL_RETURN_IF_ERROR(r.ReserveString(s.size()));
    if (name == "upper") return StrLike(self, PyUpper(s));
    if (name == "lower" || name == "casefold") return StrLike(self, PyLower(s));
    if (name == "title") return StrLike(self, PyTitle(s));
    if (name == "capitalize") return StrLike(self, PyCapitalize(s));
    std::string out;
    out.reserve(s.size());
    for (char32_t cp : CodePoints(s))
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
    RL_ASSIGN_OR_RETURN(std::string out,
                        ReplaceChecked(r, s, old_s, new_s, count));
    return StrLike(self, std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" ||
      name == "rindex" || name == "count") {
    ArgBinder b(what, args, {"sub", "start", "end"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(std::string sub, StrArg(b.Get(0), "must be str"));
    // The window, the search and the code point index of the match each
    // read the string once; rfind copies both strings reversed.
    RL_RETURN_IF_ERROR(
        r.Charge(3 * size + 2 * static_cast<int64_t>(sub.size())));
    RL_ASSIGN_OR_RETURN(auto window, Window(s, b.Get(1), b.Get(2)));
    std::string_view hay =
        std::string_view(s).substr(window.first, window.second - window.first);
    if (name == "count") {
      if (sub.empty())
        return Value::Int(static_cast<int64_t>(CountCodePoints(hay)) + 1);
      return Value::Int(static_cast<int64_t>(CountSep(hay, sub, -1)));
    }
    const bool forward = name == "find" || name == "index";
    if (!forward) {
      RL_RETURN_IF_ERROR(r.Reserve(hay.size() + sub.size()));
    }
    const size_t p =
        forward ? FindSub(hay, sub, 0) : RFindSub(hay, sub, hay.size());
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
    // The size of the result first: a separator repeated a million times
    // must be refused before it is built.
    auto escaped = [&](const Value& item) {
      return self.is_markup() && !item.is_markup();
    };
    uint64_t total = 0;
    RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items->size())));
    for (size_t i = 0; i < items->size(); ++i) {
      const Value& item = (*items)[i];
      if (!item.is_string()) {
        return TypeError("sequence item " + std::to_string(i) +
                         ": expected str instance, " + TypeName(item) +
                         " found");
      }
      if (escaped(item)) {
        RL_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(item.str().size())));
      }
      total += (i ? s.size() : 0) + (escaped(item) ? HtmlEscapedSize(item.str())
                                                   : item.str().size());
      if (total > r.options().limits.max_output_bytes) return r.TooLongError();
    }
    RL_RETURN_IF_ERROR(r.ReserveString(total));
    std::string out;
    out.reserve(total);
    for (size_t i = 0; i < items->size(); ++i) {
      const Value& item = (*items)[i];
      if (i) out += s;
      out += escaped(item) ? HtmlEscape(item.str()) : item.str();
    }
    return StrLike(self, std::move(out));
  }
  if (name.substr(0, 2) == "is") {
    ArgBinder b(what, args, {});
    RL_RETURN_IF_ERROR(b.status());
    RL_RETURN_IF_ERROR(r.Charge(size));
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
    for (char32_t cp : CodePoints(s)) {
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
    RL_RETURN_IF_ERROR(r.Charge(size));
    const int64_t len = static_cast<int64_t>(CountCodePoints(s));
    if (width <= len) return self;
    if (static_cast<uint64_t>(width) > r.options().limits.max_output_bytes)
      return r.TooLongError();
    const int64_t pad = width - len;
    RL_RETURN_IF_ERROR(
        r.ReserveString(s.size() + static_cast<size_t>(pad) * fill.size()));
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
    RL_RETURN_IF_ERROR(r.Charge(size));
    const int64_t len = static_cast<int64_t>(CountCodePoints(s));
    if (width <= len) return self;
    if (static_cast<uint64_t>(width) > r.options().limits.max_output_bytes)
      return r.TooLongError();
    RL_RETURN_IF_ERROR(r.ReserveString(s.size() + static_cast<size_t>(width)));
    const size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    return StrLike(self, s.substr(0, sign) + std::string(width - len, '0') +
                             s.substr(sign));
  }
  if (name == "partition" || name == "rpartition") {
    ArgBinder b(what, args, {"sep"});
    RL_RETURN_IF_ERROR(b.status());
    RL_ASSIGN_OR_RETURN(std::string sep, StrArg(b.Get(0), "sep"));
    if (sep.empty()) return ValueError("empty separator");
    RL_RETURN_IF_ERROR(r.Charge(2 * (size + static_cast<int64_t>(sep.size()))));
    // The three parts, and the reversed copies rpartition searches.
    RL_RETURN_IF_ERROR(r.ReserveList(3));
    RL_RETURN_IF_ERROR(r.Reserve(3 * StringValueBytes(s.size()) + sep.size()));
    const size_t p =
        name == "partition" ? FindSub(s, sep, 0) : RFindSub(s, sep, s.size());
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
    RL_RETURN_IF_ERROR(r.ReserveString(s.size()));
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
    // Measure first, then build what the limits allow.
    RL_RETURN_IF_ERROR(r.Charge(2 * size));
    uint64_t bytes = 0;
    int64_t col = 0;
    for (size_t i = 0, next = 0; i < s.size(); i = next) {
      next = i;
      const char32_t cp = NextCodePoint(s, &next);
      if (cp == '\t') {
        if (tab > 0) {
          const int64_t n = tab - col % tab;
          bytes += static_cast<uint64_t>(n);
          col += n;
        }
      } else {
        bytes += next - i;
        col = (cp == '\n' || cp == '\r') ? 0 : col + 1;
      }
      if (bytes > r.options().limits.max_output_bytes) return r.TooLongError();
    }
    RL_RETURN_IF_ERROR(r.ReserveString(bytes));
    std::string out;
    out.reserve(bytes);
    col = 0;
    for (size_t i = 0, next = 0; i < s.size(); i = next) {
      next = i;
      const char32_t cp = NextCodePoint(s, &next);
      if (cp == '\t') {
        if (tab > 0) {
          const int64_t n = tab - col % tab;
          out.append(n, ' ');
          col += n;
        }
      } else {
        out.append(s, i, next - i);
        col = (cp == '\n' || cp == '\r') ? 0 : col + 1;
      }
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
    // The index copies a string key to look it up.
    RL_RETURN_IF_ERROR(r.Charge(Dict::LookupUnits(*b.Get(0))));
    if (b.Get(0)->is_string()) {
      RL_RETURN_IF_ERROR(r.Reserve(StringValueBytes(b.Get(0)->str().size())));
    }
    if (!Dict::IsHashable(*b.Get(0)))
      return TypeError("unhashable type: '" + TypeName(*b.Get(0)) + "'");
    if (const Value* v = d.Find(*b.Get(0))) return *v;
    return b.GetOr(1, Value::None());
  }
  ArgBinder b(what, args, {});
  RL_RETURN_IF_ERROR(b.status());
  if (name == "copy") return self;
  RL_RETURN_IF_ERROR(r.ReserveList(d.size()));
  if (name == "items") {
    // A two-element tuple per entry.
    RL_RETURN_IF_ERROR(
        r.Reserve(d.size() * (ContainerValueBytes() + 2 * sizeof(Value))));
  }
  std::vector<Value> out;
  out.reserve(d.size());
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
  int64_t count = 0;
  for (size_t i = 0; i < self.items().size(); ++i) {
    RL_ASSIGN_OR_RETURN(bool equal, r.Equal(self.items()[i], *b.Get(0)));
    if (equal) {
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++count;
    }
  }
  if (name == "index")
    return ValueError(ShortRepr(*b.Get(0)) + " is not in list");
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
  RL_RETURN_IF_ERROR(r.ReserveList(args.positional.size()));
  Value current = Value::MakeTuple(args.positional);
  bool changed = true;
  if (loop.changed_called) {
    RL_ASSIGN_OR_RETURN(bool same, r.Equal(loop.changed_last, current));
    changed = !same;
  }
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
          auto escape = [&r](Value* v) -> Status {
            if (v->is_string() && !v->is_markup()) {
              RL_RETURN_IF_ERROR(
                  r.Charge(static_cast<int64_t>(v->str().size())));
              RL_RETURN_IF_ERROR(r.ReserveString(HtmlEscapedSize(v->str())));
              *v = Value::Markup(HtmlEscape(v->str()));
            }
            return Status::Ok();
          };
          if (escaped.positional.size() > e.index) {
            RL_RETURN_IF_ERROR(escape(&escaped.positional[e.index]));
          }
          for (auto& [k, v] : escaped.keyword) {
            if (k == e.keyword) {
              RL_RETURN_IF_ERROR(escape(&v));
            }
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
  // The characters to strip as a table (ASCII) or a sorted set, so that a
  // long `chars` costs a lookup per character, not a scan.
  std::array<bool, 128> ascii_set{};
  std::vector<char32_t> set;
  if (chars) {
    for (char32_t cp : CodePoints(*chars)) {
      if (cp < 128) {
        ascii_set[cp] = true;
      } else {
        set.push_back(cp);
      }
    }
    std::sort(set.begin(), set.end());
  }
  auto strip_cp = [&](char32_t cp) {
    if (!chars) return IsSpace(cp);
    if (cp < 128) return ascii_set[cp];
    return std::binary_search(set.begin(), set.end(), cp);
  };
  size_t b = 0;
  if (left) {
    while (b < s.size()) {
      size_t next = b;
      if (!strip_cp(NextCodePoint(s, &next))) break;
      b = next;
    }
  }
  size_t e = s.size();
  if (right) {
    // Code points decode front to back only (an odd byte may or may not
    // belong to the one before it), so find the end of the last kept one.
    e = b;
    for (size_t i = b; i < s.size();) {
      if (!strip_cp(NextCodePoint(s, &i))) e = i;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s)
      out.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t cp : CodePoints(s)) {
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
  for (char32_t cp : CodePoints(s)) AppendUtf8(ToLower(cp), &out);
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (char32_t cp : CodePoints(s)) {
    AppendUtf8(first ? ToUpper(cp) : ToLower(cp), &out);
    first = false;
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (char32_t cp : CodePoints(s)) {
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

size_t LineEnd(std::string_view s, size_t start, size_t* next) {
  // Byte patterns of Python's line boundaries: \n \r \v \f \x1c-\x1e, and
  // U+0085, U+2028, U+2029 in UTF-8. None can start inside another code
  // point (their lead bytes are not continuation bytes), so matching bytes
  // gives what decoding would.
  const size_t n = s.size();
  for (size_t i = start; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E)) {
      *next = i + 1;
      return i;
    }
    if (c == '\r') {
      *next = (i + 1 < n && s[i + 1] == '\n') ? i + 2 : i + 1;
      return i;
    }
    if (c == 0xC2 && i + 1 < n &&
        static_cast<unsigned char>(s[i + 1]) == 0x85) {
      *next = i + 2;
      return i;
    }
    if (c == 0xE2 && i + 2 < n &&
        static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
         static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      *next = i + 3;
      return i;
    }
  }
  *next = n;
  return n;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> out;
  for (size_t start = 0, next = 0; start < s.size(); start = next) {
    const size_t end = LineEnd(s, start, &next);
    out.emplace_back(s.substr(start, end - start));
  }
  return out;
}

size_t FindSub(std::string_view hay, std::string_view needle, size_t pos) {
  if (pos > hay.size()) return std::string_view::npos;
  if (needle.empty()) return pos;
  // glibc's memmem is the two-way algorithm: linear in the worst case.
  const void* p =
      memmem(hay.data() + pos, hay.size() - pos, needle.data(), needle.size());
  if (p == nullptr) return std::string_view::npos;
  return static_cast<size_t>(static_cast<const char*>(p) - hay.data());
}

size_t RFindSub(std::string_view hay, std::string_view needle, size_t end) {
  hay = hay.substr(0, std::min(end, hay.size()));
  if (needle.size() > hay.size()) return std::string_view::npos;
  // A short needle costs at most its length per position.
  if (needle.size() <= 64) return hay.rfind(needle);
  const std::string rhay(hay.rbegin(), hay.rend());
  const std::string rneedle(needle.rbegin(), needle.rend());
  const size_t p = FindSub(rhay, rneedle, 0);
  if (p == std::string_view::npos) return p;
  return hay.size() - p - needle.size();
}

size_t HtmlEscapedSize(std::string_view s) {
  size_t n = s.size();
  for (char c : s) {
    if (c == '&' || c == '\'' || c == '"') {
      n += 4;
    } else if (c == '<' || c == '>') {
      n += 3;
    }
  }
  return n;
}

std::optional<std::string> PyReplace(std::string_view s, std::string_view old_s,
                                     std::string_view new_s, int64_t count,
                                     size_t max_bytes) {
  // Count the replacements first so that the size can be checked before
  // anything is built.
  uint64_t occurrences = 0;
  const uint64_t most = count < 0 ? std::numeric_limits<uint64_t>::max()
                                  : static_cast<uint64_t>(count);
  if (old_s.empty()) {
    occurrences = std::min<uint64_t>(CountCodePoints(s) + 1, most);
  } else {
    // Once growing replacements pass the bound, counting further is moot.
    const uint64_t growth =
        new_s.size() > old_s.size() ? new_s.size() - old_s.size() : 0;
    for (size_t p = FindSub(s, old_s, 0);
         p != std::string_view::npos && occurrences < most;
         p = FindSub(s, old_s, p + old_s.size())) {
      ++occurrences;
      if (growth != 0 && s.size() + occurrences * growth > max_bytes)
        return std::nullopt;
    }
  }
  const uint64_t size =
      s.size() + occurrences * new_s.size() - occurrences * old_s.size();
  if (size > max_bytes) return std::nullopt;
  std::string out;
  out.reserve(size);
  if (old_s.empty()) {
    // Python inserts `new` before every code point and at the end.
    uint64_t done = 0;
    for (size_t i = 0, next = 0; i < s.size(); i = next) {
      next = i;
      NextCodePoint(s, &next);
      if (done < occurrences) {
        out += new_s;
        ++done;
      }
      out.append(s.substr(i, next - i));
    }
    if (done < occurrences) out += new_s;
    return out;
  }
  size_t start = 0;
  for (uint64_t done = 0; done < occurrences; ++done) {
    const size_t p = FindSub(s, old_s, start);
    out.append(s.substr(start, p - start));
    out.append(new_s);
    start = p + old_s.size();
  }
  out.append(s.substr(start));
  return out;
}

Result<std::string> ReplaceChecked(Renderer& r, std::string_view s,
                                   std::string_view old_s,
                                   std::string_view new_s, int64_t count) {
  // Counting reads the string once, building it again.
  RL_RETURN_IF_ERROR(r.Charge(
      static_cast<int64_t>(2 * s.size() + old_s.size() + new_s.size())));
  const size_t max_output = r.options().limits.max_output_bytes;
  const size_t headroom = r.meter()->memory_headroom();
  const size_t cap = std::min(max_output, headroom);
  std::optional<std::string> out = PyReplace(s, old_s, new_s, count, cap);
  if (!out) {
    if (cap < max_output) return r.OutOfMemoryError();
    return r.TooLongError();
  }
  RL_RETURN_IF_ERROR(r.ReserveString(out->size()));
  return std::move(*out);
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

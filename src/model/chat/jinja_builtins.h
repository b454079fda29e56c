// Builtins of the Jinja interpreter: Python operators (jinja_ops.cc), the
// Jinja2 3.1 filters and tests plus the Hugging Face globals
// (jinja_filters.cc), Python str/dict/list methods (jinja_methods.cc) and
// JSON conversion (jinja_json.cc).
//
// All functions are stateless apart from the Renderer they are given (which
// carries limits and the budget meter); none throws. Every builtin charges
// the work it is about to do and reserves the memory of what it is about to
// build on that Renderer first, from the sizes of its inputs (see
// Renderer::Charge); the ones without a Renderer take an optional Meter.
#ifndef REDLINE_MODEL_CHAT_JINJA_BUILTINS_H_
#define REDLINE_MODEL_CHAT_JINJA_BUILTINS_H_

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/html_escape.h"
#include "base/result.h"
#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_value.h"

namespace redline::model::chat::jinja {

// ---- operators (jinja_ops.cc) ---------------------------------------------

// Python `a <op> b` (with markupsafe's escaping when one side is Markup).
Result<Value> ApplyBinary(Renderer& r, BinOp op, const Value& a,
                          const Value& b);
// Unary minus / plus.
Result<Value> ApplyUnary(const Value& v, bool negate);
// Python comparison operators, `in` and `not in`. With a meter, the bytes
// and elements compared are charged to it (its status is returned once it
// is exhausted).
Result<bool> ApplyCompare(CmpOp op, const Value& a, const Value& b,
                          Meter* meter = nullptr);
// Python `item in container`.
Result<bool> Contains(const Value& container, const Value& item,
                      Meter* meter = nullptr);
// Three-way comparison for sorting (-1, 0, 1); TypeError for unorderable
// pairs, like Python's `<`.
Result<int> ThreeWay(const Value& a, const Value& b, Meter* meter = nullptr);

// Python slicing obj[start:stop:step] for str, list and tuple; other values
// give Undefined, as Jinja's getitem does.
Result<Value> SliceValue(Renderer& r, const Value& obj,
                         const std::optional<int64_t>& start,
                         const std::optional<int64_t>& stop,
                         const std::optional<int64_t>& step);
// Code point `index` (negative counts from the end) of a string, or
// Undefined when out of range. O(size of the string), uncharged.
Value StringIndex(const Value& s, int64_t index);
// Python len() for str (code points), list, tuple, dict; nullopt otherwise.
// O(size) for strings, uncharged.
std::optional<int64_t> Length(const Value& v);

// Python's `fmt % args` string formatting.
Result<Value> PercentFormat(Renderer& r, const Value& fmt, const Value& args);

// ---- filters, tests, globals (jinja_filters.cc) ----------------------------

// The implementation of a filter or test, or null when Redline lacks it.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);
// Whether Jinja2 3.1 (plus transformers' tojson) defines the name at all.
bool IsJinjaFilter(std::string_view name);
bool IsJinjaTest(std::string_view name);
// Global functions: range, dict, namespace, joiner, raise_exception,
// strftime_now. Null when `name` is not one.
const Value* FindGlobal(std::string_view name);

// ---- methods (jinja_methods.cc) --------------------------------------------

// Whether `obj.name` is a Python method the sandbox exposes. *unsafe is set
// for mutating methods (list.append, dict.update, ...), which the immutable
// sandbox refuses to call.
bool HasMethod(const Value& obj, std::string_view name, bool* unsafe);
// Calls obj.name(args).
Result<Value> CallMethod(Renderer& r, const Value& obj, std::string_view name,
                         CallArgs& args);
// obj.name as a bound-method value.
Value BoundMethod(const Value& obj, std::string_view name);

// String helpers shared by filters and methods.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars,
                    bool left, bool right);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyCapitalize(std::string_view s);
// Python str.title().
std::string PyTitle(std::string_view s);
// Python str.splitlines() (keepends false).
std::vector<std::string> PySplitLines(std::string_view s);
// One step of PySplitLines: the line that starts at byte `start`
// (< s.size()) ends at the returned offset; *next is where the line after
// it starts (past the line break).
size_t LineEnd(std::string_view s, size_t start, size_t* next);
// The first occurrence of `needle` in `hay` at or after `pos`, or npos, in
// time linear in the sizes (std::string::find is quadratic in the worst
// case, e.g. 'a'*N searched for 'a'*(N/2) + 'b').
size_t FindSub(std::string_view hay, std::string_view needle, size_t pos);
// The last occurrence of `needle` that ends at or before `end`, or npos;
// linear time too (it copies both strings reversed when the needle is
// long).
size_t RFindSub(std::string_view hay, std::string_view needle, size_t end);
// Bytes of HtmlEscape(s).
size_t HtmlEscapedSize(std::string_view s);

// snprintf into a string of the size the result needs (a precision may ask
// for any number of digits, which a fixed buffer would cut).
template <typename... Args>
std::string CFormat(const std::string& fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt.c_str(), args...);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt.c_str(), args...);
  out.resize(static_cast<size_t>(n));
  return out;
}
// Python str.replace(old, new, count) with count < 0 meaning all; nullopt
// when the result would be longer than `max_bytes` (nothing is built then).
std::optional<std::string> PyReplace(std::string_view s, std::string_view old_s,
                                     std::string_view new_s, int64_t count,
                                     size_t max_bytes);
// PyReplace under the render's output limit and budgets: fails instead of
// building a result they refuse.
Result<std::string> ReplaceChecked(Renderer& r, std::string_view s,
                                   std::string_view old_s,
                                   std::string_view new_s, int64_t count);
// A run of ASCII digits as an integer; nullopt for anything else or
// overflow.
std::optional<int64_t> ParseDigits(std::string_view s);

// ---- JSON (jinja_json.cc) ---------------------------------------------------

struct JsonDumpOptions {
  bool ensure_ascii = false;
  // nullopt: compact single line; otherwise the per-level indent string.
  std::optional<std::string> indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Python json.dumps(v, ...). TypeError for values JSON cannot hold
// (Undefined, namespaces, callables).
Result<std::string> JsonDump(Renderer* r, const Value& v,
                             const JsonDumpOptions& options);

// ---- argument binding
// --------------------------------------------------------

// Binds positional and keyword arguments to named parameters, Python style.
class ArgBinder {
 public:
  // `what` names the callee in errors ("filter 'indent'").
  ArgBinder(std::string_view what, const CallArgs& args,
            std::initializer_list<std::string_view> names);
  // OK, or a TypeError for extra positionals, unknown keywords or duplicates.
  const Status& status() const { return status_; }
  // The argument bound to parameter `i`, or null.
  const Value* Get(size_t i) const;
  Value GetOr(size_t i, Value fallback) const;
  // Positional arguments beyond the named parameters (when allowed).
  const std::vector<Value>& rest() const { return rest_; }
  bool has(size_t i) const { return Get(i) != nullptr; }

  // Lets extra positionals through into rest() (for *args callees).
  static ArgBinder WithRest(std::string_view what, const CallArgs& args,
                            std::initializer_list<std::string_view> names);

 private:
  ArgBinder() = default;
  void Bind(std::string_view what, const CallArgs& args,
            std::initializer_list<std::string_view> names, bool allow_rest);
  Status status_;
  std::vector<const Value*> bound_;
  std::vector<Value> rest_;
};

// Integer value of a bool/int argument, or a TypeError naming `what`.
Result<int64_t> ToIndex(const Value& v, std::string_view what);

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_BUILTINS_H_

// Values of the Jinja interpreter, modelled on the Python objects Jinja2
// works with: Undefined, None, bool, int, float, str (optionally marked safe,
// i.e. markupsafe.Markup), list, tuple, dict (insertion-ordered), namespace,
// callables and the `loop` object of a for loop.
//
// Ownership: a Value is a small handle (32 bytes). Strings, lists and dicts
// are immutable and shared between copies (copying costs one reference-count
// increment). Namespaces and loop states are the only mutable objects; they
// are shared by reference like Python objects.
//
// Memory: strings, lists, dicts and namespaces made while a render runs
// (Meter::Current() is set) hold their bytes on that render's Meter until
// they are destroyed, which bounds what a template can keep alive.
//
// Thread-safety: immutable values may be read from several threads (the
// literals inside a parsed template are). Values made while rendering stay
// inside that render.
#ifndef REDLINE_MODEL_CHAT_JINJA_VALUE_H_
#define REDLINE_MODEL_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "model/chat/jinja_budget.h"

namespace redline::model::chat::jinja {

class Value;
class Dict;
class Renderer;
struct Callable;
struct LoopState;

// A list, a tuple (prints as "(a, b)", never equals a list) or a generator
// (what Jinja's map/select/items filters return: always truthy, no len(),
// not subscriptable, and iterable only once).
struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  bool is_generator = false;
  // A generator that has been iterated (Python generators run only once).
  mutable bool consumed = false;
};

// Arguments of a call: positional values and keyword pairs in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A builtin function, bound method or macro. `renderer` is the render in
// progress (for limits, filters and macro bodies).
using CallableFn =
    std::function<Result<Value>(Renderer& renderer, CallArgs& args)>;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,  // list or tuple
    kDict,
    kNamespace,
    kCallable,
    kLoop,
  };

  // Undefined without a message.
  Value() : i_(0) {}
  // Undefined whose use fails with `message` ("'x' is undefined").
  static Value Undefined(std::string message);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value Str(std::string s);
  // A markupsafe.Markup string: `+` with a plain string HTML-escapes that
  // string (see jinja_builtins.h).
  static Value Markup(std::string s);
  static Value MakeList(std::vector<Value> items);
  static Value MakeTuple(std::vector<Value> items);
  static Value MakeGenerator(std::vector<Value> items);
  static Value MakeDict(Dict dict);
  static Value MakeNamespace(Dict attrs);
  static Value MakeCallable(std::string name, CallableFn fn,
                            bool is_macro = false);
  static Value MakeLoop(std::shared_ptr<LoopState> loop);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // bool, int or float (Python numbers; bool is an int subclass).
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  // True for lists, tuples and generators.
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && list().is_tuple; }
  bool is_generator() const {
    return kind_ == Kind::kList && list().is_generator;
  }
  // A real list or tuple (has len(), can be indexed).
  bool is_sequence() const {
    return kind_ == Kind::kList && !list().is_generator;
  }
  // Nesting depth of lists/dicts (0 for scalars).
  int depth() const { return depth_; }
  // Whether this is, or a list/dict that (at any depth) holds, a namespace,
  // loop or callable object. O(1).
  bool holds_mutable() const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_loop() const { return kind_ == Kind::kLoop; }

  // Accessors; each is valid only for its kind (RL_DCHECKed).
  bool bool_value() const;
  int64_t int_value() const;  // kInt or kBool
  double float_value() const;
  double AsDouble() const;         // any number
  const std::string& str() const;  // kString
  // The message an undefined value fails with; "" when none was given.
  const std::string& undefined_message() const;
  const List& list() const;
  const std::vector<Value>& items() const { return list().items; }
  // items() sharing ownership with this value (no copy).
  std::shared_ptr<const std::vector<Value>> shared_items() const {
    return std::shared_ptr<const std::vector<Value>>(ptr_, &list().items);
  }
  const Dict& dict() const;
  Dict& namespace_attrs() const;
  const Callable& callable() const;
  LoopState& loop() const;
  // Identity of the shared object (for `is sameas` and namespace equality).
  const void* identity() const { return ptr_.get(); }

 private:
  static Value MakeSeq(std::vector<Value> items, bool tuple, bool generator);

  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  // A list or dict with a namespace, loop or callable inside.
  bool holds_mutable_ = false;
  uint16_t depth_ = 0;
  union {
    bool b_;
    int64_t i_;
    double f_;
  };
  std::shared_ptr<const void> ptr_;
};

// An insertion-ordered mapping (Python dict). Keys are None, bool, int,
// float or str; equal numbers are the same key (1, 1.0 and True), as in
// Python. Lookups are O(1) through a hash index.
class Dict {
 public:
  Dict() = default;
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }

  // Null when absent.
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Inserts or replaces (a replaced key keeps its position). Fails with a
  // TypeError for unhashable keys (lists, dicts, ...).
  Status Set(Value key, Value value);
  // Set() for a string key; cannot fail.
  void SetStr(std::string key, Value value);

  // Canonical hash-index key, or false for unhashable values.
  static bool KeyOf(const Value& key, std::string* out);
  // Whether KeyOf would succeed (None, bool, int, float, str).
  static bool IsHashable(const Value& key);
  // Work units of looking `key` up: the index copies a string key, an
  // unindexed dict compares it with up to 8 keys.
  static int64_t LookupUnits(const Value& key);
  // Heap bytes of the entries and the index (not of the keys' and values'
  // own objects).
  size_t FootprintBytes() const;

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> index_;
};

struct Callable {
  std::string name;
  CallableFn fn;
  bool is_macro = false;  // prints as <Macro 'name'>, type name "Macro"
};

// State of one for loop, exposed to templates as `loop`.
struct LoopState {
  std::shared_ptr<const std::vector<Value>> items;  // after `if` filtering
  int64_t index0 = 0;
  int64_t depth0 = 0;
  // For `recursive` loops: the statement and the scope it runs in, so that
  // loop(items) can render the body again one level deeper. Both outlive
  // the loop object (it cannot escape its loop; see Renderer::ExecSet).
  const void* recursive_stmt = nullptr;
  void* enclosing_scope = nullptr;
  // Last value passed to loop.changed() and whether one was passed.
  Value changed_last;
  bool changed_called = false;
};

// Python type name: "NoneType", "str", "Markup", "int", "float", "bool",
// "list", "tuple", "dict", "Namespace", "function", "LoopContext",
// "Undefined".
std::string TypeName(const Value& v);
// Jinja's object_type_repr: "None" for None, else "<type> object".
std::string ObjectTypeRepr(const Value& v);

// Python truthiness.
bool Truthy(const Value& v);
// Python `==` (Undefined equals Undefined). With a meter, spends one unit
// per element and one per byte compared, and stops early (with any answer)
// once the meter is exhausted.
bool Equals(const Value& a, const Value& b, Meter* meter = nullptr);

// Python str(): None -> "None", True -> "True", 1.0 -> "1.0", lists and
// dicts as their repr; Undefined -> "".
std::string ToStr(const Value& v);
// Appends ToStr(v) without a temporary for strings.
void AppendStr(const Value& v, std::string* out);
// Python repr(): strings quoted and escaped like Python.
std::string Repr(const Value& v);
void AppendRepr(const Value& v, std::string* out);
// AppendStr / AppendRepr that stop before *out grows past `max_bytes`
// (a list holding one long string a million times prints terabytes) and,
// with a meter, spend one unit per byte and element printed. False when
// they stopped (the meter is exhausted or the text did not fit); *out then
// holds a prefix.
bool AppendStrBounded(const Value& v, size_t max_bytes, Meter* meter,
                      std::string* out);
bool AppendReprBounded(const Value& v, size_t max_bytes, Meter* meter,
                       std::string* out);
// repr(v) for an error message: cut after about 200 bytes with "...".
std::string ShortRepr(const Value& v);

// Bytes a string value of `size` bytes holds (its object and buffer), and
// the bytes of an empty list or dict value; what Meter::Reserve is asked for
// before such values are made.
size_t StringValueBytes(size_t size);
size_t ContainerValueBytes();
// Python repr() of a float: shortest round-trip digits, "1.0", "1e+16",
// "inf", "nan".
std::string FloatRepr(double f);
// Python repr() of a string.
void AppendStringRepr(std::string_view s, std::string* out);

// Error statuses worded like the Python exceptions Jinja2 raises
// ("TypeError: ..."); the renderer prefixes the template line.
Status TypeError(std::string_view message);
Status UndefinedError(std::string_view message);
Status ValueError(std::string_view message);
// Fails with the undefined value's message ("'x' is undefined").
Status FailUndefined(const Value& undefined);

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_VALUE_H_

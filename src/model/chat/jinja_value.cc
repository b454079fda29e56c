#include "model/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/check.h"
#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {
namespace {

// Dicts up to this size are searched linearly; bigger ones get a hash index.
constexpr size_t kDictLinearMax = 8;

// Bytes of a make_shared control block besides the object.
constexpr size_t kControlBlockBytes = 16;

// A shared object made during a render: holds its bytes on the render's
// meter until it is destroyed (MeterScope guarantees the meter outlives it).
template <typename T>
struct Metered {
  Metered(Meter* m, T&& v) : value(std::move(v)), meter(m) {}
  ~Metered() { meter->Release(bytes); }
  Metered(const Metered&) = delete;
  Metered& operator=(const Metered&) = delete;
  T value;
  Meter* meter;
  size_t bytes = 0;
};

size_t HeapBytes(const std::string& s) {
  // libstdc++ keeps up to 15 bytes inside the object.
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}
size_t HeapBytes(const List& l) { return l.items.capacity() * sizeof(Value); }
size_t HeapBytes(const Dict& d) { return d.FootprintBytes(); }

// The shared object behind a value; accounted to the current render's meter
// when one is running. The pointer always addresses the T itself.
template <typename T>
std::shared_ptr<const void> Share(T value) {
  Meter* meter = Meter::Current();
  if (meter == nullptr) return std::make_shared<T>(std::move(value));
  auto p = std::make_shared<Metered<T>>(meter, std::move(value));
  p->bytes = sizeof(Metered<T>) + kControlBlockBytes + HeapBytes(p->value);
  meter->Hold(p->bytes);
  return std::shared_ptr<const void>(p, &p->value);
}

// Whether two hashable keys are the same dict key (equal KeyOf strings),
// without copying long string keys.
bool SameKey(const Value& a, const Value& b) {
  if (a.is_string() || b.is_string())
    return a.is_string() && b.is_string() && a.str() == b.str();
  std::string x;
  std::string y;
  return Dict::KeyOf(a, &x) && Dict::KeyOf(b, &y) && x == y;
}

}  // namespace

size_t StringValueBytes(size_t size) {
  return sizeof(Metered<std::string>) + kControlBlockBytes +
         (size > 15 ? size + 1 : 0);
}

size_t ContainerValueBytes() {
  return std::max(sizeof(Metered<List>), sizeof(Metered<Dict>)) +
         kControlBlockBytes;
}

Value Value::Undefined(std::string message) {
  Value v;
  if (!message.empty())
    v.ptr_ = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.i_ = 0;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::Str(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.ptr_ = Share(std::move(s));
  return v;
}

Value Value::Markup(std::string s) {
  Value v = Str(std::move(s));
  v.markup_ = true;
  return v;
}

namespace {

uint16_t ChildDepth(const Value& v) {
  return static_cast<uint16_t>(std::min(v.depth() + 1, 0xFFFF));
}

}  // namespace

Value Value::MakeSeq(std::vector<Value> items, bool tuple, bool generator) {
  Value v;
  v.kind_ = Kind::kList;
  v.depth_ = 1;
  for (const Value& item : items) {
    v.depth_ = std::max(v.depth_, ChildDepth(item));
    v.holds_mutable_ = v.holds_mutable_ || item.holds_mutable();
  }
  List list;
  list.items = std::move(items);
  list.is_tuple = tuple;
  list.is_generator = generator;
  v.ptr_ = Share(std::move(list));
  return v;
}

Value Value::MakeList(std::vector<Value> items) {
  return MakeSeq(std::move(items), false, false);
}

Value Value::MakeTuple(std::vector<Value> items) {
  return MakeSeq(std::move(items), true, false);
}

Value Value::MakeGenerator(std::vector<Value> items) {
  return MakeSeq(std::move(items), false, true);
}

Value Value::MakeDict(Dict dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = 1;
  for (const auto& [k, item] : dict.items()) {
    v.depth_ = std::max(v.depth_, ChildDepth(item));
    v.holds_mutable_ = v.holds_mutable_ || item.holds_mutable();
  }
  v.ptr_ = Share(std::move(dict));
  return v;
}

Value Value::MakeNamespace(Dict attrs) {
  Value v;
  v.kind_ = Kind::kNamespace;
  // Not const: namespaces are the one mutable container (namespace_attrs).
  v.ptr_ = Share(std::move(attrs));
  return v;
}

Value Value::MakeCallable(std::string name, CallableFn fn, bool is_macro) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.ptr_ = std::make_shared<const Callable>(
      Callable{std::move(name), std::move(fn), is_macro});
  return v;
}

Value Value::MakeLoop(std::shared_ptr<LoopState> loop) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.ptr_ = std::move(loop);
  return v;
}

bool Value::holds_mutable() const {
  return kind_ == Kind::kNamespace || kind_ == Kind::kLoop ||
         kind_ == Kind::kCallable || holds_mutable_;
}

bool Value::bool_value() const {
  RL_DCHECK(kind_ == Kind::kBool);
  return b_;
}

int64_t Value::int_value() const {
  RL_DCHECK(kind_ == Kind::kInt || kind_ == Kind::kBool);
  return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_;
}

double Value::float_value() const {
  RL_DCHECK(kind_ == Kind::kFloat);
  return f_;
}

double Value::AsDouble() const {
  RL_DCHECK(is_number());
  if (kind_ == Kind::kFloat) return f_;
  return static_cast<double>(int_value());
}

const std::string& Value::str() const {
  RL_DCHECK(kind_ == Kind::kString);
  return *static_cast<const std::string*>(ptr_.get());
}

const std::string& Value::undefined_message() const {
  static const std::string kEmpty;
  RL_DCHECK(kind_ == Kind::kUndefined);
  return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : kEmpty;
}

const List& Value::list() const {
  RL_DCHECK(kind_ == Kind::kList);
  return *static_cast<const List*>(ptr_.get());
}

const Dict& Value::dict() const {
  RL_DCHECK(kind_ == Kind::kDict);
  return *static_cast<const Dict*>(ptr_.get());
}

Dict& Value::namespace_attrs() const {
  RL_DCHECK(kind_ == Kind::kNamespace);
  // Namespaces are the one mutable container; MakeNamespace created a
  // non-const Dict, so casting the constness away is well defined.
  return *const_cast<Dict*>(static_cast<const Dict*>(ptr_.get()));
}

const Callable& Value::callable() const {
  RL_DCHECK(kind_ == Kind::kCallable);
  return *static_cast<const Callable*>(ptr_.get());
}

LoopState& Value::loop() const {
  RL_DCHECK(kind_ == Kind::kLoop);
  return *const_cast<LoopState*>(static_cast<const LoopState*>(ptr_.get()));
}

// ---------------------------------------------------------------------------
// Dict

bool Dict::KeyOf(const Value& key, std::string* out) {
  switch (key.kind()) {
    case Value::Kind::kNone:
      *out = "n";
      return true;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      *out = "i" + std::to_string(key.int_value());
      return true;
    case Value::Kind::kFloat: {
      const double f = key.float_value();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18) {
        *out = "i" + std::to_string(static_cast<int64_t>(f));
      } else {
        *out = "f" + FloatRepr(f);
      }
      return true;
    }
    case Value::Kind::kString:
      out->clear();
      out->reserve(key.str().size() + 1);
      out->push_back('s');
      out->append(key.str());
      return true;
    default:
      return false;
  }
}

bool Dict::IsHashable(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
      return true;
    default:
      return false;
  }
}

int64_t Dict::LookupUnits(const Value& key) {
  if (!key.is_string()) return 1;
  return static_cast<int64_t>(kDictLinearMax + 1) *
             static_cast<int64_t>(key.str().size()) +
         1;
}

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.str()));
  std::string k;
  if (!KeyOf(key, &k)) return nullptr;
  if (index_.empty()) {
    for (const auto& [ik, iv] : items_) {
      if (SameKey(ik, key)) return &iv;
    }
    return nullptr;
  }
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::Find(std::string_view key) const {
  if (index_.empty()) {
    for (const auto& [ik, iv] : items_) {
      if (ik.is_string() && ik.str() == key) return &iv;
    }
    return nullptr;
  }
  std::string k;
  k.reserve(key.size() + 1);
  k.push_back('s');
  k.append(key);
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

Status Dict::Set(Value key, Value value) {
  if (index_.empty()) {
    std::string unused;
    if (!KeyOf(key, &unused))
      return TypeError("unhashable type: '" + TypeName(key) + "'");
    for (auto& [ik, iv] : items_) {
      if (SameKey(ik, key)) {
        iv = std::move(value);
        return Status::Ok();
      }
    }
    items_.emplace_back(std::move(key), std::move(value));
    if (items_.size() > kDictLinearMax) {
      std::string k;
      for (size_t i = 0; i < items_.size(); ++i) {
        KeyOf(items_[i].first, &k);
        index_.emplace(k, i);
      }
    }
    return Status::Ok();
  }
  std::string k;
  if (!KeyOf(key, &k))
    return TypeError("unhashable type: '" + TypeName(key) + "'");
  auto [it, inserted] = index_.emplace(std::move(k), items_.size());
  if (inserted) {
    items_.emplace_back(std::move(key), std::move(value));
  } else {
    items_[it->second].second = std::move(value);
  }
  return Status::Ok();
}

size_t Dict::FootprintBytes() const {
  size_t bytes = items_.capacity() * sizeof(items_[0]);
  if (index_.empty()) return bytes;
  // A node: the key/position pair, the next pointer and the cached hash.
  bytes += index_.bucket_count() * sizeof(void*);
  for (const auto& [k, i] : index_) {
    bytes += sizeof(std::pair<const std::string, size_t>) + 2 * sizeof(void*) +
             HeapBytes(k);
  }
  return bytes;
}

void Dict::SetStr(std::string key, Value value) {
  Status s = Set(Value::Str(std::move(key)), std::move(value));
  RL_DCHECK(s.ok());
}

// ---------------------------------------------------------------------------
// Type names, truthiness, equality

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return v.is_markup() ? "Markup" : "str";
    case Value::Kind::kList:
      return v.is_generator() ? "generator"
                              : (v.list().is_tuple ? "tuple" : "list");
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kCallable:
      return v.callable().is_macro ? "Macro" : "function";
    case Value::Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return TypeName(v) + " object";
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.bool_value();
    case Value::Kind::kInt:
      return v.int_value() != 0;
    case Value::Kind::kFloat:
      return v.float_value() != 0.0;
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kList:
      return v.is_generator() || !v.items().empty();
    case Value::Kind::kDict:
      return !v.dict().empty();
    default:
      return true;
  }
}

bool Equals(const Value& a, const Value& b, Meter* meter) {
  if (meter != nullptr && !meter->Spend(1)) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString: {
      // Strings are immutable: the same object is equal to itself.
      if (a.identity() == b.identity()) return true;
      const size_t n = a.str().size();
      if (n != b.str().size()) return false;
      if (meter != nullptr && !meter->Spend(static_cast<int64_t>(n)))
        return false;
      return a.str() == b.str();
    }
    case Value::Kind::kList: {
      if (a.is_generator() || b.is_generator())
        return a.identity() == b.identity();
      if (a.list().is_tuple != b.list().is_tuple) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i], meter)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        if (meter != nullptr && !meter->Spend(Dict::LookupUnits(k))) {
          return false;
        }
        const Value* other = y.Find(k);
        if (other == nullptr || !Equals(v, *other, meter)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

// ---------------------------------------------------------------------------
// Printing

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto res =
      std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);
  // sci is "[-]d[.ddd]e[+-]XX".
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0),
                  sci.data() + sci.size(), exp);
  const int ndigits = static_cast<int>(digits.size());
  if (exp >= -4 &&
      exp < 16) {  // Python's repr uses exponents outside [1e-4, 1e16)
    const int decpt = exp + 1;
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= ndigits) {
      out += digits;
      out.append(static_cast<size_t>(decpt - ndigits), '0');
      out += ".0";
    } else {
      out += digits.substr(0, decpt);
      out.push_back('.');
      out += digits.substr(decpt);
    }
    return out;
  }
  out.push_back(digits[0]);
  if (ndigits > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp < 0 ? '-' : '+',
                exp < 0 ? -exp : exp);
  out += exp_buf;
  return out;
}

namespace {

// Python's str() and repr() into a string that may not grow past a bound.
// Every append is checked before it is made, so a value that prints as
// terabytes (one long string held a million times in a list) stops after
// `max_bytes`; the meter, when given, is charged per byte and element.
class Printer {
 public:
  Printer(size_t max_bytes, Meter* meter, std::string* out)
      : max_bytes_(max_bytes), meter_(meter), out_(out) {}

  bool Str(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return true;
      case Value::Kind::kNone:
        return Append("None");
      case Value::Kind::kBool:
        return Append(v.bool_value() ? "True" : "False");
      case Value::Kind::kInt:
        return Append(std::to_string(v.int_value()));
      case Value::Kind::kFloat:
        return Append(FloatRepr(v.float_value()));
      case Value::Kind::kString:
        return Append(v.str());
      case Value::Kind::kList: {
        if (v.is_generator()) return Append("<generator object>");
        const bool tuple = v.list().is_tuple;
        if (!Append(tuple ? "(" : "[")) return false;
        const auto& items = v.items();
        for (size_t i = 0; i < items.size(); ++i) {
          if (i && !Append(", ")) return false;
          if (!Repr(items[i])) return false;
        }
        if (tuple && items.size() == 1 && !Append(",")) return false;
        return Append(tuple ? ")" : "]");
      }
      case Value::Kind::kDict:
      case Value::Kind::kNamespace: {
        const Dict& d = v.is_dict() ? v.dict() : v.namespace_attrs();
        if (v.is_namespace() && !Append("<Namespace ")) return false;
        if (!Append("{")) return false;
        bool first = true;
        for (const auto& [k, val] : d.items()) {
          if (!first && !Append(", ")) return false;
          first = false;
          if (!Repr(k) || !Append(": ") || !Repr(val)) return false;
        }
        if (!Append("}")) return false;
        return !v.is_namespace() || Append(">");
      }
      case Value::Kind::kCallable:
        if (v.callable().is_macro)
          return Append("<Macro '" + v.callable().name + "'>");
        return Append("<function " + v.callable().name + ">");
      case Value::Kind::kLoop: {
        const LoopState& loop = v.loop();
        return Append("<LoopContext " + std::to_string(loop.index0 + 1) + "/" +
                      std::to_string(loop.items ? loop.items->size() : 0) +
                      ">");
      }
    }
    return true;
  }

  bool Repr(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return Append("Undefined");
      case Value::Kind::kString:
        if (v.is_markup()) {
          return Append("Markup(") && StringRepr(v.str()) && Append(")");
        }
        return StringRepr(v.str());
      default:
        return Str(v);
    }
  }

  bool StringRepr(std::string_view s) {
    // Escaping never shortens: the repr is at least the bytes plus quotes.
    if (!Room(s.size() + 2)) return false;
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    out_->push_back(quote);
    char buf[16];
    size_t done = 0;
    for (char32_t cp : CodePoints(s)) {
      if (cp == static_cast<char32_t>(quote) || cp == '\\') {
        out_->push_back('\\');
        out_->push_back(static_cast<char>(cp));
      } else if (cp == '\n') {
        out_->append("\\n");
      } else if (cp == '\r') {
        out_->append("\\r");
      } else if (cp == '\t') {
        out_->append("\\t");
      } else if (IsPrintable(cp)) {
        AppendUtf8(cp, out_);
      } else {
        if (cp < 0x100) {
          std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
        } else if (cp < 0x10000) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
        } else {
          std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
        }
        out_->append(buf);
      }
      // Escapes grow the text up to tenfold; stop soon after the bound.
      if ((++done & 1023) == 0 && out_->size() > max_bytes_) return false;
    }
    out_->push_back(quote);
    return out_->size() <= max_bytes_;
  }

 private:
  // Whether `n` more bytes fit (and are paid for).
  bool Room(size_t n) {
    if (n > max_bytes_ || out_->size() > max_bytes_ - n) return false;
    return meter_ == nullptr || meter_->Spend(static_cast<int64_t>(n) + 1);
  }
  bool Append(std::string_view s) {
    if (!Room(s.size())) return false;
    out_->append(s);
    return true;
  }

  size_t max_bytes_;
  Meter* meter_;
  std::string* out_;
};

constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

}  // namespace

void AppendStringRepr(std::string_view s, std::string* out) {
  Printer(kUnbounded, nullptr, out).StringRepr(s);
}

void AppendRepr(const Value& v, std::string* out) {
  Printer(kUnbounded, nullptr, out).Repr(v);
}

std::string Repr(const Value& v) {
  std::string out;
  AppendRepr(v, &out);
  return out;
}

void AppendStr(const Value& v, std::string* out) {
  Printer(kUnbounded, nullptr, out).Str(v);
}

std::string ToStr(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  AppendStr(v, &out);
  return out;
}

bool AppendStrBounded(const Value& v, size_t max_bytes, Meter* meter,
                      std::string* out) {
  return Printer(max_bytes, meter, out).Str(v);
}

bool AppendReprBounded(const Value& v, size_t max_bytes, Meter* meter,
                       std::string* out) {
  return Printer(max_bytes, meter, out).Repr(v);
}

std::string ShortRepr(const Value& v) {
  constexpr size_t kMaxBytes = 200;
  std::string out;
  if (!AppendReprBounded(v, kMaxBytes, nullptr, &out)) {
    // Keep the cut on a code point boundary.
    while (!out.empty() &&
           (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
      out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0)
      out.pop_back();
    out += "...";
  }
  return out;
}

// ---------------------------------------------------------------------------
// Errors

Status TypeError(std::string_view message) {
  return Status::InvalidArgument("TypeError: " + std::string(message));
}

Status UndefinedError(std::string_view message) {
  return Status::InvalidArgument("UndefinedError: " + std::string(message));
}

Status ValueError(std::string_view message) {
  return Status::InvalidArgument("ValueError: " + std::string(message));
}

Status FailUndefined(const Value& undefined) {
  const std::string& m = undefined.undefined_message();
  return UndefinedError(m.empty() ? "value is undefined" : m);
}

}  // namespace redline::model::chat::jinja

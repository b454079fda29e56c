#include "model/chat/jinja_interpreter.h"

#include <algorithm>
#include <limits>
#include <new>
#include <stdexcept>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_parser.h"
#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {
namespace {

// Nested Eval/Exec frames across macro calls. Each counted level costs a few
// hundred bytes of C++ stack, so this keeps a render well inside 1 MiB even
// for hostile templates; real templates stay below 100.
constexpr int kMaxNesting = 600;

Status LimitError(std::string_view what) {
  return Status::ResourceExhausted("template exceeded " + std::string(what));
}

bool HasLinePrefix(const std::string& m) { return m.rfind("line ", 0) == 0; }

}  // namespace

struct Renderer::Scope {
  explicit Scope(Scope* p) : parent(p) {}
  const Value* Find(std::string_view name) const {
    for (const auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  void Set(std::string_view name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(std::string(name), std::move(v));
  }
  Scope* parent;
  std::vector<std::pair<std::string, Value>> vars;
};

namespace {

// Makes `scope` current for its lifetime.
class ScopeGuard {
 public:
  ScopeGuard(Renderer::Scope** slot, Renderer::Scope* scope)
      : slot_(slot), saved_(*slot) {
    *slot_ = scope;
  }
  ~ScopeGuard() { *slot_ = saved_; }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Renderer::Scope** slot_;
  Renderer::Scope* saved_;
};

class DepthGuard {
 public:
  explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~DepthGuard() { --*depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int* depth_;
};

}  // namespace

// ---------------------------------------------------------------------------
// Template

Result<std::shared_ptr<const Template>> Template::Parse(
    std::string_view source) {
  RL_ASSIGN_OR_RETURN(Body body, ParseTemplate(source));
  auto t = std::shared_ptr<Template>(new Template());
  t->body_ = std::move(body);
  return std::shared_ptr<const Template>(std::move(t));
}

Result<std::string> Template::Render(const Dict& variables,
                                     const RenderOptions& options) const {
  // The budgets check sizes before every allocation a template controls;
  // this is the last resort should one be missed, so that a hostile
  // template can never abort the process.
  try {
    Renderer renderer(*this, variables, options);
    return renderer.Run();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("chat template ran out of memory");
  } catch (const std::length_error&) {
    return Status::ResourceExhausted(
        "chat template built a string or list too long to hold");
  }
}

// ---------------------------------------------------------------------------
// Renderer: bookkeeping

Renderer::Renderer(const Template& tmpl, const Dict& variables,
                   const RenderOptions& options)
    : template_(tmpl),
      options_(options),
      meter_(options.budget),
      root_(std::make_unique<Scope>(nullptr)) {
  for (const auto& [k, v] : variables.items()) {
    if (k.is_string()) root_->Set(k.str(), v);
  }
  scope_ = root_.get();
}

Renderer::~Renderer() = default;

Result<std::string> Renderer::Run() {
  MeterScope metered(&meter_);
  std::string out;
  Flow flow = Flow::kNormal;
  Status s = ExecBody(template_.body(), &out, &flow);
  if (template_error_) return Status::InvalidArgument(*template_error_);
  // Code that ran out of budget where it could not return a Status stopped
  // early with a made-up answer; whatever followed from it is void.
  if (meter_.exhausted() &&
      (s.ok() || s.code() != StatusCode::kResourceExhausted)) {
    return meter_.status();
  }
  if (!s.ok()) return s;
  return out;
}

Status Renderer::Step() {
  if (++steps_ > options_.limits.max_steps) {
    return LimitError("its work limit (" +
                      std::to_string(options_.limits.max_steps) + " steps)");
  }
  if (!meter_.Spend(1) || !meter_.Reserve(0)) return meter_.status();
  return Status::Ok();
}

Status Renderer::Charge(int64_t units) {
  if (!meter_.Spend(units)) return meter_.status();
  return Status::Ok();
}

Status Renderer::Reserve(size_t bytes) {
  if (!meter_.Reserve(bytes)) return meter_.status();
  return Status::Ok();
}

Status Renderer::ReserveString(size_t bytes) {
  RL_RETURN_IF_ERROR(CheckStringSize(bytes));
  RL_RETURN_IF_ERROR(Reserve(StringValueBytes(bytes)));
  return Charge(static_cast<int64_t>(bytes));
}

Status Renderer::ReserveList(size_t count) {
  if (count > meter_.budget().max_memory_bytes / sizeof(Value))
    return OutOfMemoryError();
  RL_RETURN_IF_ERROR(Reserve(ContainerValueBytes() + count * sizeof(Value)));
  return Charge(static_cast<int64_t>(count));
}

Status Renderer::AppendStr(const Value& v, std::string* out) {
  // The text may grow *out up to the output limit, or up to what memory
  // is left, whichever comes first.
  const size_t max_output = options_.limits.max_output_bytes;
  const size_t headroom = meter_.memory_headroom();
  const size_t memory_cap =
      out->size() +
      std::min(headroom, std::numeric_limits<size_t>::max() - out->size());
  const bool memory_bound = memory_cap < max_output;
  const size_t cap = memory_bound ? memory_cap : max_output;
  if (AppendStrBounded(v, cap, &meter_, out)) return Status::Ok();
  if (meter_.exhausted()) return meter_.status();
  if (memory_bound) return OutOfMemoryError();
  return TooLongError();
}

Result<std::string> Renderer::Str(const Value& v) {
  std::string out;
  RL_RETURN_IF_ERROR(AppendStr(v, &out));
  return out;
}

Result<std::string> Renderer::ReprOf(const Value& v) {
  std::string out;
  const size_t cap =
      std::min(options_.limits.max_output_bytes, meter_.memory_headroom());
  if (AppendReprBounded(v, cap, &meter_, &out)) return out;
  if (meter_.exhausted()) return meter_.status();
  if (cap < options_.limits.max_output_bytes) return OutOfMemoryError();
  return TooLongError();
}

Result<Value> Renderer::SoftStr(const Value& v) {
  if (v.is_string()) return v;
  RL_ASSIGN_OR_RETURN(std::string s, Str(v));
  return Value::Str(std::move(s));
}

Result<bool> Renderer::Equal(const Value& a, const Value& b) {
  const bool equal = Equals(a, b, &meter_);
  RL_RETURN_IF_ERROR(meter_.status());
  return equal;
}

Status Renderer::CheckStringSize(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes) return TooLongError();
  return Status::Ok();
}

Status Renderer::TooLongError() const {
  return LimitError("the output size limit (" +
                    std::to_string(options_.limits.max_output_bytes) +
                    " bytes)");
}

Status Renderer::CheckValueDepth(const Value& v) const {
  if (v.depth() > options_.limits.max_value_depth) {
    return LimitError("the value nesting limit (" +
                      std::to_string(options_.limits.max_value_depth) + ")");
  }
  return Status::Ok();
}

Status Renderer::RaiseTemplateError(std::string message) {
  if (!template_error_) template_error_ = std::move(message);
  return Status::InvalidArgument("TemplateError: " + *template_error_);
}

Status Renderer::WithLine(Status s, int line) const {
  if (s.ok() || template_error_ || HasLinePrefix(s.message())) return s;
  return Status(s.code(), "line " + std::to_string(line) + ": " + s.message());
}

Value Renderer::Lookup(std::string_view name) const {
  for (const Scope* s = scope_; s != nullptr; s = s->parent) {
    if (const Value* v = s->Find(name)) return *v;
  }
  if (const Value* g = FindGlobal(name)) return *g;
  return Value::Undefined("'" + std::string(name) + "' is undefined");
}

Result<std::shared_ptr<const std::vector<Value>>> Renderer::Iterate(
    const Value& v) {
  using Items = std::shared_ptr<const std::vector<Value>>;
  static const Items kEmpty = std::make_shared<const std::vector<Value>>();
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return kEmpty;
    case Value::Kind::kList: {
      const List& list = v.list();
      if (list.is_generator) {
        if (list.consumed) return kEmpty;
        list.consumed = true;
      }
      // Shared, not copied: the loop pays per iteration.
      RL_RETURN_IF_ERROR(Charge(1));
      return v.shared_items();
    }
    case Value::Kind::kDict: {
      RL_RETURN_IF_ERROR(ReserveList(v.dict().size()));
      auto keys = std::make_shared<std::vector<Value>>();
      keys->reserve(v.dict().size());
      for (const auto& [k, val] : v.dict().items()) keys->push_back(k);
      return Items(std::move(keys));
    }
    case Value::Kind::kString: {
      // One string value per code point: about 100 bytes each.
      const std::string& str = v.str();
      RL_RETURN_IF_ERROR(Charge(static_cast<int64_t>(str.size())));
      const size_t n = CountCodePoints(str);
      RL_RETURN_IF_ERROR(ReserveList(n));
      if (n > meter_.budget().max_memory_bytes / StringValueBytes(1))
        return OutOfMemoryError();
      RL_RETURN_IF_ERROR(Reserve(n * StringValueBytes(1)));
      auto chars = std::make_shared<std::vector<Value>>();
      chars->reserve(n);
      for (char32_t cp : CodePoints(str)) {
        std::string s;
        AppendUtf8(cp, &s);
        chars->push_back(Value::Str(std::move(s)));
      }
      return Items(std::move(chars));
    }
    default:
      return TypeError("'" + TypeName(v) + "' object is not iterable");
  }
}

// ---------------------------------------------------------------------------
// Attribute and item access (jinja2.sandbox.SandboxedEnvironment semantics)

Result<Value> Renderer::GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return FailUndefined(obj);
  bool unsafe = false;
  if (HasMethod(obj, name, &unsafe)) {
    if (unsafe) {
      return Value::Undefined("access to attribute '" + std::string(name) +
                              "' of '" + TypeName(obj) + "' object is unsafe.");
    }
    return BoundMethod(obj, name);
  }
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (const Value* v = obj.dict().Find(name)) return *v;
      break;
    case Value::Kind::kNamespace:
      if (const Value* v = obj.namespace_attrs().Find(name)) return *v;
      break;
    case Value::Kind::kLoop: {
      const LoopState& loop = obj.loop();
      const int64_t length = static_cast<int64_t>(loop.items->size());
      const int64_t i = loop.index0;
      if (name == "index") return Value::Int(i + 1);
      if (name == "index0") return Value::Int(i);
      if (name == "revindex") return Value::Int(length - i);
      if (name == "revindex0") return Value::Int(length - i - 1);
      if (name == "first") return Value::Bool(i == 0);
      if (name == "last") return Value::Bool(i == length - 1);
      if (name == "length") return Value::Int(length);
      if (name == "depth") return Value::Int(loop.depth0 + 1);
      if (name == "depth0") return Value::Int(loop.depth0);
      if (name == "previtem") {
        if (i > 0) return (*loop.items)[i - 1];
        return Value::Undefined("there is no previous item");
      }
      if (name == "nextitem") {
        if (i + 1 < length) return (*loop.items)[i + 1];
        return Value::Undefined("there is no next item");
      }
      break;
    }
    default:
      break;
  }
  std::string type = obj.is_namespace() ? "jinja2.utils.Namespace object"
                                        : ObjectTypeRepr(obj);
  return Value::Undefined("'" + type + "' has no attribute '" +
                          std::string(name) + "'");
}

Result<Value> Renderer::GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return FailUndefined(obj);
  switch (obj.kind()) {
    case Value::Kind::kDict:
      // Looking up a string key copies it.
      RL_RETURN_IF_ERROR(Charge(Dict::LookupUnits(key)));
      if (key.is_string()) {
        RL_RETURN_IF_ERROR(Reserve(StringValueBytes(key.str().size())));
      }
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Value::Kind::kList:
      if (obj.is_sequence() && (key.is_int() || key.is_bool())) {
        int64_t i = key.int_value();
        const int64_t n = static_cast<int64_t>(obj.items().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.items()[i];
      }
      break;
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        RL_RETURN_IF_ERROR(Charge(static_cast<int64_t>(obj.str().size())));
        Value v = StringIndex(obj, key.int_value());
        if (!v.is_undefined())
          return obj.is_markup() ? Value::Markup(v.str()) : v;
      }
      break;
    default:
      break;
  }
  // Jinja falls back to attribute lookup for string keys.
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(ObjectTypeRepr(obj) + " has no element " +
                          ShortRepr(key));
}

Result<Value> Renderer::GetAttrPath(const Value& obj, std::string_view path) {
  RL_RETURN_IF_ERROR(Charge(static_cast<int64_t>(path.size())));
  Value cur = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    std::string_view part =
        path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    const std::optional<int64_t> index = ParseDigits(part);
    Value key = index ? Value::Int(*index) : Value::Str(std::string(part));
    RL_ASSIGN_OR_RETURN(cur, GetItem(cur, key));
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

Result<Value> Renderer::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return FailUndefined(callee);
  if (callee.is_loop()) return CallLoop(callee, args);
  if (!callee.is_callable())
    return TypeError("'" + TypeName(callee) + "' object is not callable");
  RL_RETURN_IF_ERROR(Step());
  return callee.callable().fn(*this, args);
}

Result<Value> Renderer::ApplyFilter(std::string_view name, const Value& input,
                                    CallArgs& args) {
  FilterFn fn = FindFilter(name);
  if (fn == nullptr) {
    return Status::InvalidArgument(
        IsJinjaFilter(name)
            ? "filter '" + std::string(name) + "' is not supported"
            : "TemplateRuntimeError: No filter named '" + std::string(name) +
                  "' found.");
  }
  RL_RETURN_IF_ERROR(Step());
  return fn(*this, input, args);
}

Result<bool> Renderer::ApplyTest(std::string_view name, const Value& input,
                                 CallArgs& args) {
  TestFn fn = FindTest(name);
  if (fn == nullptr) {
    return Status::InvalidArgument(
        IsJinjaTest(name) ? "test '" + std::string(name) + "' is not supported"
                          : "TemplateRuntimeError: No test named '" +
                                std::string(name) + "'.");
  }
  RL_RETURN_IF_ERROR(Step());
  return fn(*this, input, args);
}

// ---------------------------------------------------------------------------
// Statements

Status Renderer::ExecBody(const Body& body, std::string* out, Flow* flow) {
  for (const auto& s : body) {
    RL_RETURN_IF_ERROR(Exec(*s, out, flow));
    if (*flow != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

Status Renderer::AppendOutput(const Value& v, std::string* out) {
  const size_t before = out->size();
  Status s = AppendStr(v, out);
  meter_.Hold(out->size() - before);
  return s;
}

Status Renderer::AppendText(std::string_view text, std::string* out) {
  RL_RETURN_IF_ERROR(CheckStringSize(out->size() + text.size()));
  RL_RETURN_IF_ERROR(Reserve(text.size()));
  RL_RETURN_IF_ERROR(Charge(static_cast<int64_t>(text.size())));
  meter_.Hold(text.size());
  out->append(text);
  return Status::Ok();
}

Value Renderer::BufferValue(std::string* buf) {
  meter_.Release(buf->size());
  return Value::Str(std::move(*buf));
}

Status Renderer::Exec(const Stmt& s, std::string* out, Flow* flow) {
  DepthGuard depth(&eval_depth_);
  if (eval_depth_ > kMaxNesting) {
    return WithLine(LimitError("the nesting limit (recursion too deep)"),
                    s.line);
  }
  RL_RETURN_IF_ERROR(WithLine(Step(), s.line));
  switch (s.kind) {
    case StmtKind::kText:
      return WithLine(AppendText(s.text, out), s.line);
    case StmtKind::kOutput: {
      RL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      return WithLine(AppendOutput(v, out), s.line);
    }
    case StmtKind::kIf:
      for (size_t i = 0; i < s.conds.size(); ++i) {
        RL_ASSIGN_OR_RETURN(Value c, Eval(*s.conds[i]));
        if (Truthy(c)) return ExecBody(s.bodies[i], out, flow);
      }
      if (s.bodies.size() > s.conds.size())
        return ExecBody(s.bodies.back(), out, flow);
      return Status::Ok();
    case StmtKind::kFor: {
      RL_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
      return ExecLoop(s, iterable, 0, scope_, out, flow);
    }
    case StmtKind::kSet:
      return ExecSet(s);
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock: {
      std::string buf;
      {
        Scope block(scope_);
        ScopeGuard guard(&scope_, &block);
        Flow inner = Flow::kNormal;
        RL_RETURN_IF_ERROR(ExecBody(s.bodies[0], &buf, &inner));
      }
      Value v = BufferValue(&buf);
      if (s.expr) {
        block_values_.push_back(std::move(v));
        auto filtered = Eval(*s.expr);
        block_values_.pop_back();
        if (!filtered.ok()) return filtered.status();
        v = std::move(filtered).value();
      }
      if (s.kind == StmtKind::kFilterBlock)
        return WithLine(AppendOutput(v, out), s.line);
      return Assign(s.targets, v, s.line);
    }
    case StmtKind::kMacro:
      scope_->Set(s.text, MakeMacro(s));
      return Status::Ok();
    case StmtKind::kBreak:
      *flow = Flow::kBreak;
      return Status::Ok();
    case StmtKind::kContinue:
      *flow = Flow::kContinue;
      return Status::Ok();
    case StmtKind::kWith: {
      std::vector<Value> values;
      for (const auto& e : s.values) {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*e));
        values.push_back(std::move(v));
      }
      Scope with(scope_);
      ScopeGuard guard(&scope_, &with);
      for (size_t i = 0; i < values.size(); ++i)
        with.Set(s.targets[i], std::move(values[i]));
      return ExecBody(s.bodies[0], out, flow);
    }
    case StmtKind::kScope:
      return ExecBody(s.bodies[0], out, flow);
  }
  return Status::Internal("unknown statement");
}

Status Renderer::Assign(const std::vector<std::string>& targets,
                        const Value& value, int line) {
  if (targets.size() == 1) {
    scope_->Set(targets[0], value);
    return Status::Ok();
  }
  if (!value.is_list() && !value.is_string() && !value.is_dict() &&
      !value.is_undefined()) {
    return WithLine(
        TypeError("cannot unpack non-iterable " + TypeName(value) + " object"),
        line);
  }
  auto items = Iterate(value);
  if (!items.ok()) return WithLine(items.status(), line);
  const size_t n = (*items)->size();
  if (n < targets.size()) {
    return WithLine(ValueError("not enough values to unpack (expected " +
                               std::to_string(targets.size()) + ", got " +
                               std::to_string(n) + ")"),
                    line);
  }
  if (n > targets.size()) {
    return WithLine(ValueError("too many values to unpack (expected " +
                               std::to_string(targets.size()) + ")"),
                    line);
  }
  for (size_t i = 0; i < n; ++i) scope_->Set(targets[i], (**items)[i]);
  return Status::Ok();
}

Status Renderer::ExecSet(const Stmt& s) {
  RL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
  if (s.target_attr.empty()) return Assign(s.targets, v, s.line);
  Value ns = Lookup(s.targets[0]);
  if (!ns.is_namespace()) {
    return WithLine(Status::InvalidArgument(
                        "TemplateRuntimeError: cannot assign attribute on "
                        "non-namespace object"),
                    s.line);
  }
  if (v.holds_mutable()) {
    return WithLine(
        Status::InvalidArgument(
            "TemplateRuntimeError: a namespace attribute cannot hold a "
            "namespace, loop or callable object"),
        s.line);
  }
  RL_RETURN_IF_ERROR(WithLine(CheckValueDepth(v), s.line));
  ns.namespace_attrs().SetStr(s.target_attr, std::move(v));
  return Status::Ok();
}

Status Renderer::ExecLoop(const Stmt& s, const Value& iterable, int64_t depth0,
                          Scope* scope, std::string* out, Flow* else_flow) {
  ScopeGuard outer(&scope_, scope);
  auto iterated = Iterate(iterable);
  if (!iterated.ok()) return WithLine(iterated.status(), s.expr->line);
  std::shared_ptr<const std::vector<Value>> items = std::move(iterated).value();
  if (s.loop_filter) {
    RL_RETURN_IF_ERROR(WithLine(ReserveList(items->size()), s.line));
    auto kept = std::make_shared<std::vector<Value>>();
    for (const Value& item : *items) {
      if (++iterations_ > options_.limits.max_loop_iterations) {
        return WithLine(LimitError("its loop iteration limit"), s.line);
      }
      if (!meter_.CheckTime()) return WithLine(meter_.status(), s.line);
      Scope tmp(scope_);
      ScopeGuard guard(&scope_, &tmp);
      RL_RETURN_IF_ERROR(Assign(s.targets, item, s.line));
      RL_ASSIGN_OR_RETURN(Value keep, Eval(*s.loop_filter));
      if (Truthy(keep)) kept->push_back(item);
    }
    items = std::move(kept);
  }
  if (items->empty()) {
    if (s.bodies.size() > 1) return ExecBody(s.bodies[1], out, else_flow);
    return Status::Ok();
  }
  auto state = std::make_shared<LoopState>();
  state->items = items;
  state->depth0 = depth0;
  if (s.recursive) {
    state->recursive_stmt = &s;
    state->enclosing_scope = scope;
  }
  const Value loop_value = Value::MakeLoop(state);
  for (size_t i = 0; i < items->size(); ++i) {
    if (++iterations_ > options_.limits.max_loop_iterations) {
      return WithLine(
          LimitError("its loop iteration limit (" +
                     std::to_string(options_.limits.max_loop_iterations) + ")"),
          s.line);
    }
    if (!meter_.CheckTime()) return WithLine(meter_.status(), s.line);
    state->index0 = static_cast<int64_t>(i);
    Scope body(scope);
    ScopeGuard guard(&scope_, &body);
    RL_RETURN_IF_ERROR(Assign(s.targets, (*items)[i], s.line));
    body.Set("loop", loop_value);
    Flow flow = Flow::kNormal;
    RL_RETURN_IF_ERROR(ExecBody(s.bodies[0], out, &flow));
    if (flow == Flow::kBreak) break;
  }
  return Status::Ok();
}

Result<Value> Renderer::CallLoop(const Value& loop, CallArgs& args) {
  const LoopState& state = loop.loop();
  if (state.recursive_stmt == nullptr) {
    return TypeError(
        "The loop must have the 'recursive' marker to be called recursively.");
  }
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    return TypeError("loop() takes exactly one argument");
  }
  if (call_depth_ >= options_.limits.max_call_depth) {
    return LimitError("its recursion depth limit (" +
                      std::to_string(options_.limits.max_call_depth) + ")");
  }
  DepthGuard depth(&call_depth_);
  std::string buf;
  Flow flow = Flow::kNormal;
  RL_RETURN_IF_ERROR(ExecLoop(*static_cast<const Stmt*>(state.recursive_stmt),
                              args.positional[0], state.depth0 + 1,
                              static_cast<Scope*>(state.enclosing_scope), &buf,
                              &flow));
  return BufferValue(&buf);
}

// ---------------------------------------------------------------------------
// Macros

Value Renderer::MakeMacro(const Stmt& macro) {
  const Stmt* m = &macro;
  // A macro defined inside a loop or block sees that block's variables (as
  // a Python closure would); they are copied here, so the macro stays valid
  // after the block ends.
  std::shared_ptr<Scope> closure;
  if (scope_ != root_.get()) {
    closure = std::make_shared<Scope>(root_.get());
    for (const Scope* s = scope_; s != nullptr && s != root_.get();
         s = s->parent) {
      for (const auto& [name, value] : s->vars) {
        if (closure->Find(name) == nullptr)
          closure->vars.emplace_back(name, value);
      }
    }
  }
  return Value::MakeCallable(
      macro.text,
      [m, closure](Renderer& r, CallArgs& args) {
        return r.CallMacro(*m, closure ? closure.get() : r.root_.get(), args);
      },
      /*is_macro=*/true);
}

Result<Value> Renderer::CallMacro(const Stmt& m, Scope* parent,
                                  CallArgs& args) {
  if (call_depth_ >= options_.limits.max_call_depth) {
    return LimitError("its macro call depth limit (" +
                      std::to_string(options_.limits.max_call_depth) +
                      "); is a macro recursing without end?");
  }
  const std::string what = "macro '" + m.text + "'";
  // Macros see the template's top-level variables (and those of the block
  // they were defined in), not the caller's locals.
  Scope scope(parent);
  ScopeGuard guard(&scope_, &scope);
  DepthGuard depth(&call_depth_);
  const size_t n = m.params.size();
  // Binding a parameter or keyword searches the parameters bound so far.
  RL_RETURN_IF_ERROR(Charge(static_cast<int64_t>(
      (n + 1) * (n + args.keyword.size() + 1) + args.positional.size())));
  std::vector<bool> bound(n, false);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      scope.Set(m.params[i].name, args.positional[i]);
      bound[i] = true;
    } else if (m.uses_varargs) {
      varargs.push_back(args.positional[i]);
    } else {
      return TypeError(what + " takes not more than " + std::to_string(n) +
                       " argument(s)");
    }
  }
  Dict kwargs;
  for (auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < n && m.params[i].name != name) ++i;
    if (i < n) {
      if (bound[i])
        return TypeError(what + " got multiple values for argument '" + name +
                         "'");
      scope.Set(name, value);
      bound[i] = true;
    } else if (m.uses_kwargs) {
      kwargs.SetStr(name, value);
    } else {
      return TypeError(what + " takes no keyword argument '" + name + "'");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    if (m.params[i].default_value) {
      RL_ASSIGN_OR_RETURN(Value v, Eval(*m.params[i].default_value));
      scope.Set(m.params[i].name, std::move(v));
    } else {
      scope.Set(m.params[i].name,
                Value::Undefined("parameter '" + m.params[i].name +
                                 "' was not provided"));
    }
  }
  if (m.uses_varargs)
    scope.Set("varargs", Value::MakeTuple(std::move(varargs)));
  if (m.uses_kwargs) scope.Set("kwargs", Value::MakeDict(std::move(kwargs)));
  std::string buf;
  Flow flow = Flow::kNormal;
  RL_RETURN_IF_ERROR(ExecBody(m.bodies[0], &buf, &flow));
  return BufferValue(&buf);
}

// ---------------------------------------------------------------------------
// Expressions

Result<Value> Renderer::Eval(const Expr& e) {
  DepthGuard depth(&eval_depth_);
  if (eval_depth_ > kMaxNesting) {
    return WithLine(LimitError("the nesting limit (recursion too deep)"),
                    e.line);
  }
  Status charged = Step();
  if (!charged.ok()) return WithLine(std::move(charged), e.line);
  Result<Value> r = EvalImpl(e);
  if (!r.ok()) return WithLine(r.status(), e.line);
  return r;
}

Status Renderer::EvalArgs(const Expr& e, CallArgs* args) {
  args->positional.reserve(e.args.size());
  for (const auto& a : e.args) {
    RL_ASSIGN_OR_RETURN(Value v, Eval(*a));
    args->positional.push_back(std::move(v));
  }
  for (const auto& [k, a] : e.kwargs) {
    RL_ASSIGN_OR_RETURN(Value v, Eval(*a));
    args->keyword.emplace_back(k, std::move(v));
  }
  if (e.c) {
    RL_ASSIGN_OR_RETURN(Value extra, Eval(*e.c));
    RL_ASSIGN_OR_RETURN(auto items, Iterate(extra));
    RL_RETURN_IF_ERROR(ReserveList(args->positional.size() + items->size()));
    args->positional.insert(args->positional.end(), items->begin(),
                            items->end());
  }
  if (e.d) {
    RL_ASSIGN_OR_RETURN(Value extra, Eval(*e.d));
    if (!extra.is_dict())
      return TypeError("argument after ** must be a mapping, not " +
                       TypeName(extra));
    RL_RETURN_IF_ERROR(ReserveList(2 * extra.dict().size()));
    for (const auto& [k, v] : extra.dict().items()) {
      if (k.is_string()) {
        RL_RETURN_IF_ERROR(ReserveString(k.str().size()));
      }
      if (!k.is_string()) return TypeError("keywords must be strings");
      args->keyword.emplace_back(k.str(), v);
    }
  }
  return Status::Ok();
}

Result<Value> Renderer::EvalCall(const Expr& e) {
  Value callee;
  if (e.a->kind == ExprKind::kGetAttr) {
    // obj.method(...) calls directly, without a bound-method object.
    RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a->a));
    if (obj.is_undefined()) return FailUndefined(obj);
    bool unsafe = false;
    if (HasMethod(obj, e.a->name, &unsafe)) {
      CallArgs args;
      RL_RETURN_IF_ERROR(EvalArgs(e, &args));
      return CallMethod(*this, obj, e.a->name, args);
    }
    RL_ASSIGN_OR_RETURN(callee, GetAttr(obj, e.a->name));
  } else {
    RL_ASSIGN_OR_RETURN(callee, Eval(*e.a));
  }
  if (callee.is_undefined()) return FailUndefined(callee);
  if (!callee.is_callable() && !callee.is_loop()) {
    return TypeError("'" + TypeName(callee) + "' object is not callable");
  }
  CallArgs args;
  RL_RETURN_IF_ERROR(EvalArgs(e, &args));
  return Call(callee, args);
}

Result<Value> Renderer::EvalFilter(const Expr& e) {
  RL_ASSIGN_OR_RETURN(Value input, Eval(*e.a));
  CallArgs args;
  RL_RETURN_IF_ERROR(EvalArgs(e, &args));
  if (e.filter == nullptr) return ApplyFilter(e.name, input, args);
  return e.filter(*this, input, args);
}

Result<Value> Renderer::EvalTest(const Expr& e) {
  RL_ASSIGN_OR_RETURN(Value input, Eval(*e.a));
  CallArgs args;
  RL_RETURN_IF_ERROR(EvalArgs(e, &args));
  bool result;
  if (e.test == nullptr) {
    RL_ASSIGN_OR_RETURN(result, ApplyTest(e.name, input, args));
  } else {
    RL_ASSIGN_OR_RETURN(result, e.test(*this, input, args));
  }
  return Value::Bool(result != e.negated);
}

Result<Value> Renderer::EvalSlice(const Expr& e) {
  RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
  if (obj.is_undefined()) return FailUndefined(obj);
  std::optional<int64_t> bounds[3];
  const Expr* parts[3] = {e.b.get(), e.c.get(), e.d.get()};
  for (int i = 0; i < 3; ++i) {
    if (parts[i] == nullptr) continue;
    RL_ASSIGN_OR_RETURN(Value v, Eval(*parts[i]));
    if (v.is_none()) continue;
    if (!v.is_int() && !v.is_bool()) {
      // Python raises TypeError, which Jinja's getitem turns into Undefined.
      return Value::Undefined(ObjectTypeRepr(obj) + " has no element slice");
    }
    bounds[i] = v.int_value();
  }
  return SliceValue(*this, obj, bounds[0], bounds[1], bounds[2]);
}

Result<Value> Renderer::EvalImpl(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName:
      return Lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*a));
        items.push_back(std::move(v));
      }
      Value v = e.kind == ExprKind::kList ? Value::MakeList(std::move(items))
                                          : Value::MakeTuple(std::move(items));
      RL_RETURN_IF_ERROR(CheckValueDepth(v));
      return v;
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        RL_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
        RL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
        RL_RETURN_IF_ERROR(Charge(Dict::LookupUnits(k)));
        if (k.is_string()) {
          RL_RETURN_IF_ERROR(Reserve(StringValueBytes(k.str().size())));
        }
        RL_RETURN_IF_ERROR(d.Set(std::move(k), std::move(v)));
      }
      Value v = Value::MakeDict(std::move(d));
      RL_RETURN_IF_ERROR(CheckValueDepth(v));
      return v;
    }
    case ExprKind::kGetAttr: {
      RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
      if (obj.is_undefined()) return FailUndefined(obj);
      RL_ASSIGN_OR_RETURN(Value key, Eval(*e.b));
      return GetItem(obj, key);
    }
    case ExprKind::kSlice:
      return EvalSlice(e);
    case ExprKind::kCall:
      return EvalCall(e);
    case ExprKind::kFilter:
      return EvalFilter(e);
    case ExprKind::kTest:
      return EvalTest(e);
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      RL_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
      return ApplyUnary(v, e.kind == ExprKind::kNeg);
    }
    case ExprKind::kNot: {
      RL_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
      return Value::Bool(!Truthy(v));
    }
    case ExprKind::kBinary: {
      RL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      RL_ASSIGN_OR_RETURN(Value b, Eval(*e.b));
      return ApplyBinary(*this, e.binop, a, b);
    }
    case ExprKind::kAnd: {
      RL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      if (!Truthy(a)) return a;
      return Eval(*e.b);
    }
    case ExprKind::kOr: {
      RL_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      if (Truthy(a)) return a;
      return Eval(*e.b);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const auto& a : e.args) {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*a));
        RL_RETURN_IF_ERROR(AppendStr(v, &out));
      }
      return Value::Str(std::move(out));
    }
    case ExprKind::kCompare: {
      RL_ASSIGN_OR_RETURN(Value left, Eval(*e.a));
      for (const auto& [op, operand] : e.cmp) {
        RL_ASSIGN_OR_RETURN(Value right, Eval(*operand));
        RL_ASSIGN_OR_RETURN(bool ok, ApplyCompare(op, left, right, &meter_));
        if (!ok) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case ExprKind::kCondExpr: {
      RL_ASSIGN_OR_RETURN(Value c, Eval(*e.a));
      if (Truthy(c)) return Eval(*e.b);
      if (e.c) return Eval(*e.c);
      return Value::Undefined(
          "the inline if-expression on line " + std::to_string(e.line) +
          " evaluated to false and no else section was defined.");
    }
    case ExprKind::kBlockValue:
      if (block_values_.empty())
        return Status::Internal("block value outside a block");
      return block_values_.back();
  }
  return Status::Internal("unknown expression");
}

}  // namespace redline::model::chat::jinja

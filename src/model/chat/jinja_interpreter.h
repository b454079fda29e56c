// The Jinja interpreter: a parsed Template and the Renderer that walks it.
//
// Semantics are Jinja2 3.1's as configured by Hugging Face transformers for
// chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loop controls, no autoescape), with Python's value semantics: None prints
// "None", `+` on a str and None is a TypeError, dict keys keep insertion
// order, strings index by code point, lists and dicts cannot be mutated
// (the sandbox refuses list.append and dict.update).
//
// Undefined values follow jinja2.Undefined: they print as "", are falsy,
// iterate as empty, have length 0 and work with `~`, `is defined`, `in` and
// `==`; arithmetic, attribute access, item access and calls on them fail
// with an UndefinedError naming the missing variable or attribute.
//
// Errors: a render error is an InvalidArgument Status whose message starts
// with the template line and the Python exception type, e.g.
// "line 12: TypeError: can only concatenate str (not \"NoneType\") to str".
// raise_exception(msg) fails with a Status whose message is exactly `msg`.
// A tripped resource limit or budget is ResourceExhausted. No exception
// escapes (an allocation failure, which the budgets should make impossible,
// becomes ResourceExhausted too).
#ifndef REDLINE_MODEL_CHAT_JINJA_INTERPRETER_H_
#define REDLINE_MODEL_CHAT_JINJA_INTERPRETER_H_

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_budget.h"
#include "model/chat/jinja_value.h"
#include "model/chat/render_limits.h"

namespace redline::model::chat::jinja {

using RenderLimits = ::redline::model::chat::RenderLimits;

struct RenderOptions {
  RenderLimits limits;
  RenderBudget budget;
  // The wall-clock time strftime_now() formats, as broken-down local time.
  std::tm now{};
};

// A parsed template. Immutable after Parse; Render may be called from many
// threads at once. Cost: Parse is O(source); Render is O(work the template
// does), bounded by RenderLimits and RenderBudget.
class Template {
 public:
  // Syntax errors name the line ("line 3: unknown tag 'include'").
  static Result<std::shared_ptr<const Template>> Parse(std::string_view source);

  // Renders with `variables` as the template's context.
  Result<std::string> Render(const Dict& variables,
                             const RenderOptions& options) const;

  const Body& body() const { return body_; }

 private:
  Body body_;
};

// One render in progress. Created by Template::Render on its stack; builtins
// receive it to evaluate attributes, call filters and account for work.
// Not thread-safe (one render, one thread).
class Renderer {
 public:
  Renderer(const Template& tmpl, const Dict& variables,
           const RenderOptions& options);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  Result<std::string> Run();

  const RenderOptions& options() const { return options_; }

  // Budget accounting. Builtins call these BEFORE doing the work, with
  // sizes computed from their inputs, so that no single operation can run
  // long or allocate much before it is refused.
  //
  // Charges `units` of work (bytes or elements an operation is about to
  // touch); fails once the work or time budget is spent.
  Status Charge(int64_t units);
  // Fails when holding `bytes` more (a result or temporary about to be
  // built) would exceed the memory budget.
  Status Reserve(size_t bytes);
  // Before building a string of `bytes`: the size limit, the memory budget
  // and `bytes` units of work.
  Status ReserveString(size_t bytes);
  // Before building a list of `count` elements (their own objects aside):
  // the memory budget and `count` units of work.
  Status ReserveList(size_t count);
  // The error of an exhausted budget, OK before. Code that stopped early
  // because the meter ran out returns this.
  const Status& BudgetStatus() const { return meter_.status(); }
  Meter* meter() { return &meter_; }
  // Fails when a string of `bytes` would exceed max_output_bytes.
  Status CheckStringSize(size_t bytes) const;
  // The errors of a result computed not to fit max_output_bytes, and of
  // one computed not to fit the memory budget. Never OK, whatever the
  // limits are set to.
  Status TooLongError() const;
  Status OutOfMemoryError() { return meter_.ExceedMemory(); }
  // Fails when `v` nests deeper than max_value_depth.
  Status CheckValueDepth(const Value& v) const;

  // str(v) / repr(v), failing (size limit or budget) instead of building
  // oversized text.
  Status AppendStr(const Value& v, std::string* out);
  Result<std::string> Str(const Value& v);
  Result<std::string> ReprOf(const Value& v);
  // Jinja's soft_str: strings as they are, anything else str()-ed.
  Result<Value> SoftStr(const Value& v);
  // Python `a == b` with its work charged.
  Result<bool> Equal(const Value& a, const Value& b);

  // Jinja's environment.getattr / getitem (sandboxed): a missing attribute
  // or item is an Undefined value, not an error.
  Result<Value> GetAttr(const Value& obj, std::string_view name);
  Result<Value> GetItem(const Value& obj, const Value& key);
  // Resolves a dotted attribute path ("function.name", "0") the way
  // filters such as map(attribute=...) do.
  Result<Value> GetAttrPath(const Value& obj, std::string_view path);

  // Calls a callable value.
  Result<Value> Call(const Value& callee, CallArgs& args);
  // Runs a filter or test by name (for map('upper'), select('odd')).
  Result<Value> ApplyFilter(std::string_view name, const Value& input,
                            CallArgs& args);
  Result<bool> ApplyTest(std::string_view name, const Value& input,
                         CallArgs& args);

  // raise_exception(): aborts the render; Render() returns exactly `message`.
  Status RaiseTemplateError(std::string message);

  // Sequence of a value for iteration: list/tuple items, dict keys, string
  // characters, nothing for Undefined; TypeError for others.
  Result<std::shared_ptr<const std::vector<Value>>> Iterate(const Value& v);

  // A variable scope (template top level, loop iteration, macro call,
  // block). Declared here so that helpers in the .cc can name it.
  struct Scope;

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // One evaluation step (statement, expression or call): counts toward
  // max_steps and the work budget and checks the memory budget.
  Status Step();

  Status ExecBody(const Body& body, std::string* out, Flow* flow);
  Status Exec(const Stmt& s, std::string* out, Flow* flow);
  // Runs loop `s` over `iterable` at recursion depth `depth0` in `scope`.
  // `flow` receives a break/continue from the else block (which belongs to
  // the enclosing loop).
  Status ExecLoop(const Stmt& s, const Value& iterable, int64_t depth0,
                  Scope* scope, std::string* out, Flow* flow);
  Status ExecSet(const Stmt& s);
  Status Assign(const std::vector<std::string>& targets, const Value& value,
                int line);
  // Output buffers (the render's, a macro's, a block's) hold their bytes on
  // the meter while they grow.
  Status AppendOutput(const Value& v, std::string* out);
  Status AppendText(std::string_view text, std::string* out);
  // The finished buffer as a string value (its bytes now held by the value).
  Value BufferValue(std::string* buf);

  Result<Value> Eval(const Expr& e);
  Result<Value> EvalImpl(const Expr& e);
  Result<Value> EvalCall(const Expr& e);
  Result<Value> EvalFilter(const Expr& e);
  Result<Value> EvalTest(const Expr& e);
  Result<Value> EvalSlice(const Expr& e);
  Status EvalArgs(const Expr& e, CallArgs* args);
  Result<Value> CallMacro(const Stmt& macro, Scope* parent, CallArgs& args);
  Value Lookup(std::string_view name) const;
  Value MakeMacro(const Stmt& macro);
  // Calls a recursive loop object: loop(items).
  Result<Value> CallLoop(const Value& loop, CallArgs& args);

  Status WithLine(Status s, int line) const;

  const Template& template_;
  const RenderOptions& options_;
  // Declared before every member that holds values: the values the render
  // made release their bytes on it when they are destroyed.
  Meter meter_;
  std::unique_ptr<Scope> root_;
  Scope* scope_ = nullptr;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  std::vector<Value> block_values_;
  std::optional<std::string> template_error_;
};

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_INTERPRETER_H_

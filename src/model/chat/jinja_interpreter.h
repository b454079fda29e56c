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
// A tripped resource limit is ResourceExhausted. No exception escapes.
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
#include "model/chat/jinja_value.h"
#include "model/chat/render_limits.h"

namespace redline::model::chat::jinja {

using RenderLimits = ::redline::model::chat::RenderLimits;

struct RenderOptions {
  RenderLimits limits;
  // The wall-clock time strftime_now() formats, as broken-down local time.
  std::tm now{};
};

// A parsed template. Immutable after Parse; Render may be called from many
// threads at once. Cost: Parse is O(source); Render is O(work the template
// does), bounded by RenderLimits.
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

  // Accounts for `steps` units of work; fails once max_steps is exceeded.
  Status Charge(int64_t steps);
  // Fails when a string of `bytes` would exceed max_output_bytes.
  Status CheckStringSize(size_t bytes) const;
  // Fails when `v` nests deeper than max_value_depth.
  Status CheckValueDepth(const Value& v) const;

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
  Status AppendOutput(const Value& v, std::string* out);

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

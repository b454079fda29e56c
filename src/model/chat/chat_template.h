// Chat templates: render a model's Jinja `tokenizer.chat_template` with a
// conversation, exactly as Hugging Face transformers' apply_chat_template
// does (Jinja2 3.1, trim_blocks, lstrip_blocks, transformers' tojson,
// raise_exception and strftime_now).
//
//   RL_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Parse(gguf_template));
//   ChatTemplateInputs in;
//   in.messages = request["messages"].as_array();
//   in.bos_token = "<|begin_of_text|>";
//   RL_ASSIGN_OR_RETURN(std::string prompt, t.Render(in));
//
// Variables the template sees: `messages`, `tools` (None when absent),
// `documents` (None), `add_generation_prompt`, `bos_token` and `eos_token`
// (undefined when not given), plus every entry of `extra_context` (which may
// override the others, e.g. `enable_thinking`, `date_string`).
//
// Errors (never exceptions):
//  * Parse: InvalidArgument naming the line ("line 3: unknown tag 'call'").
//  * Render, template called raise_exception(msg): InvalidArgument whose
//    message is exactly `msg` ("System role not supported"), so servers can
//    relay it to the client.
//  * Render, the template's own expression failed under Jinja2 semantics:
//    InvalidArgument "line N: <PythonError>: <message>", e.g.
//    "line 7: TypeError: can only concatenate str (not \"NoneType\") to str".
//  * Render, a RenderLimits bound or a RenderBudget (work, memory, time)
//    tripped: ResourceExhausted naming it, e.g. "chat template exceeded its
//    memory budget of 64 MiB". A template from a model file cannot hang the
//    caller or exhaust its memory.
#ifndef REDLINE_MODEL_CHAT_CHAT_TEMPLATE_H_
#define REDLINE_MODEL_CHAT_CHAT_TEMPLATE_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/chat/jinja_budget.h"
#include "model/chat/render_limits.h"

namespace redline::model::chat {

namespace jinja {
class Template;
}  // namespace jinja

struct ChatTemplateInputs {
  // OpenAI-style messages: role, content (string or null), and for tool use
  // tool_calls, tool_call_id, name. Object key order is preserved (tojson
  // prints keys in insertion order).
  boost::json::array messages;
  // OpenAI-style function schemas; nullopt passes `tools` as None.
  std::optional<boost::json::array> tools;
  bool add_generation_prompt = true;
  // nullopt leaves the variable undefined (e.g. Qwen has no BOS token).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Further variables; they win over the ones above.
  boost::json::object extra_context;
  // The wall-clock time strftime_now() formats (broken-down local time);
  // nullopt uses the current local time. Tests pin it.
  std::optional<std::tm> now;
  RenderLimits limits;
  // Work, memory and wall-clock time one render may spend (defaults: 2^28
  // work units, 64 MiB, 100 ms).
  RenderBudget budget;
};

// A parsed chat template.
//
// Ownership: holds the source and the parsed tree (shared, immutable), so
// copies are cheap. Thread-safety: immutable after Parse; Render may run
// concurrently from any number of threads. Cost: Parse is linear in the
// source; Render is linear in the work the template does (typically tens of
// microseconds), bounded by `inputs.limits` and `inputs.budget`.
class ChatTemplate {
 public:
  // Parses a Jinja chat template. Syntax errors name the line.
  static Result<ChatTemplate> Parse(std::string source);

  // Renders the prompt text. See the header comment for the error contract.
  Result<std::string> Render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const { return *source_; }

 private:
  ChatTemplate() = default;
  Result<std::string> RenderChecked(const ChatTemplateInputs& inputs) const;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Template> template_;
};

// Jinja source of a built-in template equivalent to the official template
// of a model family: "chatml", "llama3", "llama2", "mistral", "phi3",
// "gemma". NotFound for other names (the message lists the valid ones).
Result<std::string> BuiltinChatTemplate(std::string_view name);

// The BOS/EOS token texts of a built-in template's model family (e.g.
// llama3: <|begin_of_text|>, <|eot_id|>), for rendering a built-in without a
// model file. NotFound for other names.
struct BuiltinSpecialTokens {
  std::string bos_token;
  std::string eos_token;
};
Result<BuiltinSpecialTokens> BuiltinChatTemplateTokens(std::string_view name);

// Names accepted by BuiltinChatTemplate, in a stable order.
std::vector<std::string_view> BuiltinChatTemplateNames();

}  // namespace redline::model::chat

#endif  // REDLINE_MODEL_CHAT_CHAT_TEMPLATE_H_

#include "model/chat/chat_template.h"

#include <chrono>
#include <new>
#include <stdexcept>
#include <utility>

#include "model/chat/jinja_interpreter.h"
#include "model/chat/jinja_json.h"

namespace redline::model::chat {
namespace {

std::tm LocalNow() {
  const std::time_t t =
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

template <typename Json>
Result<jinja::Value> JsonArg(const Json& v, const RenderLimits& limits,
                             std::string_view what) {
  auto converted = jinja::ValueFromJson(v, limits.max_value_depth);
  if (!converted.ok()) return converted.status().WithContext(what);
  return converted;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::Parse(std::string source) {
  RL_ASSIGN_OR_RETURN(auto parsed, jinja::Template::Parse(source));
  ChatTemplate t;
  t.source_ = std::make_shared<const std::string>(std::move(source));
  t.template_ = std::move(parsed);
  return t;
}

Result<std::string> ChatTemplate::Render(
    const ChatTemplateInputs& inputs) const {
  // Converting huge inputs can run out of memory too; no exception leaves
  // a render.
  try {
    return RenderChecked(inputs);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("chat template ran out of memory");
  } catch (const std::length_error&) {
    return Status::ResourceExhausted(
        "chat template built a string or list too long to hold");
  }
}

Result<std::string> ChatTemplate::RenderChecked(
    const ChatTemplateInputs& inputs) const {
  jinja::Dict vars;
  RL_ASSIGN_OR_RETURN(jinja::Value messages,
                      JsonArg(inputs.messages, inputs.limits, "messages"));
  vars.SetStr("messages", std::move(messages));
  if (inputs.tools) {
    RL_ASSIGN_OR_RETURN(jinja::Value tools,
                        JsonArg(*inputs.tools, inputs.limits, "tools"));
    vars.SetStr("tools", std::move(tools));
  } else {
    vars.SetStr("tools", jinja::Value::None());
  }
  vars.SetStr("documents", jinja::Value::None());
  vars.SetStr("add_generation_prompt",
              jinja::Value::Bool(inputs.add_generation_prompt));
  if (inputs.bos_token)
    vars.SetStr("bos_token", jinja::Value::Str(*inputs.bos_token));
  if (inputs.eos_token)
    vars.SetStr("eos_token", jinja::Value::Str(*inputs.eos_token));
  for (const auto& kv : inputs.extra_context) {
    RL_ASSIGN_OR_RETURN(jinja::Value v,
                        JsonArg(kv.value(), inputs.limits, kv.key()));
    vars.SetStr(std::string(kv.key()), std::move(v));
  }
  jinja::RenderOptions options;
  options.limits = inputs.limits;
  options.budget = inputs.budget;
  options.now = inputs.now ? *inputs.now : LocalNow();
  return template_->Render(vars, options);
}

}  // namespace redline::model::chat

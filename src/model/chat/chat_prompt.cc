#include "model/chat/chat_prompt.h"

#include <boost/json/object.hpp>

#include "base/logging.h"
#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::model::chat {

struct ChatPrompt::Impl {
  explicit Impl(ChatTemplate t) : tmpl(std::move(t)) {}
  ChatTemplate tmpl;
  std::optional<std::string> bos_text;
  std::optional<std::string> eos_text;
};

ChatPrompt::ChatPrompt(const Model& model) : model_(model) {}
ChatPrompt::~ChatPrompt() = default;

Result<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(
    const Model& model, const std::string& template_source,
    const std::string& origin, const RenderBudget& budget) {
  const Tokenizer* tok = model.tokenizer();
  if (tok == nullptr) {
    return Status::InvalidArgument("the model has no usable tokenizer: " +
                                   model.tokenizer_status().ToString());
  }
  std::string source = template_source;
  std::string where = origin;
  if (source.empty()) {
    source = model.chat_template();
    where = "model";
  }
  if (source.empty()) {
    RL_ASSIGN_OR_RETURN(source, BuiltinChatTemplate("chatml"));
    where = "builtin:chatml (the model has no chat template)";
    RL_LOG(kWarning, "the model has no chat template; using ChatML");
  }
  auto parsed = ChatTemplate::Parse(source);
  if (!parsed.ok())
    return parsed.status().WithContext("chat template (" + where + ")");
  std::unique_ptr<ChatPrompt> p(new ChatPrompt(model));
  p->impl_ = std::make_unique<Impl>(std::move(parsed).value());
  if (tok->bos_id() >= 0) p->impl_->bos_text = tok->TokenText(tok->bos_id());
  if (tok->eos_id() >= 0) p->impl_->eos_text = tok->TokenText(tok->eos_id());
  p->origin_ = where;
  p->budget_ = budget;
  return p;
}

Result<std::string> ChatPrompt::Render(const boost::json::array& messages,
                                       const boost::json::array& tools) const {
  ChatTemplateInputs in;
  in.messages = messages;
  for (boost::json::value& m : in.messages) {
    boost::json::object* o = m.if_object();
    if (o == nullptr) continue;
    if (boost::json::value* c = o->if_contains("content"); c && c->is_null())
      *c = "";
  }
  if (!tools.empty()) in.tools = tools;
  in.add_generation_prompt = true;
  in.budget = budget_;
  in.bos_token = impl_->bos_text;
  in.eos_token = impl_->eos_text;
  auto text = impl_->tmpl.Render(in);
  if (!text.ok()) {
    // Template errors are the request's fault (raise_exception) or a bound
    // tripped by its size; both are 400s.
    return Status::InvalidArgument("chat template: " + text.status().message());
  }
  return text;
}

Result<std::vector<int32_t>> ChatPrompt::ChatTokens(
    const boost::json::array& messages, const boost::json::array& tools) const {
  RL_ASSIGN_OR_RETURN(std::string text, Render(messages, tools));
  const Tokenizer& tok = *model_.tokenizer();
  std::vector<int32_t> ids;
  if (tok.add_bos() && tok.bos_id() >= 0) {
    ids.push_back(tok.bos_id());
    tok.EncodeAppend(text, /*add_special=*/false, /*parse_special=*/true, &ids);
    // The template wrote BOS itself: keep one.
    if (ids.size() >= 2 && ids[1] == tok.bos_id()) ids.erase(ids.begin());
  } else {
    tok.EncodeAppend(text, /*add_special=*/false, /*parse_special=*/true, &ids);
  }
  return ids;
}

std::vector<int32_t> ChatPrompt::CompletionTokens(
    const std::string& text) const {
  return model_.tokenizer()->Encode(text, /*add_special=*/true,
                                    /*parse_special=*/true);
}

}  // namespace redline::model::chat

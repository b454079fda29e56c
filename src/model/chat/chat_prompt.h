// ChatPrompt: turns chat messages into prompt token ids with the model's
// chat template, and completion prompts (text or ids) into token ids. Shared
// by `redline run` and `redline serve`, so both render the same prompt.
//
// The template is the model's tokenizer.chat_template, or the one given
// instead (--chat-template-file / --chat-template NAME), run by model/chat's
// Jinja interpreter. A model without a template gets the built-in ChatML one
// (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n), as
// llama.cpp falls back to chatml; a warning is logged.
//
// Tokenization: the rendered text is tokenized with special tokens parsed
// (the template writes them as text) and without automatic BOS/EOS; BOS is
// prepended when the tokenizer wants one and the template did not write it
// (llama.cpp's rule). Completion text prompts are tokenized with BOS as the
// tokenizer says and special tokens parsed, as llama.cpp does.
//
// Ownership: borrows the Model (must outlive this). Thread-safety: const
// methods may run concurrently. Cost: rendering is linear in the messages;
// tokenization tens of MB/s (both run on the caller's thread).
#ifndef REDLINE_MODEL_CHAT_CHAT_PROMPT_H_
#define REDLINE_MODEL_CHAT_CHAT_PROMPT_H_

#include <boost/json/array.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/arch/model.h"
#include "model/chat/jinja_budget.h"

namespace redline::model::chat {

class ChatPrompt {
 public:
  // `template_source`: template to use instead of the model's (empty: the
  // model's); `origin` describes it for logs. Errors: InvalidArgument when
  // the model has no tokenizer or the template does not parse.
  // `budget` bounds each render (time, memory, work); a conversation that
  // exceeds it is refused with an error naming the limit.
  static Result<std::unique_ptr<ChatPrompt>> Create(
      const Model& model, const std::string& template_source,
      const std::string& origin, const RenderBudget& budget = {});
  ~ChatPrompt();

  // The rendered prompt text (ends with the assistant turn's opening).
  // `messages` as the OpenAI API sends them; a null content (an assistant
  // turn that only calls tools) is given to the template as "", as
  // llama.cpp does, since templates concatenate and trim content.
  // Errors: InvalidArgument when the template rejects the conversation
  // (e.g. raise_exception for a role order it does not allow).
  Result<std::string> Render(const boost::json::array& messages,
                             const boost::json::array& tools) const;

  // Render + tokenize.
  Result<std::vector<int32_t>> ChatTokens(
      const boost::json::array& messages,
      const boost::json::array& tools) const;

  // Tokens of a completion prompt given as text.
  std::vector<int32_t> CompletionTokens(const std::string& text) const;

  // Where the template came from: "model", "file", "builtin:NAME" or
  // "builtin:chatml (model has none)".
  const std::string& origin() const { return origin_; }

 private:
  explicit ChatPrompt(const Model& model);
  struct Impl;
  const Model& model_;
  std::unique_ptr<Impl> impl_;
  std::string origin_;
  RenderBudget budget_;
};

}  // namespace redline::model::chat

#endif  // REDLINE_MODEL_CHAT_CHAT_PROMPT_H_

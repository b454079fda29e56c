// redline chat-template: shows exactly the prompt text a model receives for
// a conversation, rendered with its chat template.
//
//   redline chat-template -m model.gguf --messages chat.json
//   redline chat-template --chat-template tmpl.jinja --messages chat.json
//   redline chat-template --chat-template llama3 --messages chat.json
//
// chat.json is a list of messages, or a chat-request-shaped object with
// `messages`, and optionally `tools`, `add_generation_prompt` and
// `chat_template_kwargs` (extra template variables such as enable_thinking).
// The rendering goes to standard output byte for byte; errors go to standard
// error with exit status 1 (2 for bad flags).
#include <fmt/format.h>

#include <boost/json/parse.hpp>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "cli/command_registry.h"
#include "model/chat/chat_template.h"
#include "model/gguf/gguf.h"

namespace redline::cli {
namespace {

struct ChatTemplateFlags {
  std::string model;
  std::string template_file;
  std::string builtin;
  std::string chat_template;  // built-in name or Jinja file
  std::string messages_file;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  bool no_generation_prompt = false;
  std::string now;  // "YYYY-MM-DD HH:MM:SS" for strftime_now
};

int Fail(std::string_view message) {
  fmt::print(stderr, "chat-template: {}\n", message);
  return 1;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in),
              std::istreambuf_iterator<char>());
  return true;
}

// Text of the token whose id is stored under `key`, if any.
std::optional<std::string> TokenText(const model::gguf::GgufFile& file,
                                     const std::vector<std::string>& tokens,
                                     std::string_view key) {
  auto id = file.GetInt(key);
  if (!id.ok() || *id < 0 || static_cast<size_t>(*id) >= tokens.size())
    return std::nullopt;
  return tokens[static_cast<size_t>(*id)];
}

// Loads the template source, and from a GGUF file the BOS/EOS token texts.
int LoadTemplate(ChatTemplateFlags f, std::string* source,
                 model::chat::ChatTemplateInputs* in) {
  const int sources = !f.model.empty() + !f.template_file.empty() +
                      !f.builtin.empty() + !f.chat_template.empty();
  if (sources != 1) {
    fmt::print(stderr,
               "chat-template: give exactly one of -m FILE, --chat-template "
               "NAME|FILE (--builtin NAME, --template FILE)\n");
    return 2;
  }
  // --chat-template: a built-in name, else a file (as in run and serve).
  if (!f.chat_template.empty()) {
    if (model::chat::BuiltinChatTemplate(f.chat_template).ok())
      f.builtin = f.chat_template;
    else
      f.template_file = f.chat_template;
  }
  if (!f.template_file.empty()) {
    if (!ReadFile(f.template_file, source))
      return Fail("cannot read " + f.template_file);
    return 0;
  }
  if (!f.builtin.empty()) {
    auto builtin = model::chat::BuiltinChatTemplate(f.builtin);
    if (!builtin.ok()) return Fail(builtin.status().message());
    *source = *builtin;
    // A built-in renders without a model file, so it brings its family's
    // special tokens (--bos-token/--eos-token still override them).
    auto tokens = model::chat::BuiltinChatTemplateTokens(f.builtin);
    if (tokens.ok()) {
      in->bos_token = tokens->bos_token;
      in->eos_token = tokens->eos_token;
    }
    return 0;
  }
  auto file =
      model::gguf::GgufFile::Open(f.model, /*require_supported_types=*/false);
  if (!file.ok()) return Fail(file.status().ToString());
  auto tmpl = file->GetString("tokenizer.chat_template");
  if (!tmpl.ok()) {
    return Fail(
        f.model +
        " has no tokenizer.chat_template; use --builtin NAME (one of " +
        fmt::format("{}",
                    fmt::join(model::chat::BuiltinChatTemplateNames(), ", ")) +
        ")");
  }
  *source = *tmpl;
  auto tokens = file->GetStringArray("tokenizer.ggml.tokens");
  if (tokens.ok()) {
    in->bos_token = TokenText(*file, *tokens, "tokenizer.ggml.bos_token_id");
    in->eos_token = TokenText(*file, *tokens, "tokenizer.ggml.eos_token_id");
  }
  return 0;
}

// Fills messages, tools, add_generation_prompt and extra variables.
int LoadMessages(const ChatTemplateFlags& f,
                 model::chat::ChatTemplateInputs* in) {
  std::string text;
  if (!ReadFile(f.messages_file, &text))
    return Fail("cannot read " + f.messages_file);
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 256;
  boost::json::value doc = boost::json::parse(text, ec, {}, options);
  if (ec) return Fail(f.messages_file + ": invalid JSON: " + ec.message());
  if (doc.is_array()) {
    in->messages = doc.as_array();
    return 0;
  }
  if (!doc.is_object() || !doc.as_object().contains("messages") ||
      !doc.as_object().at("messages").is_array()) {
    return Fail(f.messages_file +
                ": expected a list of messages or an object with \"messages\"");
  }
  const boost::json::object& obj = doc.as_object();
  in->messages = obj.at("messages").as_array();
  if (const auto* tools = obj.if_contains("tools");
      tools && !tools->is_null()) {
    if (!tools->is_array())
      return Fail(f.messages_file + ": \"tools\" must be a list");
    in->tools = tools->as_array();
  }
  if (const auto* gen = obj.if_contains("add_generation_prompt")) {
    if (!gen->is_bool())
      return Fail(f.messages_file +
                  ": \"add_generation_prompt\" must be a boolean");
    in->add_generation_prompt = gen->as_bool();
  }
  if (const auto* kwargs = obj.if_contains("chat_template_kwargs");
      kwargs && !kwargs->is_null()) {
    if (!kwargs->is_object())
      return Fail(f.messages_file +
                  ": \"chat_template_kwargs\" must be an object");
    in->extra_context = kwargs->as_object();
  }
  return 0;
}

int RunChatTemplate(const ChatTemplateFlags& f) {
  model::chat::ChatTemplateInputs in;
  std::string source;
  if (int rc = LoadTemplate(f, &source, &in); rc != 0) return rc;
  if (int rc = LoadMessages(f, &in); rc != 0) return rc;
  if (f.bos_token) in.bos_token = f.bos_token;
  if (f.eos_token) in.eos_token = f.eos_token;
  if (f.no_generation_prompt) in.add_generation_prompt = false;
  if (!f.now.empty()) {
    std::tm tm{};
    const char* end = strptime(f.now.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
    if (end == nullptr || *end != '\0')
      return Fail("--now wants \"YYYY-MM-DD HH:MM:SS\"");
    std::tm normalized = tm;
    normalized.tm_isdst = -1;
    std::mktime(&normalized);  // fills weekday and day of year
    tm.tm_wday = normalized.tm_wday;
    tm.tm_yday = normalized.tm_yday;
    in.now = tm;
  }

  auto tmpl = model::chat::ChatTemplate::Parse(std::move(source));
  if (!tmpl.ok()) return Fail("template: " + tmpl.status().message());
  auto out = tmpl->Render(in);
  if (!out.ok()) return Fail(out.status().message());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<ChatTemplateFlags>();
  sub.add_option("-m,--model", f->model,
                 "GGUF file: use its tokenizer.chat_template and BOS/EOS");
  sub.add_option("--chat-template", f->chat_template,
                 "Chat template: a built-in name (chatml, llama3, llama2, "
                 "mistral, phi3, gemma) or a Jinja file");
  sub.add_option("--template,--chat-template-file", f->template_file,
                 "Jinja chat template file (same as --chat-template FILE)");
  sub.add_option("--builtin", f->builtin,
                 "Built-in template by name (same as --chat-template NAME)");
  sub.add_option("--messages", f->messages_file,
                 "JSON: a list of messages, or an object with messages, tools, "
                 "add_generation_prompt")
      ->required();
  sub.add_option("--bos-token", f->bos_token,
                 "bos_token text (overrides the GGUF's)");
  sub.add_option("--eos-token", f->eos_token,
                 "eos_token text (overrides the GGUF's)");
  sub.add_flag("--no-generation-prompt", f->no_generation_prompt,
               "Render with add_generation_prompt = false");
  sub.add_option(
      "--now", f->now,
      "Time strftime_now() sees, \"YYYY-MM-DD HH:MM:SS\" (default: now)");
  sub.callback([f, exit_code] { *exit_code = RunChatTemplate(*f); });
}

}  // namespace

RL_REGISTER_COMMAND_NAMED(
    chat_template, "chat-template",
    "Show the prompt text a chat template makes of a conversation", Setup);

}  // namespace redline::cli

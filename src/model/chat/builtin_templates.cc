// Built-in chat templates, for GGUF files without `tokenizer.chat_template`
// and for `--chat-template NAME`. Each is the Jinja source its model family
// publishes (tokenizer_config.json of the reference instruct model), so
// they render byte-identically to the originals.
#include <array>
#include <string>

#include "model/chat/chat_template.h"

namespace redline::model::chat {
namespace {

struct Builtin {
  std::string_view name;
  std::string_view source;
  // The family's BOS/EOS texts (its tokenizer's special tokens).
  std::string_view bos_token;
  std::string_view eos_token;
};

// ChatML (Qwen, OpenHermes, Yi, ...).
constexpr std::string_view kChatml =
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Meta-Llama-3-8B-Instruct.
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}"
    "{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
    "%}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";

// Llama-2-7b-chat-hf.
constexpr std::string_view kLlama2 =
    "{% if messages[0]['role'] == 'system' %}"
    "{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false "
    "%}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
    "content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' "
    "+ eos_token }}"
    "{% endif %}"
    "{% endfor %}";

// Mistral-7B-Instruct-v0.2.
constexpr std::string_view kMistral =
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' "
    "[/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + "
    "eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are "
    "supported!') }}"
    "{% endif %}"
    "{% endfor %}";

// Phi-3.5-mini-instruct.
constexpr std::string_view kPhi3 =
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + "
    "'<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ "
    "eos_token }}{% endif %}";

// gemma-2-2b-it.
constexpr std::string_view kGemma =
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
    "not supported') }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
    "'<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

constexpr std::array<Builtin, 6> kBuiltins = {{
    {"chatml", kChatml, "<|endoftext|>", "<|im_end|>"},
    {"llama3", kLlama3, "<|begin_of_text|>", "<|eot_id|>"},
    {"llama2", kLlama2, "<s>", "</s>"},
    {"mistral", kMistral, "<s>", "</s>"},
    {"phi3", kPhi3, "<s>", "<|endoftext|>"},
    {"gemma", kGemma, "<bos>", "<eos>"},
}};

}  // namespace

Result<std::string> BuiltinChatTemplate(std::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (b.name == name) return std::string(b.source);
  }
  std::string names;
  for (const Builtin& b : kBuiltins) {
    if (!names.empty()) names += ", ";
    names += b.name;
  }
  return Status::NotFound("unknown built-in chat template '" +
                          std::string(name) + "' (known: " + names + ")");
}

Result<BuiltinSpecialTokens> BuiltinChatTemplateTokens(std::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (b.name == name)
      return BuiltinSpecialTokens{std::string(b.bos_token),
                                  std::string(b.eos_token)};
  }
  return BuiltinChatTemplate(name).status();
}

std::vector<std::string_view> BuiltinChatTemplateNames() {
  std::vector<std::string_view> names;
  for (const Builtin& b : kBuiltins) names.push_back(b.name);
  return names;
}

}  // namespace redline::model::chat

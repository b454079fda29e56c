// libFuzzer target for the Jinja chat-template interpreter. The input is a
// template source, optionally followed by a NUL byte and a JSON object of
// variables ("messages", "tools", "add_generation_prompt", anything else as
// extra context); without one a fixed tool-use conversation is passed. The
// template is lexed, parsed and rendered under small budgets, and every
// outcome must be a value or a Status with a message: a crash, a hang, a
// leak or an allocation the budgets did not bound is a finding (the RSS
// limit catches the last).
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target jinja_fuzz
//   ./build/fuzz/fuzz/jinja_fuzz -max_total_time=60 -rss_limit_mb=2048 \
//       tests/data/jinja_seeds
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

#include "base/check.h"
#include "model/chat/chat_template.h"

namespace {

using redline::model::chat::ChatTemplate;
using redline::model::chat::ChatTemplateInputs;

constexpr const char* kConversation = R"({
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?  \u00e9\u4e2d\ud83d\ude00\n"},
    {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "name": "get_weather", "content": "18 C"},
    {"role": "user", "content": "<think>x</think>Thanks"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
})";

// Fills `in` from a JSON object; false when `text` is not one.
bool ReadContext(std::string_view text, ChatTemplateInputs* in) {
  boost::json::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return false;
  for (const auto& kv : v.get_object()) {
    if (kv.key() == "messages" && kv.value().is_array()) {
      in->messages = kv.value().get_array();
    } else if (kv.key() == "tools" && kv.value().is_array()) {
      in->tools = kv.value().get_array();
    } else if (kv.key() == "add_generation_prompt" && kv.value().is_bool()) {
      in->add_generation_prompt = kv.value().get_bool();
    } else {
      in->extra_context[kv.key()] = kv.value();
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);

  auto parsed = ChatTemplate::Parse(std::string(source));
  if (!parsed.ok()) {
    RL_CHECK(!parsed.status().message().empty());
    return 0;
  }

  ChatTemplateInputs in;
  if (nul == std::string_view::npos ||
      !ReadContext(input.substr(nul + 1), &in)) {
    RL_CHECK(ReadContext(kConversation, &in));
  }
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  std::tm now{};
  now.tm_year = 126;
  now.tm_mday = 15;
  in.now = now;
  // Small budgets keep each input fast; what matters is that exceeding one
  // is always a clean error.
  in.budget.max_time_ms = 20;
  in.budget.max_memory_bytes = size_t{16} << 20;
  in.budget.max_work_units = int64_t{1} << 24;
  in.limits.max_output_bytes = size_t{1} << 20;

  auto out = parsed->Render(in);
  if (out.ok()) {
    RL_CHECK(out->size() <= in.limits.max_output_bytes);
  } else {
    RL_CHECK(!out.status().message().empty());
  }
  return 0;
}

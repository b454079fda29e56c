// Chat templates against the shared golden data: every template in
// shared/testdata/chat-templates rendered with every conversation must match
// the reference (Jinja2 3.1 via transformers) byte for byte, or fail where
// the reference failed. Also covers the built-in templates and the API's
// variable conventions.
#include "model/chat/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/json/parse.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace redline::model::chat {
namespace {

namespace fs = std::filesystem;

const fs::path kDataDir =
    fs::path(RL_SHARED_DIR) / "testdata" / "chat-templates";

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::tm FixedNow() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_wday = 4;  // Thursday
  tm.tm_yday = 14;
  return tm;
}

std::vector<std::string> TemplateStems() {
  std::vector<std::string> stems;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kDataDir / "templates", ec)) {
    if (entry.path().extension() == ".jinja")
      stems.push_back(entry.path().stem().string());
  }
  std::sort(stems.begin(), stems.end());
  if (stems.empty())
    stems.push_back("none");  // keeps the suite instantiated; skips
  return stems;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, RendersEveryConversationLikeTheReference) {
  const std::string stem = GetParam();
  std::string source;
  if (!ReadFile(kDataDir / "templates" / (stem + ".jinja"), &source)) {
    GTEST_SKIP() << "shared chat-template data not found under " << kDataDir;
  }
  std::string conversations_text;
  std::string tokens_text;
  ASSERT_TRUE(ReadFile(kDataDir / "conversations.json", &conversations_text));
  ASSERT_TRUE(ReadFile(kDataDir / "special_tokens.json", &tokens_text));
  const boost::json::value conversations =
      boost::json::parse(conversations_text);
  const boost::json::value tokens = boost::json::parse(tokens_text);
  const boost::json::object& special = tokens.at(stem).as_object();

  Result<ChatTemplate> tmpl = ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();

  int passed = 0;
  int total = 0;
  for (const auto& conv_value : conversations.at("conversations").as_array()) {
    const boost::json::object& conv = conv_value.as_object();
    const std::string id(conv.at("id").as_string());
    ++total;
    ChatTemplateInputs in;
    in.messages = conv.at("messages").as_array();
    if (const auto* tools = conv.if_contains("tools"))
      in.tools = tools->as_array();
    in.add_generation_prompt = conv.at("add_generation_prompt").as_bool();
    if (special.at("bos_token").is_string())
      in.bos_token = std::string(special.at("bos_token").as_string());
    if (special.at("eos_token").is_string())
      in.eos_token = std::string(special.at("eos_token").as_string());
    in.now = FixedNow();
    Result<std::string> out = tmpl->Render(in);

    const fs::path expected_dir = kDataDir / "expected" / stem;
    std::string expected;
    if (ReadFile(expected_dir / (id + ".txt"), &expected)) {
      if (!out.ok()) {
        ADD_FAILURE() << stem << "/" << id
                      << ": render failed: " << out.status().ToString();
        continue;
      }
      EXPECT_EQ(*out, expected) << stem << "/" << id;
      passed += *out == expected;
      continue;
    }
    std::string error;
    ASSERT_TRUE(ReadFile(expected_dir / (id + ".error"), &error))
        << stem << "/" << id;
    while (!error.empty() && (error.back() == '\n' || error.back() == '\r'))
      error.pop_back();
    if (out.ok()) {
      ADD_FAILURE() << stem << "/" << id << ": expected failure (" << error
                    << "), got output:\n"
                    << *out;
      continue;
    }
    const std::string& message = out.status().message();
    const std::string kTemplateError = "TemplateError: ";
    if (error.rfind(kTemplateError, 0) == 0) {
      // raise_exception: the message is exactly the template's text.
      EXPECT_EQ(message, error.substr(kTemplateError.size()))
          << stem << "/" << id;
      passed += message == error.substr(kTemplateError.size());
    } else {
      // A runtime error of the template: same Python exception and wording.
      const bool same = message.size() >= error.size() &&
                        message.compare(message.size() - error.size(),
                                        error.size(), error) == 0;
      EXPECT_TRUE(same) << stem << "/" << id << ": expected '" << error
                        << "', got '" << message << "'";
      passed += same;
    }
  }
  std::printf("[ golden   ] %s: %d/%d\n", stem.c_str(), passed, total);
}

INSTANTIATE_TEST_SUITE_P(SharedData, GoldenTest,
                         ::testing::ValuesIn(TemplateStems()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param)
                             name += std::isalnum(static_cast<unsigned char>(c))
                                         ? c
                                         : '_';
                           return name;
                         });

boost::json::array Messages(
    std::initializer_list<std::pair<const char*, const char*>> turns) {
  boost::json::array a;
  for (const auto& [role, content] : turns) {
    boost::json::object m;
    m["role"] = role;
    m["content"] = content;
    a.push_back(std::move(m));
  }
  return a;
}

Result<std::string> RenderBuiltin(std::string_view name,
                                  const ChatTemplateInputs& in) {
  RL_ASSIGN_OR_RETURN(std::string source, BuiltinChatTemplate(name));
  RL_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Parse(source));
  return t.Render(in);
}

TEST(BuiltinChatTemplateTest, AllParseAndRender) {
  for (std::string_view name : BuiltinChatTemplateNames()) {
    ChatTemplateInputs in;
    in.messages =
        Messages({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}});
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    Result<std::string> out = RenderBuiltin(name, in);
    ASSERT_TRUE(out.ok()) << name << ": " << out.status().ToString();
    EXPECT_NE(out->find("Bye"), std::string::npos) << name;
  }
  EXPECT_EQ(BuiltinChatTemplate("nope").status().code(), StatusCode::kNotFound);
}

TEST(BuiltinChatTemplateTest, ExactRenderings) {
  ChatTemplateInputs in;
  in.messages = Messages({{"system", "Be brief."}, {"user", "Hi"}});
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  EXPECT_EQ(*RenderBuiltin("chatml", in),
            "<|im_start|>system\nBe "
            "brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(
      *RenderBuiltin("llama3", in),
      "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(*RenderBuiltin("llama2", in),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
  EXPECT_EQ(
      *RenderBuiltin("phi3", in),
      "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
  Result<std::string> gemma = RenderBuiltin("gemma", in);
  ASSERT_FALSE(gemma.ok());
  EXPECT_EQ(gemma.status().message(), "System role not supported");
  Result<std::string> mistral = RenderBuiltin("mistral", in);
  ASSERT_FALSE(mistral.ok());
  EXPECT_EQ(
      mistral.status().message(),
      "Conversation roles must alternate user/assistant/user/assistant/...");

  in.messages =
      Messages({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}});
  EXPECT_EQ(*RenderBuiltin("mistral", in),
            "<s>[INST] Hi [/INST]Hello</s>[INST] Bye [/INST]");
  EXPECT_EQ(*RenderBuiltin("gemma", in),
            "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>"
            "model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  in.add_generation_prompt = false;
  EXPECT_EQ(*RenderBuiltin("phi3", in),
            "<|user|>\nHi<|end|>\n<|assistant|>\nHello<|end|>\n<|user|>\nBye<|"
            "end|>\n</s>");
}

// The built-ins equal the published templates in the shared data.
TEST(BuiltinChatTemplateTest, MatchPublishedTemplates) {
  const std::pair<const char*, const char*> pairs[] = {
      {"phi3", "microsoft-Phi-3.5-mini-instruct"},
      {"gemma", "google-gemma-2-2b-it"}};
  for (const auto& [name, stem] : pairs) {
    std::string published;
    if (!ReadFile(kDataDir / "templates" / (std::string(stem) + ".jinja"),
                  &published)) {
      GTEST_SKIP() << "shared data absent";
    }
    while (!published.empty() && published.back() == '\n') published.pop_back();
    EXPECT_EQ(*BuiltinChatTemplate(name), published) << name;
  }
}

TEST(ChatTemplateTest, VariablesFollowTransformers) {
  Result<ChatTemplate> t = ChatTemplate::Parse(
      "{{ tools is none }}|{{ documents is none }}|{{ bos_token is defined }}|"
      "{{ eos_token }}|{{ add_generation_prompt }}|{{ enable_thinking }}|{{ "
      "messages|length }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ChatTemplateInputs in;
  in.messages = Messages({{"user", "x"}});
  in.eos_token = "</s>";
  in.extra_context["enable_thinking"] = false;
  EXPECT_EQ(*t->Render(in), "True|True|False|</s>|True|False|1");
}

TEST(ChatTemplateTest, StrftimeNowUsesInjectedTime) {
  Result<ChatTemplate> t = ChatTemplate::Parse(
      "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d') }}");
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in;
  in.now = FixedNow();
  EXPECT_EQ(*t->Render(in), "15 Jan 2026 2026-01-15");
}

TEST(ChatTemplateTest, ParseErrorNamesLine) {
  Result<ChatTemplate> t = ChatTemplate::Parse(
      "hello\n{% for x in y %}\n{{ x | nosuchfilter }}\n{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "line 3: no filter named 'nosuchfilter'");
}

TEST(ChatTemplateTest, RenderIsThreadSafe) {
  Result<ChatTemplate> t = ChatTemplate::Parse(
      "{% for m in messages %}{{ m.role | upper }}:{{ m.content }};{% endfor "
      "%}");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      ChatTemplateInputs in;
      in.messages = Messages({{"user", "a"}, {"assistant", "b"}});
      for (int k = 0; k < 200; ++k) {
        Result<std::string> out = t->Render(in);
        if (out.ok() && *out == "USER:a;ASSISTANT:b;") ++good;
      }
      (void)i;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 8 * 200);
}

}  // namespace
}  // namespace redline::model::chat

// The command vocabulary (vocabulary.h, docs/CLI.md) checked over every
// subcommand: each shared flag is accepted under all its spellings where the
// table says, no subcommand uses a shared name for something else, the GPU
// flags of llama.cpp/vLLM are noted and ignored, and command-line errors
// exit with the documented codes. In-process, through RunRedline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_main.h"
#include "cli/command_registry.h"
#include "cli/vocabulary.h"
#include "model/chat/chat_template.h"

namespace redline::cli {
namespace {

bool Contains(const std::vector<std::string_view>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Multi-letter short spellings (-np, -sys) are rewritten before parsing.
bool IsRewrittenSpelling(std::string_view name) {
  return name.size() > 2 && name[0] == '-' && name[1] != '-';
}

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome RunCli(std::vector<std::string> args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = RunRedline(std::move(args));
  std::fflush(stdout);
  std::fflush(stderr);
  Outcome o{code, testing::internal::GetCapturedStdout(),
            testing::internal::GetCapturedStderr()};
  return o;
}

std::filesystem::path TempDir() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("redline_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

class CliVocabularyTest : public testing::Test {
 protected:
  void SetUp() override { BuildApp(app_, &exit_code_); }
  CLI::App app_{"redline"};
  int exit_code_ = 0;
};

TEST_F(CliVocabularyTest, EveryCommandInTheTableExists) {
  for (const SharedFlag& f : SharedFlags()) {
    for (std::string_view cmd : f.commands) {
      EXPECT_NO_THROW(app_.get_subcommand(std::string(cmd)))
          << f.canonical << " lists unknown command " << cmd;
    }
  }
}

// Every subcommand x shared flag: the canonical name and each alias reach
// the same option.
TEST_F(CliVocabularyTest, SharedFlagsAcceptEverySpelling) {
  for (const SharedFlag& f : SharedFlags()) {
    for (std::string_view cmd : f.commands) {
      SCOPED_TRACE(std::string(cmd) + " " + std::string(f.canonical));
      CLI::App* sub = app_.get_subcommand(std::string(cmd));
      const CLI::Option* opt =
          sub->get_option_no_throw(std::string(f.canonical));
      ASSERT_NE(opt, nullptr) << "missing";
      if (Contains(f.canonical_only, cmd)) continue;
      for (std::string_view alias : f.aliases) {
        if (IsRewrittenSpelling(alias)) {
          std::vector<std::string> notes;
          const auto args =
              NormalizeArgs({std::string(cmd), std::string(alias)}, &notes);
          ASSERT_EQ(args.size(), 2u);
          EXPECT_EQ(sub->get_option_no_throw(args[1]), opt) << alias;
        } else {
          EXPECT_EQ(sub->get_option_no_throw(std::string(alias)), opt) << alias;
        }
      }
    }
  }
}

// No subcommand gives a shared name another meaning: any option that answers
// to a name in the table is that entry's option, in a command the entry
// lists.
TEST_F(CliVocabularyTest, NoSubcommandReusesASharedName) {
  const auto subs = app_.get_subcommands({});
  EXPECT_EQ(subs.size(), CommandRegistry().size());
  for (const CLI::App* sub : subs) {
    const std::string cmd = sub->get_name();
    for (const CLI::Option* opt : sub->get_options()) {
      std::vector<std::string> names;
      for (const auto& n : opt->get_lnames()) names.push_back("--" + n);
      for (const auto& n : opt->get_snames()) names.push_back("-" + n);
      for (const std::string& name : names) {
        for (const SharedFlag& f : SharedFlags()) {
          if (name != f.canonical && !Contains(f.aliases, name)) continue;
          SCOPED_TRACE(cmd + " " + name);
          EXPECT_TRUE(Contains(f.commands, cmd))
              << "uses the shared name; add it to the table or rename it";
          EXPECT_EQ(sub->get_option_no_throw(std::string(f.canonical)), opt)
              << "means something other than " << f.canonical;
        }
      }
    }
  }
}

TEST(CpuOnlyFlagsTest, NotedAndRemovedWithTheirValues) {
  for (const CpuOnlyFlag& f : CpuOnlyFlags()) {
    for (std::string_view name : f.names) {
      SCOPED_TRACE(std::string(name));
      std::vector<std::string> args = {"run", "-m", "x.gguf",
                                       std::string(name)};
      if (f.arity == CpuOnlyFlag::kValue) args.push_back("99");
      if (f.arity == CpuOnlyFlag::kOptionalValue) args.push_back("on");
      args.push_back("-p");
      args.push_back("hi");
      std::vector<std::string> notes;
      const auto out = NormalizeArgs(args, &notes);
      EXPECT_EQ(out,
                (std::vector<std::string>{"run", "-m", "x.gguf", "-p", "hi"}));
      ASSERT_EQ(notes.size(), 1u);
      EXPECT_EQ(notes[0], "note: Redline is CPU-only; " + std::string(name) +
                              " is not needed (ignored)");
    }
  }
  std::vector<std::string> notes;
  // "--flag=value" and a bare -fa before another flag.
  EXPECT_EQ(
      NormalizeArgs({"serve", "--n-gpu-layers=99", "-fa", "-c", "512"}, &notes),
      (std::vector<std::string>{"serve", "-c", "512"}));
  EXPECT_EQ(notes.size(), 2u);
  // After "--" nothing is rewritten.
  notes.clear();
  EXPECT_EQ(NormalizeArgs({"run", "--", "-ngl"}, &notes),
            (std::vector<std::string>{"run", "--", "-ngl"}));
  EXPECT_TRUE(notes.empty());
}

TEST(CpuOnlyFlagsTest, BenchModelLegacyPromptLength) {
  std::vector<std::string> notes;
  EXPECT_EQ(
      NormalizeArgs({"bench-model", "-m", "x", "-p", "512"}, &notes),
      (std::vector<std::string>{"bench-model", "-m", "x", "--prefill", "512"}));
  EXPECT_EQ(notes.size(), 1u);
  notes.clear();
  EXPECT_EQ(NormalizeArgs({"run", "-p", "512"}, &notes),
            (std::vector<std::string>{"run", "-p", "512"}));
  EXPECT_TRUE(notes.empty());
}

// llama.cpp users start run with their usual flags: parsing succeeds (the
// failure is the missing model file, exit 1), GPU flags only noted.
TEST(CliRunTest, LlamaCppFlagsReachTheCommand) {
  const Outcome o = RunCli({"run",     "-m",      "/nonexistent/model.gguf",
                            "-p",      "hi",      "-c",
                            "2048",    "-n",      "16",
                            "--temp",  "0.7",     "--top-k",
                            "40",      "--top-p", "0.9",
                            "--min-p", "0.05",    "--repeat-penalty",
                            "1.1",     "-s",      "1",
                            "-t",      "2",       "-b",
                            "64",      "-ngl",    "99",
                            "-fa",     "--mlock"});
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("Redline is CPU-only; -ngl is not needed"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("cannot open"), std::string::npos) << o.err;
}

TEST(CliRunTest, LlamaCppAndVllmFlagsReachServe) {
  for (std::vector<std::string> extra :
       {std::vector<std::string>{"-c", "2048", "-np", "4", "--temp", "0.5",
                                 "-t", "2", "-b", "256", "--top-k", "40",
                                 "--seed", "7", "-ngl", "99"},
        std::vector<std::string>{"--max-model-len", "2048", "--parallel", "4",
                                 "--temperature", "0.5",
                                 "--gpu-memory-utilization", "0.9"}}) {
    std::vector<std::string> args = {"serve", "-m", "/nonexistent/model.gguf"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Outcome o = RunCli(args);
    // Parsed: the error is the missing file, not a flag.
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_NE(o.err.find("model file not found"), std::string::npos) << o.err;
  }
}

// Old bench-model spellings keep working, with a note: -o md|json chose
// the format before -o meant an output file.
TEST(CliRunTest, BenchModelLegacyOutputFormat) {
  const Outcome o =
      RunCli({"bench-model", "-m", "/nonexistent/model.gguf", "-o", "json"});
  EXPECT_EQ(o.code, 1) << o.err;  // parsed; the model file is missing
  EXPECT_NE(o.err.find("-o json is read as --format json"), std::string::npos)
      << o.err;
}

TEST(CliRunTest, PromptFromFile) {
  const Outcome o = RunCli(
      {"run", "-m", "/nonexistent/model.gguf", "-f", "/nonexistent/p.txt"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find("cannot read /nonexistent/p.txt"), std::string::npos)
      << o.err;
  // -f and -p together are a usage error.
  EXPECT_EQ(RunCli({"run", "-m", "x", "-f", "a", "-p", "b"}).code, 2);
}

TEST(CliExitCodeTest, NoArgumentsListsTheCommands) {
  const Outcome o = RunCli({});
  EXPECT_EQ(o.code, kNoCommandExitCode);
  EXPECT_EQ(o.code, 2);
  for (const CommandEntry& e : CommandRegistry())
    EXPECT_NE(o.out.find("  " + e.name + " "), std::string::npos) << e.name;
}

TEST(CliExitCodeTest, HelpAndVersionAreSuccess) {
  EXPECT_EQ(RunCli({"--help"}).code, 0);
  EXPECT_EQ(RunCli({"--version"}).code, 0);
  for (const CommandEntry& e : CommandRegistry())
    EXPECT_EQ(RunCli({e.name, "--help"}).code, 0) << e.name;
}

TEST(CliExitCodeTest, UnknownCommandIsUsageError) {
  const Outcome o = RunCli({"nosuch"});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("unknown command 'nosuch'"), std::string::npos);
}

// CLI11's own codes (105..114) never leak: 2 for a usage error, 101 (the
// tool-error code docs/BENCH.md gives) for bench.
TEST(CliExitCodeTest, ParseErrorsGetTheDocumentedCode) {
  for (const CommandEntry& e : CommandRegistry()) {
    const int want = e.name == "bench" ? 101 : 2;
    EXPECT_EQ(RunCli({e.name, "--no-such-flag"}).code, want) << e.name;
  }
  EXPECT_EQ(RunCli({"run", "-m", "x", "-p", "hi", "-n", "many"}).code, 2);
  EXPECT_EQ(RunCli({"bench-model", "-m", "x", "--format", "xml"}).code, 2);
  EXPECT_EQ(RunCli({"bench", "--users", "many"}).code, 101);
  EXPECT_EQ(RunCli({"bench", "compare", "only-one.json"}).code, 101);
  EXPECT_EQ(RunCli({"chat-template"}).code, 2);  // --messages is required
}

TEST(CliChatTemplateTest, BuiltinCarriesItsSpecialTokens) {
  const auto path = TempDir() / "chat.json";
  std::ofstream(path) << R"([{"role":"user","content":"Hi"}])";
  for (std::vector<std::string> spelling :
       {std::vector<std::string>{"--chat-template", "llama3"},
        std::vector<std::string>{"--builtin", "llama3"}}) {
    std::vector<std::string> args = {"chat-template", "--messages",
                                     path.string()};
    args.insert(args.end(), spelling.begin(), spelling.end());
    const Outcome o = RunCli(args);
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_TRUE(o.out.starts_with("<|begin_of_text|><|start_header_id|>user"))
        << o.out;
  }
  // Every built-in renders on its own (no model file for its special tokens).
  for (std::string_view name : model::chat::BuiltinChatTemplateNames()) {
    const Outcome o = RunCli({"chat-template", "--messages", path.string(),
                              "--chat-template", std::string(name)});
    EXPECT_EQ(o.code, 0) << name << ": " << o.err;
    EXPECT_NE(o.out.find("Hi"), std::string::npos) << name;
  }
  // A file through the same flag.
  const auto tmpl = TempDir() / "t.jinja";
  std::ofstream(tmpl) << "{{ messages[0]['content'] }}!";
  const Outcome o = RunCli({"chat-template", "--messages", path.string(),
                            "--chat-template", tmpl.string()});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "Hi!");
}

TEST(CliMakeModelTest, ProgressOnStandardError) {
  const auto path = TempDir() / "tiny.gguf";
  const Outcome o = RunCli(
      {"make-model", "--preset", "tiny", "-o", path.string(), "-t", "1"});
  EXPECT_EQ(o.code, 0) << o.err;
  // Not a terminal: plain lines, the last at 100 %.
  EXPECT_NE(o.err.find("make-model: writing " + path.string() + " 100%"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find('\r'), std::string::npos);
  const Outcome quiet = RunCli(
      {"make-model", "--preset", "tiny", "-o", path.string(), "-t", "1", "-q"});
  EXPECT_EQ(quiet.code, 0);
  EXPECT_EQ(quiet.err.find("writing"), std::string::npos) << quiet.err;
  std::filesystem::remove_all(TempDir());
}

}  // namespace
}  // namespace redline::cli

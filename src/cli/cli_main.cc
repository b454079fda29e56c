#include "cli/cli_main.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/command_registry.h"
#include "cli/vocabulary.h"

namespace redline::cli {
namespace {

// The command list `redline` with no arguments prints.
std::string CommandList() {
  std::vector<CommandEntry> entries = CommandRegistry();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  size_t width = 0;
  for (const auto& e : entries) width = std::max(width, e.name.size());
  std::string out =
      "Redline: LLM answers under the three-second line\n\n"
      "Usage: redline COMMAND [FLAGS]   (redline COMMAND --help for its "
      "flags)\n\nCommands:\n";
  for (const auto& e : entries)
    out += fmt::format("  {:<{}}  {}\n", e.name, width, e.description);
  out += "\nFlags shared by the commands, exit codes: docs/CLI.md\n";
  return out;
}

}  // namespace

void BuildApp(CLI::App& app, int* exit_code) {
  app.require_subcommand(1);
  app.set_version_flag("--version", "redline 0.1.0");
  std::vector<CommandEntry> entries = CommandRegistry();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& entry : entries) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.description);
    entry.setup(*sub, exit_code);
    std::string footer = sub->get_footer();
    if (!footer.empty()) footer += "\n";
    footer +=
        "Shared flags, llama.cpp/vLLM spellings (-c, -np, -n, --temp, "
        "--max-model-len) and exit codes: docs/CLI.md. GPU flags (-ngl, -fa, "
        "...) are noted and ignored: Redline is CPU-only.";
    sub->footer(footer);
  }
}

int RunRedline(std::vector<std::string> args) {
  if (args.empty()) {
    std::fputs(CommandList().c_str(), stdout);
    return kNoCommandExitCode;
  }
  std::vector<std::string> names;
  for (const auto& e : CommandRegistry()) names.push_back(e.name);
  const std::string command = CommandOf(args, names);
  if (command.empty() && !args[0].starts_with("-")) {
    fmt::print(stderr, "redline: unknown command '{}'\n\n{}", args[0],
               CommandList());
    return UsageErrorExitCode("");
  }

  std::vector<std::string> notes;
  args = NormalizeArgs(std::move(args), &notes);
  for (const std::string& n : notes)
    fmt::print(stderr, "redline{}{}: {}\n", command.empty() ? "" : " ", command,
               n);

  CLI::App app{"Redline: LLM answers under the three-second line"};
  int exit_code = 0;
  BuildApp(app, &exit_code);
  std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
  try {
    app.parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with status 0; every real parse
    // error gets the command's documented usage code, not CLI11's own
    // (105..114), which no document explains.
    const int cli11_code = app.exit(e);
    return cli11_code == 0 ? 0 : UsageErrorExitCode(command);
  }
  return exit_code;
}

}  // namespace redline::cli

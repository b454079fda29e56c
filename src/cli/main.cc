// redline: one executable, one subcommand per job (run, make-model,
// bench-model, tokenize, chat-template, serve, bench, ...).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "cli/command_registry.h"

int main(int argc, char** argv) {
  CLI::App app{"Redline: LLM answers under the three-second line"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "redline 0.1.0");
  int exit_code = 0;
  auto& registry = redline::cli::CommandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& entry : registry) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.description);
    entry.setup(*sub, &exit_code);
  }
  // llama.cpp users type `-sys TEXT`; CLI11 short names are one letter, so
  // that spelling is mapped to --system here.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& a : args) {
    if (a == "-sys") a = "--system";
  }
  std::reverse(args.begin(), args.end());
  try {
    app.parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}

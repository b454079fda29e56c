// The whole `redline` command line: builds the subcommands from the registry
// (command_registry.h), normalises llama.cpp/vLLM spellings (vocabulary.h),
// parses, runs the chosen command and maps command-line errors to the
// documented exit codes (docs/CLI.md). main() is a call to RunRedline; tests
// call it in-process.
//
// Thread-safety: not thread-safe (commands install signal handlers and write
// to stdout/stderr). Each call builds its own CLI11 app.
#ifndef REDLINE_CLI_CLI_MAIN_H_
#define REDLINE_CLI_CLI_MAIN_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace redline::cli {

// Builds the top-level app with every registered subcommand; `exit_code`
// receives the chosen command's status. For tests that inspect options.
void BuildApp(CLI::App& app, int* exit_code);

// Runs `redline ARGS...` (args without argv[0]); returns the exit status.
int RunRedline(std::vector<std::string> args);

}  // namespace redline::cli

#endif  // REDLINE_CLI_CLI_MAIN_H_

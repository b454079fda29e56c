// Subcommands of the `redline` executable register themselves here, so each
// lives in its own file and main.cc stays a few lines.
//
//   RL_REGISTER_COMMAND(run, "Generate text from a GGUF model", SetupRun);
//
// Setup functions add a CLI11 subcommand (flags and callback) to the app.
// The callback sets `*exit_code` to the process exit status.
#ifndef REDLINE_CLI_COMMAND_REGISTRY_H_
#define REDLINE_CLI_COMMAND_REGISTRY_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace redline::cli {

using CommandSetup = std::function<void(CLI::App& sub, int* exit_code)>;

struct CommandEntry {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<CommandEntry>& CommandRegistry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description,
                   CommandSetup setup);
};

}  // namespace redline::cli

#define RL_REGISTER_COMMAND(name, description, setup)                  \
  static ::redline::cli::CommandRegistrar rl_command_registrar_##name( \
      #name, description, setup)

// For command names that are not identifiers ("make-model").
#define RL_REGISTER_COMMAND_NAMED(ident, name, description, setup)      \
  static ::redline::cli::CommandRegistrar rl_command_registrar_##ident( \
      name, description, setup)

#endif  // REDLINE_CLI_COMMAND_REGISTRY_H_

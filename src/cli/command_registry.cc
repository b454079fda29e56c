#include "cli/command_registry.h"

#include <utility>

namespace redline::cli {

std::vector<CommandEntry>& CommandRegistry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

CommandRegistrar::CommandRegistrar(std::string name, std::string description,
                                   CommandSetup setup) {
  CommandRegistry().push_back(
      {std::move(name), std::move(description), std::move(setup)});
}

}  // namespace redline::cli

// redline: one executable, one subcommand per job (run, make-model,
// bench-model, tokenize, chat-template, serve, bench, ...); the command line
// is handled in cli_main.cc.
#include <string>
#include <vector>

#include "cli/cli_main.h"

int main(int argc, char** argv) {
  return redline::cli::RunRedline(
      std::vector<std::string>(argv + 1, argv + argc));
}

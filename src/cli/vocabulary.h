// The command vocabulary shared by every `redline` subcommand: which flag
// names mean the same thing everywhere (docs/CLI.md), the llama.cpp and vLLM
// spellings accepted, the GPU flags that are noted and ignored, and the exit
// status of a command-line error.
//
// Thread-safety: everything here is immutable data or pure functions.
#ifndef REDLINE_CLI_VOCABULARY_H_
#define REDLINE_CLI_VOCABULARY_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redline::cli {

// A flag with one meaning in every subcommand that has it.
struct SharedFlag {
  std::string_view canonical;              // "--ctx"
  std::vector<std::string_view> aliases;   // "-c", "--ctx-size", ...
  std::string_view meaning;                // one line, for docs/CLI.md
  std::vector<std::string_view> commands;  // subcommands that accept it
  // Of `commands`, those that take only the canonical name (no aliases).
  std::vector<std::string_view> canonical_only;
};

// The table docs/CLI.md documents; cli tests check every subcommand's options
// against it.
std::span<const SharedFlag> SharedFlags();

// A llama.cpp / vLLM flag about GPUs, which a CPU engine does not need.
struct CpuOnlyFlag {
  std::vector<std::string_view> names;  // "-ngl", "--n-gpu-layers", ...
  // kValue: always followed by a value; kOptionalValue: takes the next
  // argument only when it is one of on/off/auto/true/false/0/1.
  enum Arity { kNone, kValue, kOptionalValue } arity;
};
std::span<const CpuOnlyFlag> CpuOnlyFlags();

// Rewrites the arguments (without argv[0]) before parsing:
//  - multi-letter short spellings CLI11 cannot declare (-sys, -np, -md) become
//    their long names;
//  - CPU-only flags (and their values) are removed, each adding a note
//    "Redline is CPU-only; -ngl is not needed (ignored)" to `notes`;
//  - bench-model's legacy `-p N` (llama-bench's prompt length) becomes
//    --prefill, with a note.
// Arguments after "--" are left as they are.
std::vector<std::string> NormalizeArgs(std::vector<std::string> args,
                                       std::vector<std::string>* notes);

// The subcommand the arguments name (the first argument that is a known
// command), or "" when there is none.
std::string CommandOf(const std::vector<std::string>& args,
                      const std::vector<std::string>& known_commands);

// Documented exit status of a command-line error (unknown flag, bad value,
// missing argument) in `command`: 101 for bench (its tool-error code), 2
// for every other command and for no command.
int UsageErrorExitCode(std::string_view command);

// Exit status of `redline` with no arguments (prints the command list).
inline constexpr int kNoCommandExitCode = 2;

}  // namespace redline::cli

#endif  // REDLINE_CLI_VOCABULARY_H_

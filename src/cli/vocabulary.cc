#include "cli/vocabulary.h"

#include <fmt/format.h>

#include <algorithm>

namespace redline::cli {
namespace {

bool IsOptionalValue(std::string_view v) {
  static constexpr std::string_view kValues[] = {"on",    "off", "auto", "true",
                                                 "false", "0",   "1"};
  return std::find(std::begin(kValues), std::end(kValues), v) !=
         std::end(kValues);
}

}  // namespace

std::span<const SharedFlag> SharedFlags() {
  // Keep in step with docs/CLI.md (the test checks every subcommand against
  // this table; the doc is read by people).
  static const std::vector<SharedFlag> kFlags = {
      {"--model",
       {"-m"},
       "The model: a GGUF file where one is loaded; the served model's name "
       "where a server is called (bench, gateway)",
       {"run", "serve", "bench-model", "tokenize", "chat-template", "bench",
        "gateway", "eval", "profile"},
       {"gateway"}},
      {"--prompt", {"-p"}, "Prompt text", {"run", "bench"}, {}},
      {"--file",
       {"-f"},
       "Read the prompt (run) or the text (tokenize) from this file",
       {"run", "tokenize"},
       {}},
      {"--max-tokens",
       {"-n", "--n-predict"},
       "Tokens to generate at most: per generation (run), per request "
       "(bench), per decode test (bench-model, profile)",
       {"run", "bench-model", "bench", "profile"},
       {}},
      {"--output",
       {"-o"},
       "File to write the result to",
       {"make-model", "bench-model"},
       {}},
      {"--threads",
       {"-t"},
       "Compute threads (default: physical cores)",
       {"run", "serve", "bench-model", "make-model", "quantize", "eval",
        "profile"},
       {}},
      {"--ctx",
       {"-c", "--ctx-size", "--max-model-len"},
       "Context length in tokens per sequence, prompt + output (KV cache "
       "size; for eval and quantize --report, the tokens per scored chunk)",
       {"run", "serve", "eval", "quantize"},
       {}},
      {"--parallel",
       {"-np"},
       "Sequences decoded together (slots, continuous batching)",
       {"serve"},
       {}},
      {"--batch",
       {"-b", "--batch-size"},
       "Tokens per forward step (prefill chunk)",
       {"run", "serve", "profile"},
       {}},
      {"--temp",
       {"--temperature"},
       "Sampling temperature (0: greedy); bench sends it in requests",
       {"run", "serve", "bench"},
       {}},
      {"--top-k",
       {},
       "Keep the k most likely tokens (0: off)",
       {"run", "serve"},
       {}},
      {"--top-p", {}, "Nucleus sampling mass (1: off)", {"run", "serve"}, {}},
      {"--min-p",
       {},
       "Drop tokens below min_p x the top probability",
       {"run", "serve"},
       {}},
      {"--repeat-penalty",
       {},
       "Repetition penalty (1: off)",
       {"run", "serve"},
       {}},
      {"--seed",
       {"-s"},
       "Seed of the random choices: sampling (run, serve), weights "
       "(make-model), workload (bench)",
       {"run", "serve", "make-model", "bench"},
       {}},
      {"--chat-template",
       {},
       "Chat template: a built-in name (chatml, llama3, llama2, mistral, "
       "phi3, gemma) or a Jinja file",
       {"run", "serve", "chat-template"},
       {}},
      {"--system", {"-y", "-sys"}, "System message", {"run", "bench"}, {}},
      {"--messages",
       {},
       "JSON file with the chat messages",
       {"run", "chat-template"},
       {}},
      {"--kv-type",
       {},
       "KV cache element type: f16, q8_0 or f32",
       {"run", "serve", "bench-model", "profile", "eval"},
       {}},
      {"--no-repack",
       {},
       "Read weights from the file's pages (no repacked copy)",
       {"run", "serve", "bench-model", "profile"},
       {}},
      {"--mlock", {}, "Pin the weights in RAM", {"run", "serve"}, {}},
      {"--draft-model",
       {"-md", "--model-draft"},
       "Speculative decoding with drafts from this small GGUF model (same "
       "vocabulary as the model, checked at load)",
       {"run", "serve"},
       {}},
      {"--draft-max",
       {},
       "Most draft tokens verified per sequence per pass",
       {"run", "serve"},
       {}},
      {"--host", {}, "Address to listen on", {"serve", "gateway"}, {}},
      {"--port",
       {},
       "TCP port to listen on (0: any free port)",
       {"serve", "gateway"},
       {}},
      {"--port-file",
       {},
       "Write the bound port to this file",
       {"serve", "gateway", "chaos"},
       {}},
      {"--api-key",
       {},
       "API key: required of clients (serve, gateway), sent (bench)",
       {"serve", "gateway", "bench"},
       {}},
      {"--config",
       {},
       "Read flags from this file (command-line flags win)",
       {"serve", "gateway"},
       {}},
      {"--json",
       {},
       "Also write the JSON result to this file",
       {"bench", "bench-model", "profile"},
       {}},
      {"--quiet",
       {"-q"},
       "No progress output",
       {"run", "bench-model", "make-model", "bench"},
       {}},
  };
  return kFlags;
}

std::span<const CpuOnlyFlag> CpuOnlyFlags() {
  static const std::vector<CpuOnlyFlag> kFlags = {
      {{"-ngl", "--n-gpu-layers", "--gpu-layers"}, CpuOnlyFlag::kValue},
      {{"-fa", "--flash-attn"}, CpuOnlyFlag::kOptionalValue},
      {{"-sm", "--split-mode"}, CpuOnlyFlag::kValue},
      {{"-mg", "--main-gpu"}, CpuOnlyFlag::kValue},
      {{"-ts", "--tensor-split"}, CpuOnlyFlag::kValue},
      {{"-dev", "--device"}, CpuOnlyFlag::kValue},
      {{"-nkvo", "--no-kv-offload"}, CpuOnlyFlag::kNone},
      {{"--gpu-memory-utilization"}, CpuOnlyFlag::kValue},
      {{"-tp", "--tensor-parallel-size"}, CpuOnlyFlag::kValue},
  };
  return kFlags;
}

std::vector<std::string> NormalizeArgs(std::vector<std::string> args,
                                       std::vector<std::string>* notes) {
  std::string command;
  for (const std::string& a : args) {
    if (!a.starts_with("-")) {
      command = a;
      break;
    }
  }
  std::vector<std::string> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + static_cast<ptrdiff_t>(i),
                 args.end());
      break;
    }
    // "--flag=value" is matched on its name.
    const size_t eq = a.starts_with("--") ? a.find('=') : std::string::npos;
    const std::string name = a.substr(0, eq);
    const bool inline_value = eq != std::string::npos;
    const CpuOnlyFlag* cpu_only = nullptr;
    for (const CpuOnlyFlag& f : CpuOnlyFlags()) {
      if (std::find(f.names.begin(), f.names.end(), name) != f.names.end())
        cpu_only = &f;
    }
    if (cpu_only != nullptr) {
      notes->push_back(fmt::format(
          "note: Redline is CPU-only; {} is not needed (ignored)", name));
      if (!inline_value && i + 1 < args.size()) {
        if (cpu_only->arity == CpuOnlyFlag::kValue ||
            (cpu_only->arity == CpuOnlyFlag::kOptionalValue &&
             IsOptionalValue(args[i + 1])))
          ++i;
      }
      continue;
    }
    // llama.cpp spellings CLI11 cannot declare (short names are one letter).
    if (a == "-sys") a = "--system";
    if (a == "-np") a = "--parallel";
    if (a == "-md") a = "--draft-model";
    if ((command == "bench-model" || command == "profile") && a == "-p") {
      notes->push_back(fmt::format(
          "note: {} reads -p as --prefill (llama-bench's prompt length); "
          "write --prefill, -p means --prompt elsewhere",
          command));
      a = "--prefill";
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string CommandOf(const std::vector<std::string>& args,
                      const std::vector<std::string>& known_commands) {
  for (const std::string& a : args) {
    if (a == "--") break;
    if (std::find(known_commands.begin(), known_commands.end(), a) !=
        known_commands.end())
      return a;
  }
  return "";
}

int UsageErrorExitCode(std::string_view command) {
  return command == "bench" ? 101 : 2;
}

}  // namespace redline::cli

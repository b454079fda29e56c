// redline make-model: writes a synthetic GGUF model with a real model's shapes.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include "base/progress.h"
#include "base/thread_pool.h"
#include "cli/command_registry.h"
#include "model/arch/synthetic.h"

namespace redline::cli {
namespace {

struct MakeModelFlags {
  std::string preset = "tiny";
  std::string type = "q8_0";
  std::string output;
  uint64_t seed = 42;
  int threads = 0;
  bool quiet = false;
  bool cycle = false;
};

int RunMakeModel(const MakeModelFlags& f) {
  auto spec = model::SyntheticPreset(f.preset);
  if (!spec.ok()) {
    fmt::print(stderr, "make-model: {}\n", spec.status().message());
    return 2;
  }
  spec->successor_cycle = f.cycle;
  auto type = model::ParseDType(f.type);
  if (!type.ok()) {
    fmt::print(stderr, "make-model: {}\n", type.status().message());
    return 2;
  }
  ThreadPool pool(f.threads);
  const auto start = std::chrono::steady_clock::now();
  // The total is known once the first tensor is written; the bar starts then.
  std::optional<Progress> progress;
  auto report = [&](uint64_t done, uint64_t total) {
    if (f.quiet) return;
    if (!progress)
      progress.emplace("make-model: writing " + f.output,
                       static_cast<double>(total), ProgressUnit::kBytes);
    progress->Set(static_cast<double>(done));
  };
  Status s =
      model::WriteSyntheticModel(*spec, *type, f.seed, f.output, pool, report);
  if (progress) progress->Finish();
  if (!s.ok()) {
    fmt::print(stderr, "make-model: {}\n", s.ToString());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(f.output, ec);
  fmt::print(
      stderr,
      "make-model: wrote {} ({} {}{}, seed {}, {:.1f} MiB) in {:.1f} s\n",
      f.output, f.preset, f.type, f.cycle ? " cycle" : "", f.seed,
      ec ? 0.0 : bytes / 1048576.0, secs);
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<MakeModelFlags>();
  std::string presets;
  for (const auto& p : model::SyntheticPresetNames())
    presets += (presets.empty() ? "" : ", ") + p;
  sub.add_option("--preset", f->preset, "Model shape: " + presets)
      ->capture_default_str();
  sub.add_option("--type", f->type,
                 "Weight type of the matrices: f32, f16, bf16, q8_0, q4_0")
      ->capture_default_str();
  sub.add_option("-o,--output", f->output, "GGUF file to write")->required();
  sub.add_option("-s,--seed", f->seed,
                 "Seed of the random weights (same seed, same bytes)")
      ->capture_default_str();
  sub.add_option("-t,--threads", f->threads,
                 "Threads (default: physical cores)");
  sub.add_flag("--cycle", f->cycle,
               "Weights that make greedy decoding follow one random cycle "
               "through the vocabulary (each word piece followed by its "
               "successor): a passage the model wrote, quoted back in the "
               "prompt, is continued as written — an echo task for "
               "benchmarking speculative decoding");
  sub.add_flag("-q,--quiet", f->quiet, "No progress output");
  sub.callback([f, exit_code] { *exit_code = RunMakeModel(*f); });
}

}  // namespace

RL_REGISTER_COMMAND_NAMED(
    make_model, "make-model",
    "Write a synthetic GGUF model with the shapes of a real one", Setup);

}  // namespace redline::cli

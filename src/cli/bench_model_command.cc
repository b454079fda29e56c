// redline bench-model: prefill/decode throughput and decode roofline share.
#include <fmt/format.h>

#include <fstream>
#include <optional>
#include <utility>

#include "base/progress.h"
#include "base/thread_pool.h"
#include "cli/command_registry.h"
#include "engine/model_bench.h"
#include "kernels/isa.h"

namespace redline::cli {
namespace {

struct BenchModelFlags {
  std::string model;
  int threads = 0;
  std::vector<int64_t> prefill = {128, 512};
  int64_t decode = 64;
  std::vector<int64_t> depths = {0};
  int repeats = 5;
  std::string format = "md";
  std::string output;  // file for the result, in --format
  std::string json_file;
  bool quiet = false;
  bool no_bandwidth = false;
  bool no_repack = false;
  std::string kv_type = "f16";
};

int RunBenchModel(const BenchModelFlags& f) {
  model::LoadOptions lo;
  lo.load_tokenizer = false;
  lo.repack = !f.no_repack;
  lo.threads = f.threads;
  // Created at the first report, so a file that fails to open prints
  // only its error.
  std::optional<Progress> progress;
  if (!f.quiet) {
    lo.progress = [&progress, &f](double done) {
      if (!progress)
        progress.emplace("bench-model: loading " + f.model, 1.0,
                         ProgressUnit::kFraction);
      progress->Set(done);
    };
  }
  auto m = model::Model::Load(f.model, lo);
  if (progress) progress->Finish();
  if (!m.ok()) {
    fmt::print(stderr, "bench-model: {}\n", m.status().ToString());
    return 1;
  }
  auto kv_type = model::ParseKvType(f.kv_type);
  if (!kv_type.ok()) {
    fmt::print(stderr, "bench-model: {}\n", kv_type.status().ToString());
    return 2;
  }
  ThreadPool pool(f.threads);
  engine::ModelBenchOptions o;
  o.kv_type = *kv_type;
  o.prefill_tokens = f.prefill;
  o.decode_tokens = f.decode;
  o.depths = f.depths;
  o.repeats = std::max(1, f.repeats);
  o.measure_bandwidth = !f.no_bandwidth;
  auto r = engine::RunModelBench(**m, pool, o);
  if (!r.ok()) {
    fmt::print(stderr, "bench-model: {}\n", r.status().ToString());
    return 1;
  }
  const std::string text = f.format == "json" ? r->ToJson() : r->ToMarkdown();
  fmt::print("{}", text);
  const std::pair<std::string, std::string> files[] = {
      {f.output, text}, {f.json_file, r->ToJson()}};
  for (const auto& [path, content] : files) {
    if (path.empty()) continue;
    std::ofstream out(path);
    out << content;
    if (!out) {
      fmt::print(stderr, "bench-model: cannot write {}\n", path);
      return 1;
    }
  }
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<BenchModelFlags>();
  sub.add_option("-m,--model", f->model, "GGUF model file")->required();
  sub.add_option("-t,--threads", f->threads,
                 "Threads (default: physical cores)");
  sub.add_option("--kv-type", f->kv_type,
                 "KV cache element type: f16, q8_0 or f32")
      ->capture_default_str();
  // -p is --prompt elsewhere; bench-model's old `-p N` (llama-bench's prompt
  // length) is rewritten to --prefill with a note (vocabulary.cc).
  sub.add_option("--prefill,--n-prompt", f->prefill,
                 "Prompt lengths to measure prefill at")
      ->capture_default_str();
  sub.add_option("-n,--max-tokens,--n-predict,--decode", f->decode,
                 "Tokens to decode for the decode test")
      ->capture_default_str();
  sub.add_option("-d,--depth,--n-depth", f->depths,
                 "Tokens already in the KV cache before each test "
                 "(llama-bench's -d); the tests run once per depth")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  sub.add_option("-r,--repeats", f->repeats,
                 "Repeats per test; the median is reported")
      ->capture_default_str();
  sub.add_option("--format", f->format, "Output format: md (table) or json")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  sub.add_option("-o,--output", f->output,
                 "Also write the result (in --format) to this file");
  sub.add_option("--json", f->json_file,
                 "Also write the JSON result to this file");
  sub.add_flag("--no-repack", f->no_repack,
               "Measure weights read from the file's pages (no copy into huge "
               "pages, no packed panels)");
  sub.add_flag("--no-bandwidth", f->no_bandwidth,
               "Skip the memory bandwidth measurement (no roofline share)");
  sub.add_flag("-q,--quiet", f->quiet, "No progress output while loading");
  sub.callback([f, exit_code] {
    // `-o md|json` once chose the format; -o is a file everywhere now.
    if (f->output == "md" || f->output == "json") {
      fmt::print(stderr,
                 "bench-model: note: -o {0} is read as --format {0}; -o "
                 "names an output file\n",
                 f->output);
      f->format = f->output;
      f->output.clear();
    }
    *exit_code = RunBenchModel(*f);
  });
}

}  // namespace

RL_REGISTER_COMMAND_NAMED(
    bench_model, "bench-model",
    "Measure prefill and decode tok/s and the decode roofline share of a model",
    Setup);

}  // namespace redline::cli

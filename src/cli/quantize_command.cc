// redline quantize: IN.gguf OUT.gguf --type T, llama-quantize compatible.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/command_registry.h"
#include "model/gguf/gguf.h"
#include "quant/quantize_model.h"
#include "quant/report.h"

namespace redline::cli {
namespace {

struct QuantizeFlags {
  std::string input;
  std::string output;
  std::string type;
  int threads = 0;
  bool allow_requantize = false;
  std::string imatrix;
  bool report = false;
  std::string report_text;
  int report_ctx = 128;
  std::string format = "md";
};

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

int RunQuantize(const QuantizeFlags& f) {
  auto ftype = quant::ParseFileType(f.type);
  bool offered = false;
  for (auto name : quant::QuantizeTypeNames()) {
    if (ftype && quant::ParseFileType(name) == ftype) offered = true;
  }
  if (!ftype || !offered) {
    std::string names;
    for (auto name : quant::QuantizeTypeNames()) {
      names += (names.empty() ? "" : " ") + std::string(name);
    }
    fmt::print(stderr, "quantize: unknown --type '{}' (one of: {})\n", f.type,
               names);
    return 2;
  }
  if (f.report && f.report_text.empty()) {
    fmt::print(stderr, "quantize: --report needs --text FILE to score\n");
    return 2;
  }
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  quant::QuantizeOptions options;
  options.ftype = *ftype;
  options.threads = f.threads;
  options.allow_requantize = f.allow_requantize;
  options.imatrix_path = f.imatrix;
  if (f.allow_requantize) {
    fmt::print(stderr,
               "quantize: warning: --allow-requantize: tensors that are "
               "already quantised are dequantised and quantised again, which "
               "loses more accuracy than quantising the original\n");
  }
  options.on_progress = [tty](const quant::QuantizeProgress& p) {
    const auto& t = *p.tensor;
    const std::string line = fmt::format(
        "[{:4}/{:4}] {:<32} {:>6} -> {:<6} {:8.2f} -> {:8.2f} MiB{}{}",
        p.tensor_index + 1, p.tensor_count, t.name,
        model::gguf::TensorTypeName(t.from), model::gguf::TensorTypeName(t.to),
        MiB(t.bytes_in), MiB(t.bytes_out), t.fell_back ? " (fallback)" : "",
        t.weighted ? " (imatrix)" : "");
    if (tty) {
      const int width = 30;
      const int done = (p.tensor_index + 1) * width / p.tensor_count;
      fmt::print(stderr, "\r\033[K[{}{}] {}", std::string(done, '#'),
                 std::string(width - done, '.'), line);
      if (p.tensor_index + 1 == p.tensor_count) fmt::print(stderr, "\n");
    } else {
      fmt::print(stderr, "{}\n", line);
    }
  };
  auto report = quant::QuantizeModel(f.input, f.output, options);
  if (!report.ok()) {
    if (tty) fmt::print(stderr, "\n");
    fmt::print(stderr, "quantize: {}\n", report.status().ToString());
    return 1;
  }
  const auto& r = *report;
  if (!f.imatrix.empty()) {
    fmt::print(stderr,
               "quantize: imatrix {}: {} tensor(s) quantised with importance "
               "weights, {} without (no entry)\n",
               f.imatrix, r.weighted, r.without_imatrix.size());
    for (const auto& name : r.without_imatrix) {
      fmt::print(stderr, "quantize:   no imatrix entry for {}\n", name);
    }
  }
  if (r.fallbacks > 0) {
    fmt::print(stderr,
               "quantize: {} tensor(s) have rows the type cannot hold and "
               "fell back to another type\n",
               r.fallbacks);
  }
  fmt::print(stderr,
             "quantize: wrote {} ({}): {:.2f} MiB -> {:.2f} MiB ({:.2f}x "
             "smaller) in {:.2f} s\n",
             f.output, quant::FileTypeName(*ftype), MiB(r.input_file_bytes),
             MiB(r.output_file_bytes),
             r.output_file_bytes > 0
                 ? static_cast<double>(r.input_file_bytes) /
                       static_cast<double>(r.output_file_bytes)
                 : 0.0,
             r.seconds);
  if (!f.report) return 0;
  quant::ReportOptions ro;
  ro.text_path = f.report_text;
  ro.n_ctx = f.report_ctx;
  ro.threads = f.threads;
  ro.progress = tty;
  auto table = quant::CompareModels(f.input, {f.output}, ro);
  if (!table.ok()) {
    fmt::print(stderr, "quantize: report: {}\n", table.status().ToString());
    return 1;
  }
  fmt::print("{}", f.format == "json" ? quant::ReportJson(*table)
                                      : quant::ReportMarkdown(*table));
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<QuantizeFlags>();
  std::string names;
  for (auto name : quant::QuantizeTypeNames()) {
    names += (names.empty() ? "" : " ") + std::string(name);
  }
  sub.add_option("input", f->input, "Input GGUF model (F32/F16/BF16)")
      ->required();
  sub.add_option("output", f->output, "Output GGUF file")->required();
  sub.add_option("--type", f->type, "File type: " + names)->required();
  sub.add_option("-t,--threads", f->threads,
                 "Threads (default: physical cores)");
  sub.add_flag("--allow-requantize", f->allow_requantize,
               "Accept already-quantised input (dequantised first)");
  sub.add_option("--imatrix", f->imatrix,
                 "Importance matrix from llama.cpp's llama-imatrix (GGUF or "
                 "legacy .dat): weighs the quantisation error as "
                 "llama-quantize --imatrix does");
  sub.add_flag("--report", f->report,
               "Afterwards, compare input and output (size, speed, "
               "perplexity, KL divergence) on --text");
  sub.add_option("--text", f->report_text, "Text file scored by --report");
  sub.add_option("-c,--ctx-size,--max-model-len,--ctx", f->report_ctx,
                 "Context per chunk for --report")
      ->capture_default_str();
  sub.add_option("--format", f->format,
                 "Output of the --report table: md or json")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  sub.callback([f, exit_code] { *exit_code = RunQuantize(*f); });
}

}  // namespace

RL_REGISTER_COMMAND(quantize,
                    "Quantise a GGUF model (llama-quantize compatible)", Setup);

}  // namespace redline::cli

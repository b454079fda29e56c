// redline eval: perplexity (llama-perplexity's procedure), KL divergence
// against a reference model, and the size/speed/accuracy table.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "base/json_escape.h"
#include "cli/command_registry.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model.h"
#include "quant/perplexity.h"
#include "quant/report.h"

namespace redline::cli {
namespace {

struct EvalFlags {
  std::vector<std::string> models;
  std::string text;
  std::string ref;
  int64_t ctx = 128;
  int64_t chunks = 0;
  int threads = 0;
  std::string format = "md";
  std::string kv_type = "f16";
};

double MiB(uint64_t b) { return static_cast<double>(b) / 1048576.0; }

int RunTable(const EvalFlags& f, bool tty) {
  quant::ReportOptions ro;
  ro.text_path = f.text;
  ro.n_ctx = f.ctx;
  ro.max_chunks = f.chunks;
  ro.threads = f.threads;
  ro.progress = tty;
  std::string reference = f.ref;
  std::vector<std::string> others = f.models;
  if (reference.empty()) {
    reference = others.front();
    others.erase(others.begin());
  }
  auto table = quant::CompareModels(reference, others, ro);
  if (!table.ok()) {
    fmt::print(stderr, "eval: {}\n", table.status().ToString());
    return 1;
  }
  fmt::print("{}", f.format == "json" ? quant::ReportJson(*table)
                                      : quant::ReportMarkdown(*table));
  return 0;
}

int RunEval(const EvalFlags& f) {
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  if (f.models.size() > 1) return RunTable(f, tty);
  std::ifstream in(f.text, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "eval: cannot open --text {}\n", f.text);
    return 1;
  }
  const std::string text{std::istreambuf_iterator<char>(in),
                         std::istreambuf_iterator<char>()};
  model::LoadOptions lo;
  lo.threads = f.threads;
  auto m = model::Model::Load(f.models[0], lo);
  if (!m.ok()) {
    fmt::print(stderr, "eval: {}\n", m.status().ToString());
    return 1;
  }
  std::unique_ptr<model::Model> ref;
  if (!f.ref.empty()) {
    auto r = model::Model::Load(f.ref, lo);
    if (!r.ok()) {
      fmt::print(stderr, "eval: --ref: {}\n", r.status().ToString());
      return 1;
    }
    ref = std::move(*r);
  }
  auto kv_type = model::ParseKvType(f.kv_type);
  if (!kv_type.ok()) {
    fmt::print(stderr, "eval: {}\n", kv_type.status().ToString());
    return 2;
  }
  quant::EvalOptions eo;
  eo.kv_type = *kv_type;
  eo.n_ctx = f.ctx;
  eo.threads = f.threads;
  eo.max_chunks = f.chunks;
  eo.on_chunk = [tty](int64_t done, int64_t total, double ppl) {
    if (tty) {
      const int width = 30;
      const auto filled = static_cast<int>(done * width / total);
      fmt::print(stderr, "\r\033[K[{}{}] chunk {}/{} PPL {:.4f}",
                 std::string(filled, '#'), std::string(width - filled, '.'),
                 done, total, ppl);
      if (done == total) fmt::print(stderr, "\n");
    } else {
      fmt::print(stderr, "[{}] {:.4f}\n", done, ppl);
    }
  };
  auto r = quant::EvaluatePerplexity(**m, text, eo, ref.get());
  if (!r.ok()) {
    fmt::print(stderr, "eval: {}\n", r.status().ToString());
    return 1;
  }
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(f.models[0], ec);
  const std::string type = quant::ModelTypeName(**m);
  if (f.format == "json") {
    std::string out = fmt::format(
        "{{\"model\": {}, \"type\": {}, \"size_bytes\": {}, \"n_ctx\": {}, "
        "\"chunks\": {}, \"text_tokens\": {}, \"scored_tokens\": {}, "
        "\"ppl\": {:.6f}, \"ppl_stderr\": {:.6f}, \"pp_tok_per_s\": {:.2f}, "
        "\"tg_tok_per_s\": {:.2f}",
        JsonQuote(f.models[0]), JsonQuote(type), bytes, f.ctx, r->chunks,
        r->text_tokens, r->scored_tokens, r->ppl, r->ppl_stderr,
        r->prefill_tok_per_s, r->decode_tok_per_s);
    if (r->kl) {
      out += fmt::format(
          ", \"ref\": {}, \"ref_ppl\": {:.6f}, \"delta_ppl\": {:.6f}, "
          "\"kld_mean\": {:.6f}, \"kld_median\": {:.6f}, \"kld_p99\": {:.6f}, "
          "\"same_top1_pct\": {:.4f}",
          JsonQuote(f.ref), r->kl->ref_ppl, r->ppl - r->kl->ref_ppl,
          r->kl->mean, r->kl->median, r->kl->p99, r->kl->same_top1_pct);
    }
    fmt::print("{}}}\n", out);
    return 0;
  }
  fmt::print("model: {} ({}, {:.2f} MiB)\n", f.models[0], type, MiB(bytes));
  fmt::print("text: {} tokens, {} chunks of {}, {} scored\n", r->text_tokens,
             r->chunks, f.ctx, r->scored_tokens);
  fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r->ppl,
             r->ppl_stderr);
  if (r->kl) {
    fmt::print("reference {}: PPL = {:.4f}, ΔPPL = {:+.4f} ({:+.2f} %)\n",
               f.ref, r->kl->ref_ppl, r->ppl - r->kl->ref_ppl,
               100 * (r->ppl - r->kl->ref_ppl) / r->kl->ref_ppl);
    fmt::print(
        "KL divergence: mean {:.6f}, median {:.6f}, p99 {:.6f}; same top-1 "
        "{:.3f} %\n",
        r->kl->mean, r->kl->median, r->kl->p99, r->kl->same_top1_pct);
  }
  fmt::print("speed: prefill {:.1f} tok/s, decode {:.1f} tok/s\n",
             r->prefill_tok_per_s, r->decode_tok_per_s);
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<EvalFlags>();
  sub.add_option("-m,--model", f->models,
                 "GGUF model (repeat for a comparison table)")
      ->required();
  sub.add_option("--text", f->text, "Text file to score")->required();
  sub.add_option("--ref", f->ref,
                 "Reference model: KL divergence, top-1 agreement, ΔPPL");
  sub.add_option("-c,--ctx-size,--max-model-len,--ctx", f->ctx,
                 "Tokens per chunk")
      ->capture_default_str();
  sub.add_option("--chunks", f->chunks, "Evaluate at most N chunks (0: all)");
  sub.add_option("--kv-type", f->kv_type,
                 "KV cache element type of -m: f16 (ggml's arithmetic), q8_0 "
                 "or f32; the --ref model's is f16")
      ->capture_default_str();
  sub.add_option("-t,--threads", f->threads,
                 "Threads (default: physical cores)");
  sub.add_option("--format", f->format, "Output: md (tables) or json")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  sub.callback([f, exit_code] { *exit_code = RunEval(*f); });
}

}  // namespace

RL_REGISTER_COMMAND(eval,
                    "Perplexity / KL divergence of a model on a text "
                    "(llama-perplexity compatible)",
                    Setup);

}  // namespace redline::cli

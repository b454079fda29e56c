#include "quant/report.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "base/json_escape.h"
#include "base/thread_pool.h"
#include "quant/mixture.h"

namespace redline::quant {
namespace {

Result<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound(fmt::format("cannot open {}", path));
  std::string text{std::istreambuf_iterator<char>(f),
                   std::istreambuf_iterator<char>()};
  if (f.bad()) return Status::IoError(fmt::format("cannot read {}", path));
  return text;
}

Result<std::unique_ptr<model::Model>> LoadForEval(const std::string& path,
                                                  int threads) {
  model::LoadOptions lo;
  lo.threads = threads;
  return model::Model::Load(path, lo);
}

std::string Size(uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / 1048576.0;
  return mib >= 1024 ? fmt::format("{:.2f} GiB", mib / 1024)
                     : fmt::format("{:.2f} MiB", mib);
}

}  // namespace

std::string ModelTypeName(const model::Model& model) {
  auto ft = model.file().GetInt("general.file_type");
  if (ft.ok()) {
    const auto type = static_cast<FileType>(*ft);
    const std::string_view name = FileTypeName(type);
    if (name != "?") return std::string(name);
  }
  return model.WeightTypeSummary();
}

Result<ReportTable> CompareModels(const std::string& reference,
                                  const std::vector<std::string>& others,
                                  const ReportOptions& options) {
  RL_ASSIGN_OR_RETURN(std::string text, ReadText(options.text_path));
  RL_ASSIGN_OR_RETURN(auto ref, LoadForEval(reference, options.threads));
  EvalOptions eo;
  eo.n_ctx = options.n_ctx;
  eo.threads = options.threads;
  eo.max_chunks = options.max_chunks;
  ReportTable table;
  table.n_ctx = options.n_ctx;
  table.threads = options.threads > 0 ? options.threads : PhysicalCoreCount();
  auto progress_for = [&options](const std::string& path) {
    return [&options, path](int64_t done, int64_t total, double ppl) {
      if (!options.progress) return;
      std::fprintf(stderr, "\r\033[K%s: chunk %lld/%lld, PPL %.4f",
                   path.c_str(), static_cast<long long>(done),
                   static_cast<long long>(total), ppl);
      if (done == total) std::fprintf(stderr, "\n");
    };
  };
  eo.on_chunk = progress_for(reference);
  RL_ASSIGN_OR_RETURN(EvalResult base, EvaluatePerplexity(*ref, text, eo));
  std::error_code ec;
  ReportRow base_row;
  base_row.path = reference;
  base_row.type = ModelTypeName(*ref);
  base_row.file_bytes = std::filesystem::file_size(reference, ec);
  base_row.pp_tok_per_s = base.prefill_tok_per_s;
  base_row.tg_tok_per_s = base.decode_tok_per_s;
  base_row.ppl = base.ppl;
  base_row.ppl_stderr = base.ppl_stderr;
  table.chunks = base.chunks;
  table.rows.push_back(base_row);
  for (const auto& path : others) {
    RL_ASSIGN_OR_RETURN(auto m, LoadForEval(path, options.threads));
    eo.on_chunk = progress_for(path);
    RL_ASSIGN_OR_RETURN(EvalResult r,
                        EvaluatePerplexity(*m, text, eo, ref.get()));
    ReportRow row;
    row.path = path;
    row.type = ModelTypeName(*m);
    row.file_bytes = std::filesystem::file_size(path, ec);
    row.size_ratio = row.file_bytes > 0
                         ? static_cast<double>(base_row.file_bytes) /
                               static_cast<double>(row.file_bytes)
                         : 0;
    row.pp_tok_per_s = r.prefill_tok_per_s;
    row.tg_tok_per_s = r.decode_tok_per_s;
    row.speedup = base_row.tg_tok_per_s > 0
                      ? r.decode_tok_per_s / base_row.tg_tok_per_s
                      : 0;
    row.ppl = r.ppl;
    row.ppl_stderr = r.ppl_stderr;
    row.delta_ppl = r.ppl - base.ppl;
    row.kl = r.kl;
    table.rows.push_back(row);
  }
  return table;
}

std::string ReportMarkdown(const ReportTable& t) {
  std::string out = fmt::format(
      "ctx {}, {} chunks, {} threads; ΔPPL, KLD and top-1 against {}\n\n",
      t.n_ctx, t.chunks, t.threads, t.rows.empty() ? "" : t.rows[0].path);
  out +=
      "| type | size | size ratio | pp tok/s | tg tok/s | speed-up | PPL | "
      "ΔPPL | KLD | top-1 % |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : t.rows) {
    const double base_ppl = t.rows[0].ppl;
    out += fmt::format(
        "| {} | {} | {:.2f}x | {:.1f} | {:.1f} | {:.2f}x | {:.4f} ± {:.4f} | "
        "{} | {} | {} |\n",
        r.type, Size(r.file_bytes), r.size_ratio, r.pp_tok_per_s,
        r.tg_tok_per_s, r.speedup, r.ppl, r.ppl_stderr,
        r.kl ? fmt::format("{:+.4f} ({:+.2f} %)", r.delta_ppl,
                           base_ppl > 0 ? 100 * r.delta_ppl / base_ppl : 0)
             : "-",
        r.kl ? fmt::format("{:.6f}", r.kl->mean) : "-",
        r.kl ? fmt::format("{:.2f}", r.kl->same_top1_pct) : "-");
  }
  return out;
}

std::string ReportJson(const ReportTable& t) {
  std::string out = fmt::format(
      "{{\"n_ctx\": {}, \"chunks\": {}, \"threads\": {}, \"rows\": [", t.n_ctx,
      t.chunks, t.threads);
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& r = t.rows[i];
    out += fmt::format(
        "{}{{\"path\": {}, \"type\": {}, \"size_bytes\": {}, "
        "\"size_ratio\": {:.4f}, \"pp_tok_per_s\": {:.2f}, "
        "\"tg_tok_per_s\": {:.2f}, \"speedup\": {:.4f}, \"ppl\": {:.6f}, "
        "\"ppl_stderr\": {:.6f}",
        i == 0 ? "" : ", ", JsonQuote(r.path), JsonQuote(r.type), r.file_bytes,
        r.size_ratio, r.pp_tok_per_s, r.tg_tok_per_s, r.speedup, r.ppl,
        r.ppl_stderr);
    if (r.kl) {
      out += fmt::format(
          ", \"delta_ppl\": {:.6f}, \"kld_mean\": {:.6f}, \"kld_median\": "
          "{:.6f}, \"kld_p99\": {:.6f}, \"same_top1_pct\": {:.4f}",
          r.delta_ppl, r.kl->mean, r.kl->median, r.kl->p99,
          r.kl->same_top1_pct);
    }
    out += "}";
  }
  out += "]}\n";
  return out;
}

}  // namespace redline::quant

// The one-table comparison of a float model and its quantised versions:
//   type | size | size ratio | pp tok/s | tg tok/s | speed-up | PPL | ΔPPL |
//   KLD | top-1 %
// as Markdown and JSON. The first file is the reference: every other row's
// KLD / top-1 / ΔPPL are against it, and size ratio and speed-up are the
// reference's size and decode time over the row's.
//
// Thread-safety: CompareModels is reentrant. Cost: per file, loading it and
// one evaluation (quant/perplexity.h) with the reference alongside.
#ifndef REDLINE_QUANT_REPORT_H_
#define REDLINE_QUANT_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "quant/perplexity.h"

namespace redline::quant {

struct ReportOptions {
  std::string text_path;  // the evaluation text
  int64_t n_ctx = 128;
  int64_t max_chunks = 0;
  int threads = 0;
  bool progress = false;  // a progress line per chunk on stderr
};

struct ReportRow {
  std::string path;
  std::string type;  // "F16", "Q4_K_M", ...
  uint64_t file_bytes = 0;
  double size_ratio = 1;  // reference bytes / these bytes
  double pp_tok_per_s = 0;
  double tg_tok_per_s = 0;
  double speedup = 1;  // tg tok/s over the reference's
  double ppl = 0;
  double ppl_stderr = 0;
  double delta_ppl = 0;       // ppl - reference ppl
  std::optional<KlStats> kl;  // absent for the reference row
};

struct ReportTable {
  int64_t n_ctx = 0;
  int64_t chunks = 0;
  int threads = 0;
  std::vector<ReportRow> rows;  // reference first
};

// Evaluates `reference` and each of `others` on options.text_path.
Result<ReportTable> CompareModels(const std::string& reference,
                                  const std::vector<std::string>& others,
                                  const ReportOptions& options);

std::string ReportMarkdown(const ReportTable& table);
std::string ReportJson(const ReportTable& table);

// The file's type as llama.cpp names it (general.file_type), else its
// weight-type summary.
std::string ModelTypeName(const model::Model& model);

}  // namespace redline::quant

#endif  // REDLINE_QUANT_REPORT_H_

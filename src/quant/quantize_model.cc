#include "quant/quantize_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <system_error>

#include "base/thread_pool.h"
#include "model/gguf/gguf_writer.h"
#include "quant/imatrix.h"
#include "quant/row_quantize.h"

namespace redline::quant {
namespace {

namespace gguf = model::gguf;

// llama.cpp's GGML_QNT_VERSION, written as general.quantization_version.
constexpr uint32_t kQuantizationVersion = 2;

int LayerOf(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

bool IsFloatType(TensorType t) {
  return t == TensorType::kF32 || t == TensorType::kF16 ||
         t == TensorType::kBF16;
}

int64_t MetaInt(const gguf::GgufFile& file, const std::string& key,
                int64_t fallback) {
  auto v = file.GetInt(key);
  return v.ok() ? *v : fallback;
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
  const auto na = std::filesystem::weakly_canonical(a, ec);
  if (ec) return false;
  const auto nb = std::filesystem::weakly_canonical(b, ec);
  return !ec && na == nb;
}

}  // namespace

bool LlamaTensorOrderLess(const std::string& a, const std::string& b) {
  const int la = LayerOf(a);
  const int lb = LayerOf(b);
  if (la != lb) return la < lb;
  return a < b;
}

Result<QuantizeReport> QuantizeModel(const std::string& input,
                                     const std::string& output,
                                     const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (SameFile(input, output)) {
    return Status::InvalidArgument(fmt::format(
        "output {} is the input file; choose another output path", output));
  }
  const TensorType base = DefaultTensorType(options.ftype);
  if (!CanQuantizeTo(base)) {
    return Status::InvalidArgument("unsupported file type");
  }
  gguf::OpenOptions open_options;
  open_options.require_supported_types = false;
  RL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                      gguf::GgufFile::Open(input, open_options));

  // Tensors in llama.cpp's order.
  std::vector<const gguf::TensorInfo*> tensors;
  for (const auto& t : file.tensors()) tensors.push_back(&t);
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
                     return LlamaTensorOrderLess(a->name, b->name);
                   });
  std::vector<std::string> names;
  for (const auto* t : tensors) names.push_back(t->name);

  ModelShape shape;
  if (auto arch = file.GetString("general.architecture"); arch.ok()) {
    shape.arch = *arch;
  }
  shape.n_layer = MetaInt(file, shape.arch + ".block_count", 0);
  shape.n_head = MetaInt(file, shape.arch + ".attention.head_count", 0);
  shape.n_head_kv =
      MetaInt(file, shape.arch + ".attention.head_count_kv", shape.n_head);
  shape.n_expert = MetaInt(file, shape.arch + ".expert_count", 0);
  std::optional<Imatrix> imatrix;
  if (!options.imatrix_path.empty()) {
    RL_ASSIGN_OR_RETURN(Imatrix loaded, Imatrix::Load(options.imatrix_path));
    imatrix = std::move(loaded);
  }
  MixturePlanner planner(options.ftype, shape, names, imatrix.has_value());
  // Per tensor: its importance values ([dims[0] x dims[2]]), or null.
  std::vector<const std::vector<float>*> importance(tensors.size(), nullptr);

  QuantizeReport report;
  report.tensors.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const gguf::TensorInfo& t = *tensors[i];
    const TensorPlan plan = planner.Plan(t.name, t.dims, t.type);
    if (plan.impossible) {
      return Status::InvalidArgument(fmt::format(
          "tensor {} has rows of {} elements, which {} cannot hold (needs a "
          "multiple of {})",
          t.name, t.dims[0], gguf::TensorTypeName(plan.type),
          gguf::TensorTypeBlockElements(plan.type)));
    }
    TensorReport& r = report.tensors[i];
    r.name = t.name;
    r.dims = t.dims;
    r.from = t.type;
    r.to = plan.type;
    r.fell_back = plan.fell_back;
    r.bytes_in = t.size_bytes;
    r.bytes_out = gguf::GgufWriter::TensorBytes(r.to, r.dims);
    if (r.from != r.to) {
      if (!IsFloatType(r.from)) {
        if (!options.allow_requantize) {
          return Status::InvalidArgument(fmt::format(
              "tensor {} is already quantised ({}); re-quantising loses "
              "accuracy, pass --allow-requantize to do it anyway",
              t.name, gguf::TensorTypeName(r.from)));
        }
        if (!CanQuantizeTo(r.from)) {
          return Status::Unimplemented(
              fmt::format("tensor {}: cannot dequantise type {}", t.name,
                          gguf::TensorTypeName(r.from)));
        }
        ++report.requantized;
      }
      if (!CanQuantizeTo(r.to)) {
        return Status::Unimplemented(
            fmt::format("tensor {}: cannot quantise to {}", t.name,
                        gguf::TensorTypeName(r.to)));
      }
    }
    // Q8_0 and the float types are the same with or without weights; an
    // imatrix covers 2-D matrices and 3-D stacks of experts.
    if (imatrix && r.from != r.to && !IsFloatType(r.to) &&
        r.to != TensorType::kQ8_0 && t.dims.size() <= 3) {
      const std::vector<float>* values = imatrix->Find(t.name);
      const int64_t want = t.dims[0] * (t.dims.size() > 2 ? t.dims[2] : 1);
      if (values == nullptr) {
        report.without_imatrix.push_back(t.name);
      } else if (static_cast<int64_t>(values->size()) != want) {
        // llama-quantize lets only the token embeddings through (their
        // entry, if any, is for their use as the tied output).
        if (t.name != "token_embd.weight" &&
            t.name != "per_layer_token_embd.weight") {
          return Status::InvalidArgument(fmt::format(
              "imatrix entry for {} has {} values, the tensor needs {} ({} "
              "columns x {} matrices): the imatrix was made for another "
              "model",
              t.name, values->size(), want, t.dims[0], want / t.dims[0]));
        }
        report.without_imatrix.push_back(t.name);
      } else {
        importance[i] = values;
        r.weighted = true;
        ++report.weighted;
      }
    }
    if (r.fell_back) ++report.fallbacks;
    report.tensor_bytes_in += r.bytes_in;
    report.tensor_bytes_out += r.bytes_out;
  }

  gguf::GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version" ||
        key == "split.no" || key == "split.count" ||
        key == "split.tensors.count") {
      continue;
    }
    writer.Set(key, value);
  }
  writer.Set("general.quantization_version",
             gguf::Value::U32(kQuantizationVersion));
  writer.Set("general.file_type",
             gguf::Value::U32(static_cast<uint32_t>(options.ftype)));
  if (imatrix) {
    // llama-quantize stores these as 127-byte C strings.
    auto truncated = [](const std::string& v) { return v.substr(0, 127); };
    writer.Set("quantize.imatrix.file",
               gguf::Value::Str(truncated(options.imatrix_path)));
    if (!imatrix->datasets().empty()) {
      writer.Set("quantize.imatrix.dataset",
                 gguf::Value::Str(truncated(imatrix->datasets()[0])));
    }
    writer.Set("quantize.imatrix.entries_count",
               gguf::Value::U32(static_cast<uint32_t>(imatrix->size())));
    if (imatrix->chunk_count() > 0) {
      writer.Set(
          "quantize.imatrix.chunks_count",
          gguf::Value::U32(static_cast<uint32_t>(imatrix->chunk_count())));
    }
  }

  ThreadPool pool(options.threads);
  const int count = static_cast<int>(tensors.size());
  for (int i = 0; i < count; ++i) {
    const gguf::TensorInfo* t = tensors[i];
    const TensorReport* r = &report.tensors[i];
    const std::vector<float>* weights = importance[i];
    writer.AddTensor(
        t->name, r->to, t->dims,
        [t, r, i, count, weights, &pool, &options](std::span<uint8_t> out) {
          if (r->from == r->to) {
            std::copy(t->data, t->data + t->size_bytes, out.begin());
          } else {
            const int64_t n_per_row = t->dims[0];
            const int64_t rows = t->NumElements() / n_per_row;
            // Rows per matrix: a 3-D tensor holds dims[2] matrices (experts),
            // each with its own slice of the importance values.
            const int64_t matrix_rows = t->dims.size() > 1 ? t->dims[1] : 1;
            const int64_t in_row = RowBytes(r->from, n_per_row);
            const int64_t out_row = RowBytes(r->to, n_per_row);
            // Rows are independent, so any split gives the same bytes.
            const int64_t grain = std::max<int64_t>(1, 16384 / n_per_row);
            pool.ParallelFor(rows, grain, [&](int64_t begin, int64_t end, int) {
              std::vector<float> row(static_cast<size_t>(n_per_row));
              for (int64_t k = begin; k < end; ++k) {
                DequantizeRow(
                    r->from,
                    std::span<const uint8_t>(t->data + k * in_row, in_row),
                    row);
                std::span<const float> row_importance;
                if (weights != nullptr) {
                  row_importance = std::span<const float>(*weights).subspan(
                      static_cast<size_t>((k / matrix_rows) * n_per_row),
                      static_cast<size_t>(n_per_row));
                }
                QuantizeRow(r->to, row,
                            out.subspan(static_cast<size_t>(k * out_row),
                                        static_cast<size_t>(out_row)),
                            row_importance);
              }
            });
          }
          if (options.on_progress) {
            options.on_progress(QuantizeProgress{i, count, r});
          }
        });
  }
  RL_RETURN_IF_ERROR(writer.Write(output));

  std::error_code ec;
  report.input_file_bytes = std::filesystem::file_size(input, ec);
  report.output_file_bytes = std::filesystem::file_size(output, ec);
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace redline::quant

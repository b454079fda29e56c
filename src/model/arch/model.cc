#include "model/arch/model.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/dtype.h"
#include "model/arch/repack.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::model {

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                           const LoadOptions& options) {
  auto report = [&](double p) {
    if (options.progress) options.progress(p);
  };
  report(0.0);
  LoadTimings unused;
  LoadTimings& lt = options.timings != nullptr ? *options.timings : unused;
  auto t_last = std::chrono::steady_clock::now();
  auto lap = [&t_last](double* ms) {
    const auto now = std::chrono::steady_clock::now();
    *ms = std::chrono::duration<double, std::milli>(now - t_last).count();
    t_last = now;
  };
  std::unique_ptr<Model> m(new Model());
  auto file = gguf::GgufFile::Open(path, /*require_supported_types=*/true);
  if (!file.ok()) return file.status().WithContext(path);
  m->file_ = std::make_unique<gguf::GgufFile>(std::move(file).value());
  lap(&lt.open_validate_ms);
  report(0.1);
  auto config = ModelConfig::FromGguf(*m->file_);
  if (!config.ok()) return config.status().WithContext(path);
  m->config_ = *config;
  auto weights = LoadWeights(*m->file_, &m->config_);
  if (!weights.ok()) return weights.status().WithContext(path);
  m->weights_ = std::move(weights).value();
  lap(&lt.weights_ms);
  report(0.2);
  if (options.load_tokenizer) {
    auto tok = Tokenizer::FromGguf(*m->file_);
    if (tok.ok()) {
      m->tokenizer_ = std::move(tok).value();
      if (m->tokenizer_->vocab_size() > m->config_.vocab_size) {
        m->tokenizer_status_ = Status::InvalidArgument(
            "vocabulary is larger than the embedding table");
        m->tokenizer_.reset();
      }
    } else {
      m->tokenizer_status_ = tok.status();
    }
  }
  if (auto t = m->file_->GetString("tokenizer.chat_template"); t.ok())
    m->chat_template_ = *t;
  lap(&lt.tokenizer_ms);
  report(0.3);
  MappedFile* mapping = m->file_->mapping();
  if (mapping != nullptr && options.mlock) RL_RETURN_IF_ERROR(mapping->Lock());
  if (mapping != nullptr && (options.prefetch || options.mlock))
    mapping->Prefetch();
  // Byte ranges of the file whose pages were given back after repacking.
  std::vector<std::pair<size_t, size_t>> released;
  const bool repack = options.repack;
  const double repack_end = repack ? 0.8 : 0.3;
  if (repack) {
    ThreadPool pool(options.threads);
    const kernels::WeightView embd = m->weights_.token_embd;
    auto on_copied = [&](const kernels::WeightView& w, double done) {
      // The file's rows of a copied matrix are no longer read (except a
      // tied output's, which are the embeddings): give their pages back
      // one matrix at a time, so memory peaks at one copy plus a matrix.
      if (mapping != nullptr && !options.mlock && w.data != embd.data) {
        const auto bytes =
            static_cast<size_t>(w.rows * kernels::RowBytes(w.type, w.cols));
        mapping->Release(w.data, bytes);
        const auto begin = static_cast<size_t>(
            static_cast<const uint8_t*>(w.data) - mapping->data());
        released.emplace_back(begin, begin + bytes);
      }
      report(0.3 + (repack_end - 0.3) * done);
    };
    RL_RETURN_IF_ERROR(
        RepackWeights(&m->weights_, pool, options.mlock, on_copied)
            .WithContext(path));
  }
  lap(&lt.repack_ms);
  if (mapping != nullptr && (options.prefetch || options.mlock)) {
    // Touch one byte per page still in use so weights are resident before
    // the first request; report progress as we go (without repacking, this
    // is most of the load time).
    std::sort(released.begin(), released.end());
    const uint8_t* data = mapping->data();
    const size_t size = mapping->size();
    constexpr size_t kPage = 4096;
    volatile uint8_t sink = 0;
    const size_t step = std::max<size_t>(size / 64, kPage);
    size_t next_range = 0;
    for (size_t chunk = 0; chunk < size; chunk += step) {
      const size_t end = std::min(size, chunk + step);
      for (size_t off = chunk; off < end; off += kPage) {
        while (next_range < released.size() &&
               released[next_range].second <= off)
          ++next_range;
        if (next_range < released.size() && off >= released[next_range].first)
          continue;
        sink = sink + data[off];
      }
      report(repack_end + (1.0 - repack_end) * static_cast<double>(end) /
                              static_cast<double>(size));
    }
  }
  lap(&lt.page_in_ms);
  report(1.0);
  return m;
}

std::string Model::WeightTypeSummary() const {
  std::set<std::string_view> types;
  for (const LayerWeights& l : weights_.layers) {
    for (const auto* w : l.Matrices()) {
      types.insert(kernels::DTypeName(w->type));
    }
  }
  types.insert(kernels::DTypeName(weights_.output.type));
  std::string out;
  for (auto t : types) out += (out.empty() ? "" : "+") + std::string(t);
  return out;
}

}  // namespace redline::model

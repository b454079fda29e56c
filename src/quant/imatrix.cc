#include "quant/imatrix.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "base/mapped_file.h"
#include "model/gguf/gguf.h"

namespace redline::quant {
namespace {

namespace gguf = model::gguf;

constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";

bool StripSuffix(std::string& name, std::string_view suffix) {
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  name.resize(name.size() - suffix.size());
  return true;
}

// Little-endian reads with bounds: every read says what it was for.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  Status Read(void* out, size_t n, std::string_view what) {
    if (n > bytes_.size() - pos_) {
      return Status::DataLoss(
          fmt::format("truncated: {} at byte {} needs {} bytes, {} remain",
                      what, pos_, n, bytes_.size() - pos_));
    }
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  Result<int32_t> I32(std::string_view what) {
    int32_t v = 0;
    RL_RETURN_IF_ERROR(Read(&v, sizeof(v), what));
    return v;
  }
  size_t remaining() const { return bytes_.size() - pos_; }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

Result<std::vector<float>> F32Values(const gguf::TensorInfo& t) {
  if (t.type != gguf::TensorType::kF32) {
    return Status::InvalidArgument(
        fmt::format("tensor {} has type {}, expected F32", t.name,
                    gguf::TensorTypeName(t.type)));
  }
  std::vector<float> v(static_cast<size_t>(t.NumElements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

}  // namespace

Result<Imatrix> Imatrix::Load(const std::string& path) {
  RL_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  if (file.size() > kMaxImatrixFileBytes) {
    return Status::InvalidArgument(
        fmt::format("{}: {} bytes is larger than any importance matrix ({} "
                    "bytes at most)",
                    path, file.size(), kMaxImatrixFileBytes));
  }
  auto parsed = Parse(file.bytes());
  if (!parsed.ok()) {
    return Status(parsed.status().code(),
                  fmt::format("{}: {}", path, parsed.status().message()));
  }
  return parsed;
}

Result<Imatrix> Imatrix::Parse(std::span<const uint8_t> bytes) {
  const bool is_gguf =
      bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
  RL_ASSIGN_OR_RETURN(Imatrix m,
                      is_gguf ? ParseGguf(bytes) : ParseLegacy(bytes));
  RL_RETURN_IF_ERROR(m.CheckFinite());
  return m;
}

Result<Imatrix> Imatrix::ParseGguf(std::span<const uint8_t> bytes) {
  gguf::OpenOptions options;
  options.require_supported_types = false;
  RL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                      gguf::GgufFile::Parse(bytes, options));
  if (file.tensors().empty()) {
    return Status::InvalidArgument("importance matrix has no entries");
  }
  Imatrix m;
  auto datasets = file.GetStringArray("imatrix.datasets");
  auto chunk_count = file.GetInt("imatrix.chunk_count");
  auto chunk_size = file.GetInt("imatrix.chunk_size");
  if (!datasets.ok() || !chunk_count.ok() || !chunk_size.ok()) {
    return Status::InvalidArgument(
        "missing importance-matrix metadata (imatrix.datasets, "
        "imatrix.chunk_count and imatrix.chunk_size are required)");
  }
  m.datasets_ = std::move(*datasets);
  m.chunk_count_ = *chunk_count;

  std::map<std::string,
           std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>>
      pairs;
  for (const auto& t : file.tensors()) {
    std::string name = t.name;
    if (StripSuffix(name, kSumsSuffix)) {
      pairs[name].first = &t;
    } else if (StripSuffix(name, kCountsSuffix)) {
      pairs[name].second = &t;
    }
  }
  for (const auto& [name, pair] : pairs) {
    const auto [sums_t, counts_t] = pair;
    if (sums_t == nullptr || counts_t == nullptr) {
      return Status::InvalidArgument(
          fmt::format("entry {} has {} but no {}", name,
                      sums_t != nullptr ? kSumsSuffix : kCountsSuffix,
                      sums_t != nullptr ? kCountsSuffix : kSumsSuffix));
    }
    RL_ASSIGN_OR_RETURN(std::vector<float> sums, F32Values(*sums_t));
    RL_ASSIGN_OR_RETURN(std::vector<float> counts, F32Values(*counts_t));
    const size_t n_mat = counts.size();
    if (sums.size() % n_mat != 0) {
      return Status::InvalidArgument(
          fmt::format("entry {}: {} sums do not divide into {} matrices", name,
                      sums.size(), n_mat));
    }
    const size_t n_cols = sums.size() / n_mat;
    std::vector<float>& values = m.entries_[name];
    values.resize(sums.size());
    for (size_t j = 0; j < n_mat; ++j) {
      // llama.cpp rounds the stored count to an integer, then divides in
      // float.
      const auto count = static_cast<float>(std::lround(counts[j]));
      for (size_t i = 0; i < n_cols; ++i) {
        values[j * n_cols + i] =
            count > 0.0f ? sums[j * n_cols + i] / count : 1.0f;
      }
    }
  }
  if (m.entries_.empty()) {
    return Status::InvalidArgument(
        "importance matrix has no NAME.in_sum2 / NAME.counts tensors");
  }
  return m;
}

Result<Imatrix> Imatrix::ParseLegacy(std::span<const uint8_t> bytes) {
  Reader in(bytes);
  Imatrix m;
  m.legacy_ = true;
  RL_ASSIGN_OR_RETURN(const int32_t n_entries, in.I32("entry count"));
  // Each entry takes at least 16 bytes (three counts and one value).
  if (n_entries < 1 || static_cast<size_t>(n_entries) > in.remaining() / 16) {
    return Status::InvalidArgument(fmt::format(
        "not an importance matrix: entry count {} (neither GGUF nor the "
        "legacy format with {} bytes of entries)",
        n_entries, in.remaining()));
  }
  for (int32_t e = 0; e < n_entries; ++e) {
    RL_ASSIGN_OR_RETURN(const int32_t len,
                        in.I32(fmt::format("entry {} name length", e)));
    if (len < 1 || len > kMaxImatrixNameBytes) {
      return Status::InvalidArgument(
          fmt::format("entry {}: name length {} at byte {} (1 to {})", e, len,
                      in.pos() - 4, kMaxImatrixNameBytes));
    }
    std::string name(static_cast<size_t>(len), '\0');
    RL_RETURN_IF_ERROR(
        in.Read(name.data(), name.size(), fmt::format("entry {} name", e)));
    // llama.cpp reads the name as a C string.
    name.resize(std::strlen(name.c_str()));
    RL_ASSIGN_OR_RETURN(const int32_t ncall,
                        in.I32(fmt::format("entry {} call count", e)));
    RL_ASSIGN_OR_RETURN(const int32_t n_values,
                        in.I32(fmt::format("entry {} value count", e)));
    if (n_values < 1 ||
        static_cast<size_t>(n_values) > in.remaining() / sizeof(float)) {
      return Status::DataLoss(
          fmt::format("entry {} ('{}'): {} values at byte {}, {} bytes remain",
                      e, name, n_values, in.pos() - 4, in.remaining()));
    }
    std::vector<float> values(static_cast<size_t>(n_values));
    RL_RETURN_IF_ERROR(in.Read(values.data(), values.size() * sizeof(float),
                               fmt::format("entry {} values", e)));
    if (ncall > 0) {
      for (float& v : values) v = v / static_cast<float>(ncall);
    }
    if (!m.entries_.emplace(name, std::move(values)).second) {
      return Status::InvalidArgument(
          fmt::format("entry {}: name '{}' appears twice", e, name));
    }
  }
  // Optional trailer: chunk count, then the dataset's name.
  if (in.remaining() > 0) {
    RL_ASSIGN_OR_RETURN(const int32_t chunks, in.I32("chunk count"));
    m.chunk_count_ = chunks;
    if (in.remaining() >= 4) {
      RL_ASSIGN_OR_RETURN(const int32_t len, in.I32("dataset name length"));
      if (len > 0 && static_cast<size_t>(len) <= in.remaining()) {
        std::string dataset(static_cast<size_t>(len), '\0');
        RL_RETURN_IF_ERROR(
            in.Read(dataset.data(), dataset.size(), "dataset name"));
        dataset.resize(std::strlen(dataset.c_str()));
        m.datasets_.push_back(std::move(dataset));
      }
    }
  }
  return m;
}

Status Imatrix::CheckFinite() const {
  for (const auto& [name, values] : entries_) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        return Status::InvalidArgument(fmt::format(
            "entry {}: value {} is {} (importance values must be finite)", name,
            i, values[i]));
      }
    }
  }
  return Status::Ok();
}

const std::vector<float>* Imatrix::Find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace redline::quant

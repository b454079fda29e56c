// An importance matrix: for each weight matrix, how much each of its input
// columns matters (the mean square of the activations it was multiplied
// with over a calibration text), read from llama.cpp's llama-imatrix
// output so that `redline quantize --imatrix` weighs the quantisation error
// as llama-quantize does.
//
// Two file formats, told apart by the first four bytes:
//   - GGUF ("GGUF" magic): per weight tensor NAME, an F32 tensor
//     NAME.in_sum2 (sums of squared activations, [n_cols, n_mat]) and an F32
//     tensor NAME.counts ([n_mat], activation rows seen per matrix); metadata
//     imatrix.datasets (strings), imatrix.chunk_count and imatrix.chunk_size
//     are required. Value = in_sum2 / count per matrix, 1 where a matrix saw
//     no rows.
//   - the legacy .dat: int32 entry count; per entry int32 name length, the
//     name, int32 ncall, int32 n_values, n_values floats (already divided by
//     the rows seen, times ncall); optionally int32 chunk count, int32
//     dataset length, dataset name. Value = stored / ncall (as stored when
//     ncall is 0).
// The values are what llama-quantize passes to ggml's quantisers, computed
// with the same float operations.
//
// Bad input (truncated or oversized counts, missing halves of a GGUF pair,
// mismatched sizes, non-F32 tensors, non-finite values) is an error naming
// the entry; nothing is partially loaded.
//
// Thread-safety: immutable after Load/Parse. Cost: Load reads the whole
// file (a 1B model's matrix is ~2 MB); memory is one float per column per
// matrix.
#ifndef REDLINE_QUANT_IMATRIX_H_
#define REDLINE_QUANT_IMATRIX_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace redline::quant {

// Largest file Load reads (real ones are a few MB; 70B models ~200 MB).
inline constexpr uint64_t kMaxImatrixFileBytes = uint64_t{4} << 30;
// Longest entry name in a legacy file (GGUF tensor names are <= 64 bytes).
inline constexpr int32_t kMaxImatrixNameBytes = 4096;

class Imatrix {
 public:
  // Errors: NotFound/IoError for the file, DataLoss for truncation,
  // InvalidArgument for malformed content (the message names the file).
  static Result<Imatrix> Load(const std::string& path);
  // Same over bytes in memory (tests, the fuzzer).
  static Result<Imatrix> Parse(std::span<const uint8_t> bytes);

  // The importance values for weight tensor `name` ([n_cols x n_mat],
  // matrix-major), or nullptr if the file has none.
  const std::vector<float>* Find(const std::string& name) const;
  size_t size() const { return entries_.size(); }
  const std::map<std::string, std::vector<float>>& entries() const {
    return entries_;
  }
  // Names of the calibration texts (may be empty for legacy files).
  const std::vector<std::string>& datasets() const { return datasets_; }
  // Chunks of text the matrix was computed on (0 if the file does not say).
  int64_t chunk_count() const { return chunk_count_; }
  bool legacy() const { return legacy_; }

 private:
  static Result<Imatrix> ParseGguf(std::span<const uint8_t> bytes);
  static Result<Imatrix> ParseLegacy(std::span<const uint8_t> bytes);
  Status CheckFinite() const;

  std::map<std::string, std::vector<float>> entries_;
  std::vector<std::string> datasets_;
  int64_t chunk_count_ = 0;
  bool legacy_ = false;
};

}  // namespace redline::quant

#endif  // REDLINE_QUANT_IMATRIX_H_

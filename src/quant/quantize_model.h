// `redline quantize`: rewrite a GGUF model with its weights quantised to a
// llama.cpp file type, byte-compatible with what llama.cpp's llama-quantize
// writes for the same input (with or without an importance matrix): same
// tensor order (layer-major, then by name), same per-tensor types
// (quant/mixture.h), same bytes (quant/row_quantize.h), the input's metadata
// with general.quantization_version and general.file_type (and the imatrix
// keys) appended, 32-byte alignment and zero padding.
//
// The output is written to OUT.tmp and renamed over OUT only when complete,
// so an error (bad input, full disk) never leaves a partial file.
//
// Thread-safety: QuantizeModel may run concurrently on different files.
// Cost: one pass over the input (memory-mapped); memory is one tensor's
// floats plus its quantised bytes; time is dominated by the K-quant scale
// search, spread over `threads` threads by rows.
#ifndef REDLINE_QUANT_QUANTIZE_MODEL_H_
#define REDLINE_QUANT_QUANTIZE_MODEL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/gguf/gguf.h"
#include "quant/mixture.h"

namespace redline::quant {

struct TensorReport {
  std::string name;
  std::vector<int64_t> dims;
  TensorType from = TensorType::kF32;
  TensorType to = TensorType::kF32;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  bool fell_back = false;
  // Quantised with importance weights from the imatrix.
  bool weighted = false;
};

struct QuantizeProgress {
  int tensor_index = 0;  // 0-based index of the tensor just finished
  int tensor_count = 0;
  const TensorReport* tensor = nullptr;
};

struct QuantizeOptions {
  FileType ftype = FileType::kQ8_0;
  // <= 0: one per physical core.
  int threads = 0;
  // Re-quantise tensors that are already quantised (dequantised first; the
  // result is worse than quantising the float original).
  bool allow_requantize = false;
  // llama.cpp importance matrix (quant/imatrix.h); empty for none. Matrices
  // it covers are quantised with ggml's weighted quantisers, the mixture
  // follows llama-quantize's rules for an imatrix, and the output records
  // quantize.imatrix.{file,dataset,entries_count,chunks_count} as
  // llama-quantize does.
  std::string imatrix_path;
  // Called after each tensor, on the calling thread.
  std::function<void(const QuantizeProgress&)> on_progress;
};

struct QuantizeReport {
  std::vector<TensorReport> tensors;
  uint64_t input_file_bytes = 0;
  uint64_t output_file_bytes = 0;
  uint64_t tensor_bytes_in = 0;
  uint64_t tensor_bytes_out = 0;
  int fallbacks = 0;
  int requantized = 0;
  // With an imatrix: tensors quantised with its weights, and quantised
  // tensors it has no entry for (quantised without weights).
  int weighted = 0;
  std::vector<std::string> without_imatrix;
  double seconds = 0;
};

// Quantises `input` to `output`. Errors: InvalidArgument when output names
// the input file, for a tensor no type can hold, for quantised input
// without allow_requantize, and for an imatrix entry whose size is not the
// tensor's columns x matrices (except token_embd, whose entry is then
// ignored, as llama-quantize does); the imatrix's own errors (Load); DataLoss/InvalidArgument from the GGUF reader for
// truncated or corrupt input; Unimplemented for input types it cannot
// dequantise; IoError when the output cannot be written (nothing is left
// behind).
Result<QuantizeReport> QuantizeModel(const std::string& input,
                                     const std::string& output,
                                     const QuantizeOptions& options);

// The order llama.cpp writes tensors in: tensors outside "blk.N." first,
// then by layer number, each group by name.
bool LlamaTensorOrderLess(const std::string& a, const std::string& b);

}  // namespace redline::quant

#endif  // REDLINE_QUANT_QUANTIZE_MODEL_H_

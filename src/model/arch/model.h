// Model: a GGUF file opened for inference — its config, weight views and
// (when the file has a vocabulary) its tokenizer.
//
// Ownership: owns the GgufFile (memory map) that the weights point into.
// Thread-safety: immutable after Load; share freely across threads.
// Cost: Load maps the file and reads only metadata and 1-D tensors; weight
// pages fault in on first use unless `prefetch` or `mlock` is set. With
// `repack` (the default) it also copies the matrices once.
#ifndef REDLINE_MODEL_ARCH_MODEL_H_
#define REDLINE_MODEL_ARCH_MODEL_H_

#include <functional>
#include <memory>
#include <string>

#include "base/result.h"
#include "model/arch/model_config.h"
#include "model/arch/weights.h"
#include "model/gguf/gguf.h"

namespace redline::model {

class Tokenizer;

// Where a load's time went (for `redline profile`), milliseconds.
struct LoadTimings {
  double open_validate_ms = 0;  // map the file, parse and check the header
  double weights_ms = 0;        // config and weight views
  double tokenizer_ms = 0;      // vocabulary and chat template
  double repack_ms = 0;         // copies into huge pages / packed panels
  double page_in_ms = 0;        // touching the pages still mapped
};

struct LoadOptions {
  // Pin weights in RAM (fails with a clear error if not permitted).
  bool mlock = false;
  bool prefetch = true;  // ask the kernel to read the file ahead
  bool load_tokenizer = true;
  // Copy the matrices into huge pages, those of the types packed.h lists into
  // the packed layout where the active kernels read it (model/arch/repack.h),
  // then release their file pages (kept, and so resident twice, with mlock).
  bool repack = true;
  int threads = 0;  // for repacking; <= 0: ThreadPool's default
  // Called with progress in [0, 1] while loading (from the loading thread).
  std::function<void(double)> progress;
  // Filled when set (borrowed).
  LoadTimings* timings = nullptr;
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> Load(const std::string& path,
                                             const LoadOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return *file_; }
  // Null when the file has no usable vocabulary; tokenizer_status() says why.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const Status& tokenizer_status() const { return tokenizer_status_; }
  // tokenizer.chat_template, empty if absent.
  const std::string& chat_template() const { return chat_template_; }
  // Human-readable weight type mix, e.g. "q8_0" or "q4_0+f32".
  std::string WeightTypeSummary() const;

 private:
  Model() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Status tokenizer_status_;
  std::string chat_template_;
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_ARCH_MODEL_H_

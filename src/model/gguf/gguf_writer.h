// GgufWriter: writes GGUF v3 files that other GGUF engines load unchanged.
//
// Usage: set metadata, declare tensors (with a callback that fills each
// tensor's bytes), then Write(path). Tensors are produced one at a time while
// writing, so a multi-gigabyte model never sits in memory whole.
// Thread-safety: thread-compatible.
#ifndef REDLINE_MODEL_GGUF_GGUF_WRITER_H_
#define REDLINE_MODEL_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/gguf/gguf.h"

namespace redline::model::gguf {

class GgufWriter {
 public:
  // Sets (or replaces) a metadata key; keys are written in first-set order.
  void Set(const std::string& key, Value value);

  // Declares a tensor. `dims` in ggml order (dims[0] innermost). `fill` is
  // called once during Write with a zeroed buffer of exactly the tensor's
  // byte size to fill.
  void AddTensor(const std::string& name, TensorType type, std::vector<int64_t> dims,
                 std::function<void(std::span<uint8_t>)> fill);

  // Alignment of tensor data (general.alignment is written if not 32).
  void SetAlignment(uint64_t alignment);

  // Writes the file (to path + ".tmp", then renames). IoError on failure.
  Status Write(const std::string& path) const;
  // Writes into memory (tests, fuzz seeds).
  std::vector<uint8_t> WriteToBytes() const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;
    std::function<void(std::span<uint8_t>)> fill;
  };
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace redline::model::gguf

#endif  // REDLINE_MODEL_GGUF_GGUF_WRITER_H_

// GgufWriter: writes GGUF v3 files that other GGUF engines load unchanged.
//
// Usage: set metadata, declare tensors (with a callback that fills each
// tensor's bytes), then Write(path). Tensors are produced one at a time while
// writing, so a multi-gigabyte model never sits in memory whole.
//
// Layout written (the one ggml and gguf-py write, which ggml's reader
// requires): header, metadata in first-set order, tensor infos in declaration
// order, zero padding to the alignment, then each tensor's bytes followed by
// zero padding to the alignment. Tensor offsets are therefore consecutive:
// offset[i + 1] = offset[i] + size[i] rounded up to the alignment.
//
// Ownership: the writer owns copies of the metadata and the fill callbacks
// (and whatever they capture). Thread-safety: thread-compatible; Write and
// WriteToBytes are const and call the fill callbacks on the calling thread.
// Cost: Write holds the encoded metadata plus one tensor's bytes in memory.
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

class ByteSink;  // gguf_writer.cc: a file or a vector.

class GgufWriter {
 public:
  // Sets (or replaces) a metadata key; keys are written in first-set order.
  // Setting "general.alignment" to an integer also sets the alignment.
  void Set(const std::string& key, Value value);

  // Declares a tensor. `dims` in ggml order (dims[0] innermost). `fill` is
  // called once during Write with a zeroed buffer of exactly the tensor's
  // byte size to fill (a null `fill` leaves the tensor zero).
  void AddTensor(const std::string& name, TensorType type,
                 std::vector<int64_t> dims,
                 std::function<void(std::span<uint8_t>)> fill);

  // Alignment of tensor data (general.alignment is written if not 32, as a
  // uint32 after the keys set so far unless it was set before). Must be a
  // power of two up to kMaxAlignment; checked by Validate.
  void SetAlignment(uint64_t alignment);

  // Checks everything Write would refuse, without writing: InvalidArgument
  // naming the key or tensor for a bad alignment, a value whose variant or
  // range does not match its type, array elements of the wrong type, arrays
  // nested deeper than kMaxArrayDepth, metadata over the reader's default
  // MetadataLimits (so every file written opens with the default
  // OpenOptions), an empty or too long key, an empty,
  // duplicate or too long (>= 64 bytes, ggml's limit) tensor name, a shape
  // with 0 or more than 4 dims, a dim < 1, dims[0] not a multiple of the
  // type's block size, a type not in TensorType, or a size that overflows.
  Status Validate() const;

  // Writes the file (to path + ".tmp", then renames over `path`).
  // InvalidArgument as Validate (nothing is created); IoError on failure, in
  // which case the .tmp file is removed and `path` is untouched. The file is
  // not fsynced.
  Status Write(const std::string& path) const;
  // Writes into memory (tests, fuzz seeds). RL_CHECKs that Validate() is OK.
  std::vector<uint8_t> WriteToBytes() const;

  // The byte size of one tensor of `type` and `dims` (0 if invalid).
  static uint64_t TensorBytes(TensorType type,
                              const std::vector<int64_t>& dims);

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;
    std::function<void(std::span<uint8_t>)> fill;
  };
  // Emits the whole file; false if the sink failed.
  bool Serialize(ByteSink& sink) const;

  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = kDefaultAlignment;
};

}  // namespace redline::model::gguf

#endif  // REDLINE_MODEL_GGUF_GGUF_WRITER_H_

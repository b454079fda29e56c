// GGUF v2/v3 files: metadata values, tensor infos and a validating reader.
//
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
// Layout: header (magic "GGUF", version, tensor_count, kv_count), kv_count
// metadata pairs, tensor_count tensor infos, padding to general.alignment
// (default 32), tensor data. Tensor offsets are relative to the data start.
#ifndef REDLINE_MODEL_GGUF_GGUF_H_
#define REDLINE_MODEL_GGUF_GGUF_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"

namespace redline::model::gguf {

// Metadata value types (numbering as in the spec).
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};
std::string_view ValueTypeName(ValueType type);

// ggml tensor types (numbering as in ggml.h). Only F32, F16, BF16, Q8_0 and
// Q4_0 can be loaded; the others are named in errors.
enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ8_1 = 9, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14,
  kQ8_K = 15, kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19,
  kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22, kIQ4_XS = 23, kI8 = 24, kI16 = 25,
  kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30, kTQ1_0 = 34,
  kTQ2_0 = 35, kMXFP4 = 39,
};
// "F32", "Q4_K", ... ; "type 77" for unknown numbers.
std::string TensorTypeName(TensorType type);
// True for the types Redline can compute with.
bool IsSupportedTensorType(TensorType type);
// Elements per block and bytes per block of a supported type.
int64_t TensorTypeBlockElements(TensorType type);
int64_t TensorTypeBlockBytes(TensorType type);

// One metadata value. Arrays hold elements of one type; nested arrays are
// allowed. Numeric arrays are stored typed to keep big vocabularies compact.
struct Value;
using Array = std::vector<Value>;
struct Value {
  ValueType type = ValueType::kUint8;
  // Scalars: integers in i (signed) or u (unsigned), floats in f, bools in b.
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> data;
  // For kArray: the element type.
  ValueType array_type = ValueType::kUint8;

  // Convenience constructors for writers and tests.
  static Value U32(uint32_t v);
  static Value I32(int32_t v);
  static Value U64(uint64_t v);
  static Value F32(float v);
  static Value Bool(bool v);
  static Value Str(std::string v);
  static Value ArrayOf(ValueType element_type, Array elements);
  static Value StrArray(const std::vector<std::string>& v);
  static Value F32Array(const std::vector<float>& v);
  static Value I32Array(const std::vector<int32_t>& v);

  bool is_integer() const;  // any of the 8 integer types
  bool is_float() const;    // kFloat32 / kFloat64
  // Valid only for the matching kinds.
  int64_t AsInt() const;
  double AsDouble() const;  // integers convert too
  bool AsBool() const;
  const std::string& AsString() const;
  const Array& AsArray() const;
};

struct TensorInfo {
  std::string name;
  // ne: dims[0] is the innermost (contiguous) dimension, as in ggml. A 2-D
  // weight [rows, cols] has dims {cols, rows}.
  std::vector<int64_t> dims;
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;      // relative to the start of tensor data
  uint64_t size_bytes = 0;  // computed from dims and type
  const uint8_t* data = nullptr;  // into the mapping; null for vocab-only reads
  int64_t NumElements() const;
};

// A parsed, validated GGUF file. Owns the memory map; tensor data pointers
// stay valid for its lifetime. Thread-safety: immutable after Open, safe to
// share across threads.
class GgufFile {
 public:
  // Maps and validates `path`. Every count, length, offset and shape is
  // checked against the file size before use; errors name the problem
  // ("tensor blk.0.ffn_down.weight has type Q4_K, not supported yet",
  // "file truncated: tensor info 3 ends at byte N of M"). Unsupported tensor
  // types are reported here only if `require_supported_types`.
  static Result<GgufFile> Open(const std::string& path, bool require_supported_types = true);
  // Same over bytes in memory (the fuzzer and tests). Bytes must outlive the file.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes, bool require_supported_types = true);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }

  // Metadata in file order and by key.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* Find(std::string_view key) const;

  // Typed getters: NotFound if absent, InvalidArgument if the type does not
  // fit (any integer type is accepted for GetInt, ints or floats for GetFloat).
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  // The file's mapping (null for Parse). Lock() pins it in RAM (--mlock).
  MappedFile* mapping() { return mapping_.get(); }

 private:
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::string path_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::unique_ptr<MappedFile> mapping_;
};

}  // namespace redline::model::gguf

#endif  // REDLINE_MODEL_GGUF_GGUF_H_

// GGUF v2/v3 files: metadata values, tensor infos and a validating reader.
//
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
// Layout: header (magic "GGUF", version, tensor_count, kv_count), kv_count
// metadata pairs, tensor_count tensor infos, padding to general.alignment
// (default 32), tensor data. Tensor offsets are relative to the data start.
// Everything is little-endian; v2 and v3 share one layout (v1, with 32-bit
// counts, is rejected). Big-endian files are recognised and rejected.
//
// The reader treats every file as hostile: each count and length is checked
// against the bytes that remain before anything is allocated, so a truncated,
// corrupt or malicious file yields a Status, never a crash, a hang, an
// out-of-bounds read or an allocation out of proportion to the file.
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

// Limits the reader enforces (and the writer respects).
//
// ggml's GGML_MAX_DIMS: tensors have at most 4 dimensions.
inline constexpr int kMaxDims = 4;
// Nesting depth of arrays inside arrays. Real files nest at most once; the
// limit bounds the parser's recursion on hostile input.
inline constexpr int kMaxArrayDepth = 8;
// general.alignment above this is treated as corrupt: page (4 KiB) and huge
// page (2 MiB) alignments are plausible, anything larger is not.
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 21;
// Default general.alignment (GGUF_DEFAULT_ALIGNMENT).
inline constexpr uint64_t kDefaultAlignment = 32;
// ggml's GGML_MAX_NAME is 64 including the terminating NUL, so engines built
// on ggml refuse tensor names of 64 bytes or more. The writer enforces it; the
// reader accepts longer names.
inline constexpr size_t kMaxTensorNameBytes = 63;
// The spec limits metadata keys to 2^16 - 1 bytes.
inline constexpr size_t kMaxKeyBytes = 65535;

// Default metadata limits (MetadataLimits below; OpenOptions can change them).
// Checking counts against the file size alone does not bound the reader's
// memory: every parsed array element is a Value (48 bytes on x86-64, ~56 with
// the allocator's share), 48x a uint8 element's encoding, and the
// tokenizer later copies each token string several times. So a 16 MB file
// holding one array of 16M uint8 elements cost ~940 MB and 2.7 s, and one
// 100 MB token string ~520 MB. These caps sit far above real files and far
// below those costs.
//
// Bytes of one metadata string, at the top level or inside an array. Real
// token pieces are under 1 KiB, and the longest real chat templates
// (tokenizer.chat_template, tokenizer.chat_template.<name>) are tens of KiB.
inline constexpr uint64_t kMaxMetadataStringBytes = uint64_t{1} << 20;
// Bytes of the string of a key that embeds a whole tokenizer definition
// (kDocumentStringKeys): the spec's tokenizer.huggingface.json holds an
// entire tokenizer.json, which is several MiB for 128k-token vocabularies.
inline constexpr uint64_t kMaxMetadataDocumentBytes = uint64_t{1} << 26;
inline constexpr std::string_view kDocumentStringKeys[] = {
    "tokenizer.huggingface.json",
    "tokenizer.rwkv.world",
};
// Elements of one array (an inner array counts its own). The largest real
// arrays are tokenizer.ggml.tokens/scores/token_type with up to 262,144
// entries (Gemma) and tokenizer.ggml.merges with ~280,000 (Llama 3).
inline constexpr uint64_t kMaxMetadataArrayLength = uint64_t{1} << 20;
// Elements over all arrays of a file: four arrays at the per-array cap, ~5x
// the largest real vocabulary (Gemma's 3 x 262,144), ~230 MB of Values.
inline constexpr uint64_t kMaxMetadataArrayElements = uint64_t{1} << 22;
// Encoded bytes of all key/value pairs together. The file size bounds them
// too, so the effective limit is min(file size, this). Real vocabularies
// take under 16 MiB of metadata.
inline constexpr uint64_t kMaxMetadataBytes = uint64_t{1} << 28;
// Key/value pairs in a file. Each costs ~160 bytes (a Value, its key, an
// index entry) against a 13-byte minimal encoding; real files have under 100.
inline constexpr uint64_t kMaxMetadataKeys = uint64_t{1} << 16;
// Tensor infos in a file. Each costs ~200 bytes against a 32-byte minimal
// encoding; the largest real models have a few thousand tensors.
inline constexpr uint64_t kMaxTensors = uint64_t{1} << 16;

// What one file's metadata may make the reader allocate. Every limit is
// checked in a first pass over the metadata that builds no Value and copies
// no string, so a file over any of them fails in time proportional to its
// header. Errors name the key, the size found and the limit.
struct MetadataLimits {
  // Bytes of one string value, at the top level or in an array.
  uint64_t max_string_bytes = kMaxMetadataStringBytes;
  // Bytes of the top-level string of a key in kDocumentStringKeys.
  uint64_t max_document_bytes = kMaxMetadataDocumentBytes;
  // Elements of one array.
  uint64_t max_array_length = kMaxMetadataArrayLength;
  // Elements over all arrays of the file.
  uint64_t max_array_elements = kMaxMetadataArrayElements;
  // Encoded bytes of all key/value pairs.
  uint64_t max_metadata_bytes = kMaxMetadataBytes;
  // Key/value pairs.
  uint64_t max_keys = kMaxMetadataKeys;
  // Tensor infos.
  uint64_t max_tensors = kMaxTensors;

  // The string limit for the top-level value of `key`.
  uint64_t StringLimitFor(std::string_view key) const;
};

// clang-format off
// Metadata value types (numbering as in the spec).
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};
// clang-format on
// "uint8", "float32", "string", "array", ...; "unknown" for other numbers.
std::string_view ValueTypeName(ValueType type);

// clang-format off
// ggml tensor types (numbering as in ggml.h). F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL and Q2_K ... Q6_K can be loaded; the others are
// named in errors.
enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ8_1 = 9, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14,
  kQ8_K = 15, kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19,
  kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22, kIQ4_XS = 23, kI8 = 24, kI16 = 25,
  kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30, kTQ1_0 = 34,
  kTQ2_0 = 35, kMXFP4 = 39,
};
// clang-format on
// "F32", "Q4_K", ... ; "type 77" for unknown numbers.
std::string TensorTypeName(TensorType type);
// True for the types Redline can compute with.
bool IsSupportedTensorType(TensorType type);
// Elements per block and bytes per block of any type listed in TensorType
// (F32: 1 and 4; Q8_0: 32 and 34; Q4_K: 256 and 144). 0 for numbers that are
// not in the enum. A tensor's dims[0] must be a multiple of the block size.
int64_t TensorTypeBlockElements(TensorType type);
int64_t TensorTypeBlockBytes(TensorType type);

// One metadata value. Arrays hold elements of one type; nested arrays are
// allowed (each inner array has its own element type). Every array element is
// a full Value (~48 bytes); GetIntArray/GetFloatArray/GetStringArray copy out
// plain vectors.
//
// Copying a Value is shallow for arrays (the shared_ptr is shared), so
// copies are cheap and arrays are immutable once built.
struct Value;
using Array = std::vector<Value>;
struct Value {
  ValueType type = ValueType::kUint8;
  // Unsigned integers in uint64_t, signed integers in int64_t, floats (32 and
  // 64 bit) in double, bools in bool, strings in std::string, arrays in
  // shared_ptr<Array> (never null when built by the reader or ArrayOf).
  std::variant<uint64_t, int64_t, double, bool, std::string,
               std::shared_ptr<Array>>
      data;
  // For kArray: the element type.
  ValueType array_type = ValueType::kUint8;

  // Convenience constructors for writers and tests.
  static Value U8(uint8_t v);
  static Value I8(int8_t v);
  static Value U16(uint16_t v);
  static Value I16(int16_t v);
  static Value U32(uint32_t v);
  static Value I32(int32_t v);
  static Value U64(uint64_t v);
  static Value I64(int64_t v);
  static Value F32(float v);
  static Value F64(double v);
  static Value Bool(bool v);
  static Value Str(std::string v);
  // Every element must have type `element_type` (checked when written).
  static Value ArrayOf(ValueType element_type, Array elements);
  static Value StrArray(const std::vector<std::string>& v);
  static Value F32Array(const std::vector<float>& v);
  static Value I32Array(const std::vector<int32_t>& v);

  bool is_integer() const;  // any of the 8 integer types
  bool is_float() const;    // kFloat32 / kFloat64
  // Valid only for the matching kinds (RL_CHECK). AsInt of a uint64 value
  // above INT64_MAX wraps; GetInt reports that case as an error instead.
  int64_t AsInt() const;
  double AsDouble() const;  // integers convert too
  bool AsBool() const;
  const std::string& AsString() const;
  const Array& AsArray() const;
};

struct TensorInfo {
  std::string name;
  // ne: dims[0] is the innermost (contiguous) dimension, as in ggml. A 2-D
  // weight [rows, cols] has dims {cols, rows}. 1 to kMaxDims entries, each
  // >= 1.
  std::vector<int64_t> dims;
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;      // relative to the start of tensor data; aligned
  uint64_t size_bytes = 0;  // computed from dims and type
  const uint8_t* data = nullptr;  // [size_bytes] into the file's bytes
  int64_t NumElements() const;
};

// How Open and Parse read a file. The defaults suit every real model file;
// tools that inspect unusual files may raise the limits.
struct OpenOptions {
  // Report tensor types Redline cannot compute with as Unimplemented. Without
  // it every type in TensorType is accepted (sizes come from its block size).
  bool require_supported_types = true;
  MetadataLimits limits;
};

// A parsed, validated GGUF file.
//
// Ownership: Open owns the memory map; Parse borrows the caller's bytes,
// which must outlive the GgufFile. Tensor data pointers stay valid for that
// lifetime (moving a GgufFile keeps them valid). Metadata is copied out of the
// file, so it does not depend on the bytes.
// Thread-safety: immutable after Open/Parse; all const methods are safe to call
// from any number of threads.
// Cost: Open/Parse are O(file header): metadata is checked in one pass and
// decoded in a second (a 150k-token vocabulary takes tens of milliseconds),
// tensor data is never touched.
//
// Validation (all before returning): magic, version 2 or 3, every count and
// length within the file and within the MetadataLimits, value types, array
// nesting depth, duplicate keys,
// general.alignment (an integer power of two <= kMaxAlignment), tensor infos
// (1..4 dims, each >= 1, no element-count or byte-size overflow, known type,
// dims[0] a multiple of the type's block size, unique names), and tensor data
// (offset aligned, inside the file, no two tensors overlapping).
//
// Error codes: DataLoss for truncation and for counts, lengths or offsets
// past the end of the file; InvalidArgument for malformed content (bad magic,
// unknown value or tensor type, bad alignment, bad shape, misaligned or
// overlapping tensors, duplicates) and for metadata over a MetadataLimits
// limit (ResourceExhausted would suggest retrying with more memory; the file
// is what is wrong); Unimplemented for GGUF v1 and for tensor
// types Redline cannot compute with; NotFound/IoError from Open for the file.
class GgufFile {
 public:
  // Maps and validates `path`. Every count, length, offset and shape is
  // checked against the file size before use; errors say what is wrong and
  // where:
  //   "tensor blk.0.ffn_down.weight has type IQ2_XS, not supported yet"
  //   "metadata key 5 ('tokenizer.ggml.tokens'): array of 1152921504606846976
  //    elements exceeds the file (at byte ...)"
  //   "tensor info 2 ('output.weight'): file truncated: offset at byte N needs
  //    8 bytes, only 2 remain"
  //   "metadata key 1 ('tokenizer.ggml.tokens'): array of 16777216 elements
  //    at byte 40 exceeds the limit of 1048576 elements per metadata array
  //    (MetadataLimits::max_array_length)"
  // Open prefixes all but the unsupported-type message with the path.
  static Result<GgufFile> Open(const std::string& path,
                               const OpenOptions& options);
  // The default OpenOptions with `require_supported_types`.
  static Result<GgufFile> Open(const std::string& path,
                               bool require_supported_types = true);
  // Same over bytes in memory (the fuzzer and tests). Bytes must outlive the
  // file.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes,
                                const OpenOptions& options);
  // The default OpenOptions with `require_supported_types`.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes,
                                bool require_supported_types = true);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Empty for Parse.
  const std::string& path() const { return path_; }
  // Byte offset of the tensor data section in the file (aligned).
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order and by key.
  const std::vector<std::pair<std::string, Value>>& metadata() const {
    return metadata_;
  }
  const Value* Find(std::string_view key) const;

  // Typed getters: NotFound if absent, InvalidArgument if the type does not
  // fit (any integer type is accepted for GetInt, ints or floats for GetFloat;
  // array getters take arrays whose elements fit the same way; a uint64 above
  // INT64_MAX does not fit GetInt). Errors name the key.
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Tensors in file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  // The file's mapping (null for Parse). Lock() pins it in RAM (--mlock).
  MappedFile* mapping() { return mapping_.get(); }

 private:
  friend class GgufParser;  // gguf.cc fills the fields while validating.

  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::string path_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::unique_ptr<MappedFile> mapping_;
};

}  // namespace redline::model::gguf

#endif  // REDLINE_MODEL_GGUF_GGUF_H_

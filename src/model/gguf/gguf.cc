#include "model/gguf/gguf.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "base/check.h"

namespace redline::model::gguf {

// GGUF is little-endian and the reader decodes with memcpy; a big-endian host
// would need byte swaps everywhere (and so would the tensor data).
static_assert(std::endian::native == std::endian::little,
              "GGUF I/O assumes a little-endian host");

namespace {

struct TensorTypeTraits {
  TensorType type;
  const char* name;
  int64_t block_elements;
  int64_t block_bytes;
  bool supported;
};

// Block geometry of every ggml type (ggml's type_traits: blck_size and
// type_size). K-quants and most IQ types use 256-element super-blocks.
constexpr TensorTypeTraits kTensorTypes[] = {
    {TensorType::kF32, "F32", 1, 4, true},
    {TensorType::kF16, "F16", 1, 2, true},
    {TensorType::kQ4_0, "Q4_0", 32, 18, true},
    {TensorType::kQ4_1, "Q4_1", 32, 20, true},
    {TensorType::kQ5_0, "Q5_0", 32, 22, true},
    {TensorType::kQ5_1, "Q5_1", 32, 24, true},
    {TensorType::kQ8_0, "Q8_0", 32, 34, true},
    {TensorType::kQ8_1, "Q8_1", 32, 36, false},
    {TensorType::kQ2_K, "Q2_K", 256, 84, true},
    {TensorType::kQ3_K, "Q3_K", 256, 110, true},
    {TensorType::kQ4_K, "Q4_K", 256, 144, true},
    {TensorType::kQ5_K, "Q5_K", 256, 176, true},
    {TensorType::kQ6_K, "Q6_K", 256, 210, true},
    {TensorType::kQ8_K, "Q8_K", 256, 292, false},
    {TensorType::kIQ2_XXS, "IQ2_XXS", 256, 66, false},
    {TensorType::kIQ2_XS, "IQ2_XS", 256, 74, false},
    {TensorType::kIQ3_XXS, "IQ3_XXS", 256, 98, false},
    {TensorType::kIQ1_S, "IQ1_S", 256, 50, false},
    {TensorType::kIQ4_NL, "IQ4_NL", 32, 18, true},
    {TensorType::kIQ3_S, "IQ3_S", 256, 110, false},
    {TensorType::kIQ2_S, "IQ2_S", 256, 82, false},
    {TensorType::kIQ4_XS, "IQ4_XS", 256, 136, false},
    {TensorType::kI8, "I8", 1, 1, false},
    {TensorType::kI16, "I16", 1, 2, false},
    {TensorType::kI32, "I32", 1, 4, false},
    {TensorType::kI64, "I64", 1, 8, false},
    {TensorType::kF64, "F64", 1, 8, false},
    {TensorType::kIQ1_M, "IQ1_M", 256, 56, false},
    {TensorType::kBF16, "BF16", 1, 2, true},
    {TensorType::kTQ1_0, "TQ1_0", 256, 54, false},
    {TensorType::kTQ2_0, "TQ2_0", 256, 66, false},
    {TensorType::kMXFP4, "MXFP4", 32, 17, false},
};

const TensorTypeTraits* FindTraits(TensorType type) {
  for (const TensorTypeTraits& t : kTensorTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

bool IsValidValueType(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::kFloat64);
}

bool IsSignedType(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 ||
         t == ValueType::kInt32 || t == ValueType::kInt64;
}

bool IsIntegerType(ValueType t) {
  return IsSignedType(t) || t == ValueType::kUint8 || t == ValueType::kUint16 ||
         t == ValueType::kUint32 || t == ValueType::kUint64;
}

bool IsFloatType(ValueType t) {
  return t == ValueType::kFloat32 || t == ValueType::kFloat64;
}

// Encoded size of a fixed-size scalar, 0 for string and array.
uint64_t ScalarBytes(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

// The fewest bytes one encoded value of type `t` can take: a string is at
// least its 8-byte length, an array its 4-byte type and 8-byte count.
uint64_t MinEncodedBytes(ValueType t) {
  if (t == ValueType::kString) return 8;
  if (t == ValueType::kArray) return 12;
  return ScalarBytes(t);
}

bool IsDocumentStringKey(std::string_view key) {
  return std::find(std::begin(kDocumentStringKeys),
                   std::end(kDocumentStringKeys),
                   key) != std::end(kDocumentStringKeys);
}

// Keys and names come from the file: show them printable and bounded.
std::string Printable(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > kMaxShown) out += "...";
  return out;
}

Status TypeMismatch(std::string_view key, const Value& v,
                    std::string_view expected) {
  std::string got(ValueTypeName(v.type));
  if (v.type == ValueType::kArray)
    got = fmt::format("array of {}", ValueTypeName(v.array_type));
  return Status::InvalidArgument(fmt::format(
      "metadata key '{}' is {}, expected {}", Printable(key), got, expected));
}

}  // namespace

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

std::string TensorTypeName(TensorType type) {
  const TensorTypeTraits* t = FindTraits(type);
  return t ? std::string(t->name)
           : fmt::format("type {}", static_cast<uint32_t>(type));
}

bool IsSupportedTensorType(TensorType type) {
  const TensorTypeTraits* t = FindTraits(type);
  return t != nullptr && t->supported;
}

int64_t TensorTypeBlockElements(TensorType type) {
  const TensorTypeTraits* t = FindTraits(type);
  return t ? t->block_elements : 0;
}

int64_t TensorTypeBlockBytes(TensorType type) {
  const TensorTypeTraits* t = FindTraits(type);
  return t ? t->block_bytes : 0;
}

// ---------------------------------------------------------------- Value

Value Value::U8(uint8_t v) { return Value{ValueType::kUint8, uint64_t{v}}; }
Value Value::I8(int8_t v) { return Value{ValueType::kInt8, int64_t{v}}; }
Value Value::U16(uint16_t v) { return Value{ValueType::kUint16, uint64_t{v}}; }
Value Value::I16(int16_t v) { return Value{ValueType::kInt16, int64_t{v}}; }
Value Value::U32(uint32_t v) { return Value{ValueType::kUint32, uint64_t{v}}; }
Value Value::I32(int32_t v) { return Value{ValueType::kInt32, int64_t{v}}; }
Value Value::U64(uint64_t v) { return Value{ValueType::kUint64, v}; }
Value Value::I64(int64_t v) { return Value{ValueType::kInt64, v}; }
Value Value::F32(float v) { return Value{ValueType::kFloat32, double{v}}; }
Value Value::F64(double v) { return Value{ValueType::kFloat64, v}; }
Value Value::Bool(bool v) {
  Value out;
  out.type = ValueType::kBool;
  out.data.emplace<bool>(v);
  return out;
}
Value Value::Str(std::string v) {
  return Value{ValueType::kString, std::move(v)};
}

Value Value::ArrayOf(ValueType element_type, Array elements) {
  return Value{ValueType::kArray, std::make_shared<Array>(std::move(elements)),
               element_type};
}

Value Value::StrArray(const std::vector<std::string>& v) {
  Array a;
  a.reserve(v.size());
  for (const std::string& s : v) a.push_back(Str(s));
  return ArrayOf(ValueType::kString, std::move(a));
}

Value Value::F32Array(const std::vector<float>& v) {
  Array a;
  a.reserve(v.size());
  for (float f : v) a.push_back(F32(f));
  return ArrayOf(ValueType::kFloat32, std::move(a));
}

Value Value::I32Array(const std::vector<int32_t>& v) {
  Array a;
  a.reserve(v.size());
  for (int32_t i : v) a.push_back(I32(i));
  return ArrayOf(ValueType::kInt32, std::move(a));
}

bool Value::is_integer() const { return IsIntegerType(type); }
bool Value::is_float() const { return IsFloatType(type); }

int64_t Value::AsInt() const {
  RL_CHECK(is_integer()) << "AsInt on a " << ValueTypeName(type) << " value";
  if (const auto* u = std::get_if<uint64_t>(&data))
    return static_cast<int64_t>(*u);
  return std::get<int64_t>(data);
}

double Value::AsDouble() const {
  RL_CHECK(is_integer() || is_float())
      << "AsDouble on a " << ValueTypeName(type) << " value";
  if (const auto* u = std::get_if<uint64_t>(&data))
    return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data))
    return static_cast<double>(*i);
  return std::get<double>(data);
}

bool Value::AsBool() const {
  RL_CHECK(type == ValueType::kBool)
      << "AsBool on a " << ValueTypeName(type) << " value";
  return std::get<bool>(data);
}

const std::string& Value::AsString() const {
  RL_CHECK(type == ValueType::kString)
      << "AsString on a " << ValueTypeName(type) << " value";
  return std::get<std::string>(data);
}

const Array& Value::AsArray() const {
  RL_CHECK(type == ValueType::kArray)
      << "AsArray on a " << ValueTypeName(type) << " value";
  static const Array kEmpty;
  const auto& p = std::get<std::shared_ptr<Array>>(data);
  return p ? *p : kEmpty;
}

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---------------------------------------------------------------- Parser

// Decodes and validates one file into a GgufFile. Every read goes through
// Need(), which checks the remaining bytes first; every count is compared with
// the remaining bytes (times the smallest encoding of one element) before
// anything is reserved. The metadata is walked twice: a first pass checks
// everything, the MetadataLimits included, and builds no Value; only a file
// that passes it is decoded into Values by the second.
class GgufParser {
 public:
  GgufParser(std::span<const uint8_t> bytes, const OpenOptions& options,
             GgufFile* file)
      : bytes_(bytes),
        require_supported_(options.require_supported_types),
        limits_(options.limits),
        file_(file) {}

  Status Run() {
    RL_RETURN_IF_ERROR(ParseHeader());
    RL_RETURN_IF_ERROR(ParseMetadata());
    RL_RETURN_IF_ERROR(ReadAlignment());
    RL_RETURN_IF_ERROR(ParseTensorInfos());
    return ValidateTensorData();
  }

 private:
  // The limit on a string value and the MetadataLimits field it comes from.
  struct StringLimit {
    uint64_t bytes;
    std::string_view name;
  };

  // Header: magic, version, tensor count, metadata count.
  static constexpr uint64_t kHeaderBytes = 24;
  // Smallest metadata pair: empty key (8), type (4), one-byte value.
  static constexpr uint64_t kMinKeyValueBytes = 13;
  // Smallest tensor info: empty name (8), n_dims (4), one dim (8), type (4),
  // offset (8).
  static constexpr uint64_t kMinTensorInfoBytes = 32;

  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Need(uint64_t n, std::string_view what) const {
    if (n <= remaining()) return Status::Ok();
    return Status::DataLoss(fmt::format(
        "file truncated: {} at byte {} needs {} bytes, only {} remain", what,
        pos_, n, remaining()));
  }

  template <typename T>
  T Take() {  // caller checked Need(sizeof(T))
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  template <typename T>
  Status Read(std::string_view what, T* out) {
    RL_RETURN_IF_ERROR(Need(sizeof(T), what));
    *out = Take<T>();
    return Status::Ok();
  }

  // A GGUF string: uint64 length, then that many bytes (no terminator).
  // `limit_name` names the MetadataLimits field behind `max_len` in the
  // error, empty for fixed limits. `out` views the file's bytes.
  Status ReadString(std::string_view what, uint64_t max_len,
                    std::string_view limit_name, std::string_view* out) {
    uint64_t len = 0;
    if (remaining() < sizeof(len)) {
      return Status::DataLoss(fmt::format(
          "file truncated: {} length at byte {} needs 8 bytes, only {} remain",
          what, pos_, remaining()));
    }
    len = Take<uint64_t>();
    if (len > remaining()) {
      return Status::DataLoss(fmt::format(
          "{} of {} bytes at byte {} exceeds the file ({} bytes remain)", what,
          len, pos_ - 8, remaining()));
    }
    if (len > max_len) {
      return Status::InvalidArgument(fmt::format(
          "{} of {} bytes at byte {} is longer than the limit of {}{}", what,
          len, pos_ - 8, max_len,
          limit_name.empty()
              ? std::string()
              : fmt::format(" bytes (MetadataLimits::{})", limit_name)));
    }
    *out = {reinterpret_cast<const char*>(bytes_.data() + pos_), len};
    pos_ += len;
    return Status::Ok();
  }

  // A string read for a name: a key or a tensor name.
  Status ReadString(std::string_view what, uint64_t max_len, std::string* out) {
    std::string_view view;
    RL_RETURN_IF_ERROR(ReadString(what, max_len, {}, &view));
    out->assign(view);
    return Status::Ok();
  }

  Status ParseHeader() {
    if (size() < 4) {
      return Status::DataLoss(fmt::format(
          "file truncated: {} bytes is too small for a GGUF header ({} bytes)",
          size(), kHeaderBytes));
    }
    if (std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
      return Status::InvalidArgument(fmt::format(
          "not a GGUF file: magic is '{}', expected 'GGUF'",
          Printable({reinterpret_cast<const char*>(bytes_.data()), 4})));
    }
    pos_ = 4;
    uint32_t version = 0;
    RL_RETURN_IF_ERROR(Read("header version", &version));
    if (version == 1) {
      return Status::Unimplemented(
          "GGUF version 1 is not supported (only versions 2 and 3); convert "
          "the model again with a current "
          "converter");
    }
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3) {
        return Status::Unimplemented(
            fmt::format("big-endian GGUF file (version {}); only little-endian "
                        "files are supported",
                        swapped));
      }
      return Status::Unimplemented(
          fmt::format("unsupported GGUF version {} (only 2 and 3)", version));
    }
    file_->version_ = version;
    uint64_t tensor_count = 0;
    uint64_t kv_count = 0;
    RL_RETURN_IF_ERROR(Read("header tensor count", &tensor_count));
    RL_RETURN_IF_ERROR(Read("header metadata count", &kv_count));
    // Both counts must fit the rest of the file at their smallest encoding;
    // this rejects 2^40 tensors before anything is reserved.
    if (kv_count > remaining() / kMinKeyValueBytes) {
      return Status::DataLoss(
          fmt::format("header: metadata count {} exceeds the file (each "
                      "key/value needs at least {} bytes, {} bytes remain "
                      "after the header)",
                      kv_count, kMinKeyValueBytes, remaining()));
    }
    const uint64_t left = remaining() - kv_count * kMinKeyValueBytes;
    if (tensor_count > left / kMinTensorInfoBytes) {
      return Status::DataLoss(
          fmt::format("header: tensor count {} exceeds the file (each tensor "
                      "info needs at least {} bytes, {} bytes remain "
                      "after the header and metadata)",
                      tensor_count, kMinTensorInfoBytes, left));
    }
    if (kv_count > limits_.max_keys) {
      return Status::InvalidArgument(
          fmt::format("header: metadata count {} exceeds the limit of {} "
                      "keys (MetadataLimits::max_keys)",
                      kv_count, limits_.max_keys));
    }
    if (tensor_count > limits_.max_tensors) {
      return Status::InvalidArgument(
          fmt::format("header: tensor count {} exceeds the limit of {} "
                      "tensors (MetadataLimits::max_tensors)",
                      tensor_count, limits_.max_tensors));
    }
    tensor_count_ = tensor_count;
    kv_count_ = kv_count;
    return Status::Ok();
  }

  Status ParseMetadata() {
    const uint64_t start = pos_;
    RL_RETURN_IF_ERROR(WalkMetadata(/*decode=*/false));
    pos_ = start;
    return WalkMetadata(/*decode=*/true);
  }

  // One pass over the key/value pairs. Without `decode` it only checks and
  // skips them, building no Value and copying no string; with it, it also
  // stores them in file_.
  Status WalkMetadata(bool decode) {
    const uint64_t metadata_start = pos_;
    array_elements_left_ = limits_.max_array_elements;
    if (decode) file_->metadata_.reserve(kv_count_);
    for (uint64_t i = 0; i < kv_count_; ++i) {
      const uint64_t start = pos_;
      std::string_view key;
      Status s = ReadString("key", kMaxKeyBytes, {}, &key);
      if (!s.ok()) return s.WithContext(fmt::format("metadata key {}", i));
      const std::string where =
          fmt::format("metadata key {} ('{}')", i, Printable(key));
      if (decode) {
        auto [it, inserted] =
            file_->metadata_index_.emplace(std::string(key), i);
        if (!inserted) {
          return Status::InvalidArgument(fmt::format(
              "{} at byte {}: duplicate key (first seen as metadata key {})",
              where, start, it->second));
        }
      }
      uint32_t type = 0;
      s = Read("value type", &type);
      if (!s.ok()) return s.WithContext(where);
      if (!IsValidValueType(type)) {
        return Status::InvalidArgument(fmt::format(
            "{}: unknown value type {} at byte {}", where, type, pos_ - 4));
      }
      Value value;
      s = ReadValue(static_cast<ValueType>(type), 0, TopLevelStringLimit(key),
                    decode ? &value : nullptr);
      if (!s.ok()) return s.WithContext(where);
      // Checked after the value: the first pass builds nothing, and it
      // rejects the file before the second would.
      if (pos_ - metadata_start > limits_.max_metadata_bytes) {
        return Status::InvalidArgument(fmt::format(
            "{}: the metadata up to byte {} takes {} bytes, over the limit of "
            "{} bytes (MetadataLimits::max_metadata_bytes)",
            where, pos_, pos_ - metadata_start, limits_.max_metadata_bytes));
      }
      if (decode)
        file_->metadata_.emplace_back(std::string(key), std::move(value));
    }
    return Status::Ok();
  }

  // Reads one value of `type` (already validated) into `out`, or only checks
  // and skips it when `out` is null. `depth` counts the arrays around it;
  // `string_limit` bounds a string value.
  Status ReadValue(ValueType type, int depth, StringLimit string_limit,
                   Value* out) {
    if (out == nullptr) return SkipValue(type, depth, string_limit);
    out->type = type;
    switch (type) {
      case ValueType::kUint8:
        return ReadUnsigned<uint8_t>(out);
      case ValueType::kUint16:
        return ReadUnsigned<uint16_t>(out);
      case ValueType::kUint32:
        return ReadUnsigned<uint32_t>(out);
      case ValueType::kUint64:
        return ReadUnsigned<uint64_t>(out);
      case ValueType::kInt8:
        return ReadSigned<int8_t>(out);
      case ValueType::kInt16:
        return ReadSigned<int16_t>(out);
      case ValueType::kInt32:
        return ReadSigned<int32_t>(out);
      case ValueType::kInt64:
        return ReadSigned<int64_t>(out);
      case ValueType::kFloat32: {
        float f = 0;
        RL_RETURN_IF_ERROR(Read(ScalarWhat(type), &f));
        out->data = double{f};
        return Status::Ok();
      }
      case ValueType::kFloat64: {
        double f = 0;
        RL_RETURN_IF_ERROR(Read(ScalarWhat(type), &f));
        out->data = f;
        return Status::Ok();
      }
      case ValueType::kBool: {
        uint8_t b = 0;
        RL_RETURN_IF_ERROR(Read(ScalarWhat(type), &b));
        // The spec allows only 0 and 1; like ggml we read any non-zero as true.
        out->data.emplace<bool>(b != 0);
        return Status::Ok();
      }
      case ValueType::kString: {
        std::string_view s;
        RL_RETURN_IF_ERROR(ReadMetadataString(string_limit, &s));
        out->data = std::string(s);
        return Status::Ok();
      }
      case ValueType::kArray:
        return ReadArray(depth, out);
    }
    return Status::Internal("unreachable value type");
  }

  // The first pass's ReadValue: the same checks and messages, no Value.
  Status SkipValue(ValueType type, int depth, StringLimit string_limit) {
    if (type == ValueType::kString) {
      std::string_view s;
      return ReadMetadataString(string_limit, &s);
    }
    if (type == ValueType::kArray) return ReadArray(depth, nullptr);
    RL_RETURN_IF_ERROR(Need(ScalarBytes(type), ScalarWhat(type)));
    pos_ += ScalarBytes(type);
    return Status::Ok();
  }

  // What a truncation error calls a scalar of type `t`.
  static std::string_view ScalarWhat(ValueType t) {
    switch (t) {
      case ValueType::kFloat32:
        return "float32 value";
      case ValueType::kFloat64:
        return "float64 value";
      case ValueType::kBool:
        return "bool value";
      default:
        return ValueTypeName(t);
    }
  }

  Status ReadMetadataString(StringLimit limit, std::string_view* out) {
    return ReadString("string", limit.bytes, limit.name, out);
  }

  StringLimit TopLevelStringLimit(std::string_view key) const {
    if (IsDocumentStringKey(key))
      return {limits_.max_document_bytes, "max_document_bytes"};
    return ElementStringLimit();
  }
  StringLimit ElementStringLimit() const {
    return {limits_.max_string_bytes, "max_string_bytes"};
  }

  template <typename T>
  Status ReadUnsigned(Value* out) {
    T v = 0;
    RL_RETURN_IF_ERROR(Read(ValueTypeName(out->type), &v));
    out->data = uint64_t{v};
    return Status::Ok();
  }

  template <typename T>
  Status ReadSigned(Value* out) {
    T v = 0;
    RL_RETURN_IF_ERROR(Read(ValueTypeName(out->type), &v));
    out->data = int64_t{v};
    return Status::Ok();
  }

  // An array value; with a null `out`, checked and skipped (first pass).
  Status ReadArray(int depth, Value* out) {
    const uint64_t start = pos_;
    if (depth >= kMaxArrayDepth) {
      return Status::InvalidArgument(
          fmt::format("array at byte {} is nested more than {} levels deep",
                      start, kMaxArrayDepth));
    }
    uint32_t element_type = 0;
    RL_RETURN_IF_ERROR(Read("array element type", &element_type));
    if (!IsValidValueType(element_type)) {
      return Status::InvalidArgument(fmt::format(
          "unknown array element type {} at byte {}", element_type, start));
    }
    const auto et = static_cast<ValueType>(element_type);
    uint64_t count = 0;
    RL_RETURN_IF_ERROR(Read("array length", &count));
    const uint64_t min_bytes = MinEncodedBytes(et);
    if (count > remaining() / min_bytes) {
      return Status::DataLoss(
          fmt::format("array of {} elements exceeds the file (at byte {}: each "
                      "{} element needs at least {} bytes, {} bytes "
                      "remain)",
                      count, start, ValueTypeName(et), min_bytes, remaining()));
    }
    if (count > limits_.max_array_length) {
      return Status::InvalidArgument(fmt::format(
          "array of {} elements at byte {} exceeds the limit of {} elements "
          "per metadata array (MetadataLimits::max_array_length)",
          count, start, limits_.max_array_length));
    }
    if (count > array_elements_left_) {
      return Status::InvalidArgument(fmt::format(
          "array of {} elements at byte {} exceeds the limit of {} metadata "
          "array elements in total (MetadataLimits::max_array_elements)",
          count, start, limits_.max_array_elements));
    }
    array_elements_left_ -= count;
    if (out == nullptr) {
      // Fixed-size elements: the count check above covers their bytes.
      if (const uint64_t scalar = ScalarBytes(et); scalar > 0) {
        pos_ += count * scalar;
        return Status::Ok();
      }
      for (uint64_t i = 0; i < count; ++i) {
        Status s = SkipValue(et, depth + 1, ElementStringLimit());
        if (!s.ok()) return s.WithContext(fmt::format("array element {}", i));
      }
      return Status::Ok();
    }
    auto array = std::make_shared<Array>();
    array->resize(count);  // within the file size and the limits checked above
    for (uint64_t i = 0; i < count; ++i) {
      Status s = ReadValue(et, depth + 1, ElementStringLimit(), &(*array)[i]);
      if (!s.ok()) return s.WithContext(fmt::format("array element {}", i));
    }
    out->array_type = et;
    out->data = std::move(array);
    return Status::Ok();
  }

  Status ReadAlignment() {
    const Value* v = file_->Find("general.alignment");
    if (v == nullptr) return Status::Ok();
    if (!v->is_integer()) {
      return Status::InvalidArgument(
          fmt::format("general.alignment is {}, expected an integer",
                      ValueTypeName(v->type)));
    }
    const bool negative = std::holds_alternative<int64_t>(v->data) &&
                          std::get<int64_t>(v->data) < 0;
    const auto a = static_cast<uint64_t>(v->AsInt());
    if (negative || a == 0 || a > kMaxAlignment || !std::has_single_bit(a)) {
      return Status::InvalidArgument(fmt::format(
          "general.alignment is {}; it must be a power of two from 1 to {}",
          negative ? std::to_string(v->AsInt()) : std::to_string(a),
          kMaxAlignment));
    }
    file_->alignment_ = a;
    return Status::Ok();
  }

  Status ParseTensorInfos() {
    file_->tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      TensorInfo t;
      Status s =
          ReadString("name", std::numeric_limits<uint64_t>::max(), &t.name);
      if (!s.ok()) return s.WithContext(fmt::format("tensor info {}", i));
      s = ParseTensorInfo(&t);
      if (!s.ok()) {
        // The unsupported-type message is shown to users as is.
        if (s.code() == StatusCode::kUnimplemented) return s;
        return s.WithContext(
            fmt::format("tensor info {} ('{}')", i, Printable(t.name)));
      }
      auto [it, inserted] = file_->tensor_index_.emplace(t.name, i);
      if (!inserted) {
        return Status::InvalidArgument(
            fmt::format("tensor info {} ('{}'): duplicate tensor name (first "
                        "seen as tensor info {})",
                        i, Printable(t.name), it->second));
      }
      file_->tensors_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  // Everything after the name: shape, type, offset; computes size_bytes.
  Status ParseTensorInfo(TensorInfo* t) {
    uint32_t n_dims = 0;
    RL_RETURN_IF_ERROR(Read("n_dims", &n_dims));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return Status::InvalidArgument(
          fmt::format("n_dims is {} at byte {}; it must be 1 to {}", n_dims,
                      pos_ - 4, kMaxDims));
    }
    t->dims.resize(n_dims);
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      RL_RETURN_IF_ERROR(Read("dimension", &t->dims[d]));
      const int64_t ne = t->dims[d];
      if (ne < 1) {
        return Status::InvalidArgument(fmt::format(
            "dimension {} is {} at byte {}; every dimension must be at least 1",
            d, ne, pos_ - 8));
      }
      if (elements > std::numeric_limits<int64_t>::max() / ne) {
        return Status::InvalidArgument(fmt::format(
            "shape [{}] overflows int64 elements",
            fmt::join(t->dims.begin(), t->dims.begin() + d + 1, ", ")));
      }
      elements *= ne;
    }
    uint32_t type = 0;
    RL_RETURN_IF_ERROR(Read("type", &type));
    t->type = static_cast<TensorType>(type);
    const TensorTypeTraits* traits = FindTraits(t->type);
    if (traits == nullptr) {
      return Status::InvalidArgument(
          fmt::format("unknown tensor type {} at byte {}", type, pos_ - 4));
    }
    if (require_supported_ && !traits->supported) {
      return Status::Unimplemented(fmt::format(
          "tensor {} has type {}, not supported yet", t->name, traits->name));
    }
    if (t->dims[0] % traits->block_elements != 0) {
      return Status::InvalidArgument(
          fmt::format("dims[0] = {} is not a multiple of the {} block size {}",
                      t->dims[0], traits->name, traits->block_elements));
    }
    const auto blocks =
        static_cast<uint64_t>(elements / traits->block_elements);
    const auto block_bytes = static_cast<uint64_t>(traits->block_bytes);
    if (blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
      return Status::InvalidArgument(
          fmt::format("shape [{}] of type {} overflows the byte size",
                      fmt::join(t->dims, ", "), traits->name));
    }
    t->size_bytes = blocks * block_bytes;
    return Read("offset", &t->offset);
  }

  Status ValidateTensorData() {
    const uint64_t alignment = file_->alignment_;
    // pos_ <= size <= 2^64 - 2^21, so rounding up cannot overflow.
    const uint64_t data_offset = (pos_ + alignment - 1) / alignment * alignment;
    file_->data_offset_ = data_offset;
    const uint64_t data_bytes = size() > data_offset ? size() - data_offset : 0;
    std::vector<TensorInfo>& tensors = file_->tensors_;
    for (TensorInfo& t : tensors) {
      if (t.offset % alignment != 0) {
        return Status::InvalidArgument(fmt::format(
            "tensor '{}': offset {} is not a multiple of the alignment {}",
            Printable(t.name), t.offset, alignment));
      }
      if (t.offset > data_bytes || t.size_bytes > data_bytes - t.offset) {
        return Status::DataLoss(fmt::format(
            "file truncated: tensor '{}' ({} bytes at data offset {}) extends "
            "past the end of the file (data starts "
            "at byte {}, file has {} bytes)",
            Printable(t.name), t.size_bytes, t.offset, data_offset, size()));
      }
      t.data = bytes_.data() + data_offset + t.offset;
    }
    // Overlap: sort by offset, compare neighbours. O(n log n) on indices.
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return tensors[a].offset < tensors[b].offset;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = tensors[order[k - 1]];
      const TensorInfo& cur = tensors[order[k]];
      if (prev.offset + prev.size_bytes >
          cur.offset) {  // both in bounds: no overflow
        return Status::InvalidArgument(fmt::format(
            "tensors '{}' (data bytes {} to {}) and '{}' (from data byte {}) "
            "overlap",
            Printable(prev.name), prev.offset, prev.offset + prev.size_bytes,
            Printable(cur.name), cur.offset));
      }
    }
    return Status::Ok();
  }

  std::span<const uint8_t> bytes_;
  bool require_supported_;
  const MetadataLimits& limits_;
  GgufFile* file_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  // Of limits_.max_array_elements, in the current pass.
  uint64_t array_elements_left_ = 0;
};

// ---------------------------------------------------------------- GgufFile

uint64_t MetadataLimits::StringLimitFor(std::string_view key) const {
  return IsDocumentStringKey(key) ? max_document_bytes : max_string_bytes;
}

Result<GgufFile> GgufFile::Parse(std::span<const uint8_t> bytes,
                                 const OpenOptions& options) {
  GgufFile file;
  GgufParser parser(bytes, options, &file);
  RL_RETURN_IF_ERROR(parser.Run());
  return file;
}

Result<GgufFile> GgufFile::Parse(std::span<const uint8_t> bytes,
                                 bool require_supported_types) {
  OpenOptions options;
  options.require_supported_types = require_supported_types;
  return Parse(bytes, options);
}

Result<GgufFile> GgufFile::Open(const std::string& path,
                                const OpenOptions& options) {
  Result<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  auto mapping = std::make_unique<MappedFile>(std::move(mapped).value());
  Result<GgufFile> file = Parse(mapping->bytes(), options);
  if (!file.ok()) {
    // The unsupported-type message names the tensor; keep it exact.
    if (file.status().code() == StatusCode::kUnimplemented)
      return file.status();
    return file.status().WithContext(path);
  }
  file->path_ = path;
  file->mapping_ = std::move(mapping);
  return file;
}

Result<GgufFile> GgufFile::Open(const std::string& path,
                                bool require_supported_types) {
  OpenOptions options;
  options.require_supported_types = require_supported_types;
  return Open(path, options);
}

const Value* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status NotFoundKey(std::string_view key) {
  return Status::NotFound(
      fmt::format("metadata key '{}' not found", Printable(key)));
}

// A uint64 above INT64_MAX does not fit the int64 the getters return.
bool FitsInt64(const Value& v) {
  const auto* u = std::get_if<uint64_t>(&v.data);
  return u == nullptr ||
         *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

}  // namespace

Result<std::string> GgufFile::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (v->type != ValueType::kString) return TypeMismatch(key, *v, "string");
  return v->AsString();
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (!v->is_integer()) return TypeMismatch(key, *v, "an integer");
  if (!FitsInt64(*v)) {
    return Status::InvalidArgument(
        fmt::format("metadata key '{}': value {} does not fit int64",
                    Printable(key), std::get<uint64_t>(v->data)));
  }
  return v->AsInt();
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (!v->is_integer() && !v->is_float())
    return TypeMismatch(key, *v, "a number");
  return v->AsDouble();
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (v->type != ValueType::kBool) return TypeMismatch(key, *v, "bool");
  return v->AsBool();
}

Result<std::vector<std::string>> GgufFile::GetStringArray(
    std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (v->type != ValueType::kArray || v->array_type != ValueType::kString) {
    return TypeMismatch(key, *v, "array of string");
  }
  const Array& a = v->AsArray();
  std::vector<std::string> out;
  out.reserve(a.size());
  for (const Value& e : a) out.push_back(e.AsString());
  return out;
}

Result<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (v->type != ValueType::kArray ||
      !(IsFloatType(v->array_type) || IsIntegerType(v->array_type))) {
    return TypeMismatch(key, *v, "array of numbers");
  }
  const Array& a = v->AsArray();
  std::vector<float> out;
  out.reserve(a.size());
  for (const Value& e : a) out.push_back(static_cast<float>(e.AsDouble()));
  return out;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return NotFoundKey(key);
  if (v->type != ValueType::kArray || !IsIntegerType(v->array_type)) {
    return TypeMismatch(key, *v, "array of integers");
  }
  const Array& a = v->AsArray();
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!FitsInt64(a[i])) {
      return Status::InvalidArgument(
          fmt::format("metadata key '{}': element {} ({}) does not fit int64",
                      Printable(key), i, std::get<uint64_t>(a[i].data)));
    }
    out.push_back(a[i].AsInt());
  }
  return out;
}

}  // namespace redline::model::gguf

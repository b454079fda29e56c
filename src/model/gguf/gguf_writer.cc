#include "model/gguf/gguf_writer.h"

#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "base/check.h"

namespace redline::model::gguf {

static_assert(std::endian::native == std::endian::little,
              "GGUF I/O assumes a little-endian host");

// Where Serialize puts bytes. Append returns false on failure.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual bool Append(std::span<const uint8_t> bytes) = 0;
};

namespace {

constexpr uint32_t kVersion = 3;

class VectorSink final : public ByteSink {
 public:
  explicit VectorSink(std::vector<uint8_t>* out) : out_(out) {}
  bool Append(std::span<const uint8_t> bytes) override {
    out_->insert(out_->end(), bytes.begin(), bytes.end());
    return true;
  }

 private:
  std::vector<uint8_t>* out_;
};

class FileSink final : public ByteSink {
 public:
  explicit FileSink(std::FILE* f) : f_(f) {}
  bool Append(std::span<const uint8_t> bytes) override {
    if (bytes.empty()) return true;
    if (std::fwrite(bytes.data(), 1, bytes.size(), f_) == bytes.size())
      return true;
    error_ = errno;
    return false;
  }
  int error() const { return error_; }

 private:
  std::FILE* f_;
  int error_ = 0;
};

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  out->insert(out->end(), raw, raw + sizeof(T));
}

void PutString(std::vector<uint8_t>* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

bool IsInteger(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

// Inclusive range of an integer type, as (min, max) in 128-bit arithmetic.
std::pair<__int128, __int128> IntRange(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return {0, 0xff};
    case ValueType::kInt8:
      return {-128, 127};
    case ValueType::kUint16:
      return {0, 0xffff};
    case ValueType::kInt16:
      return {-32768, 32767};
    case ValueType::kUint32:
      return {0, 0xffffffffu};
    case ValueType::kInt32:
      return {std::numeric_limits<int32_t>::min(),
              std::numeric_limits<int32_t>::max()};
    case ValueType::kUint64:
      return {0, std::numeric_limits<uint64_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(),
              std::numeric_limits<int64_t>::max()};
  }
}

// Encoded bytes of an integer type.
uint64_t IntBytes(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
      return 4;
    default:
      return 8;
  }
}

// The integer held by either integer alternative, or nullopt.
std::optional<__int128> IntOf(const Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.data))
    return static_cast<__int128>(*u);
  if (const auto* i = std::get_if<int64_t>(&v.data))
    return static_cast<__int128>(*i);
  return std::nullopt;
}

std::string Int128ToString(__int128 v) {
  if (v < 0) return "-" + Int128ToString(-v);
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v > 0);
  return s;
}

// What the metadata written so far takes of the reader's default
// MetadataLimits, so that every file written can be read back.
struct MetadataBudget {
  MetadataLimits limits;
  uint64_t array_elements = 0;
  uint64_t encoded_bytes = 0;
};

// Checks that `v`'s variant and range match its declared type and that it
// fits the reader's limits. `depth` counts the arrays around it, as in the
// reader; `max_string_bytes` bounds a string value.
Status ValidateValue(const Value& v, int depth, uint64_t max_string_bytes,
                     MetadataBudget* budget) {
  if (static_cast<uint32_t>(v.type) >
      static_cast<uint32_t>(ValueType::kFloat64)) {
    return Status::InvalidArgument(
        fmt::format("unknown value type {}", static_cast<uint32_t>(v.type)));
  }
  auto wrong = [&](std::string_view holds) {
    return Status::InvalidArgument(
        fmt::format("{} value holds {}", ValueTypeName(v.type), holds));
  };
  if (IsInteger(v.type)) {
    const std::optional<__int128> i = IntOf(v);
    if (!i) return wrong("no integer");
    const auto [lo, hi] = IntRange(v.type);
    if (*i < lo || *i > hi) {
      return Status::InvalidArgument(fmt::format("value {} does not fit {}",
                                                 Int128ToString(*i),
                                                 ValueTypeName(v.type)));
    }
    budget->encoded_bytes += IntBytes(v.type);
    return Status::Ok();
  }
  switch (v.type) {
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      budget->encoded_bytes += v.type == ValueType::kFloat32 ? 4 : 8;
      return std::holds_alternative<double>(v.data) ? Status::Ok()
                                                    : wrong("no double");
    case ValueType::kBool:
      budget->encoded_bytes += 1;
      return std::holds_alternative<bool>(v.data) ? Status::Ok()
                                                  : wrong("no bool");
    case ValueType::kString: {
      if (!std::holds_alternative<std::string>(v.data))
        return wrong("no string");
      const uint64_t len = v.AsString().size();
      if (len > max_string_bytes) {
        return Status::InvalidArgument(fmt::format(
            "string of {} bytes is longer than the reader's limit of {}", len,
            max_string_bytes));
      }
      budget->encoded_bytes += 8 + len;
      return Status::Ok();
    }
    case ValueType::kArray: {
      if (!std::holds_alternative<std::shared_ptr<Array>>(v.data))
        return wrong("no array");
      if (depth >= kMaxArrayDepth) {
        return Status::InvalidArgument(fmt::format(
            "arrays nested more than {} levels deep", kMaxArrayDepth));
      }
      if (static_cast<uint32_t>(v.array_type) >
          static_cast<uint32_t>(ValueType::kFloat64)) {
        return Status::InvalidArgument(
            fmt::format("unknown array element type {}",
                        static_cast<uint32_t>(v.array_type)));
      }
      const Array& a = v.AsArray();
      if (a.size() > budget->limits.max_array_length) {
        return Status::InvalidArgument(fmt::format(
            "array of {} elements is longer than the reader's limit of {}",
            a.size(), budget->limits.max_array_length));
      }
      budget->array_elements += a.size();
      if (budget->array_elements > budget->limits.max_array_elements) {
        return Status::InvalidArgument(fmt::format(
            "array of {} elements takes the metadata past the reader's limit "
            "of {} array elements in total",
            a.size(), budget->limits.max_array_elements));
      }
      budget->encoded_bytes += 12;
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].type != v.array_type) {
          return Status::InvalidArgument(fmt::format(
              "array element {} has type {}, expected {}", i,
              ValueTypeName(a[i].type), ValueTypeName(v.array_type)));
        }
        Status s = ValidateValue(a[i], depth + 1,
                                 budget->limits.max_string_bytes, budget);
        if (!s.ok()) return s.WithContext(fmt::format("array element {}", i));
      }
      return Status::Ok();
    }
    default:
      return Status::Internal("unreachable value type");
  }
}

// Encodes a validated value without its type tag (arrays carry their own
// element type and count).
void EncodeValue(const Value& v, std::vector<uint8_t>* out) {
  if (IsInteger(v.type)) {
    // Two's complement truncation gives the little-endian bytes of any type.
    const auto bits = static_cast<uint64_t>(*IntOf(v));
    switch (v.type) {
      case ValueType::kUint8:
      case ValueType::kInt8:
        Put<uint8_t>(out, static_cast<uint8_t>(bits));
        break;
      case ValueType::kUint16:
      case ValueType::kInt16:
        Put<uint16_t>(out, static_cast<uint16_t>(bits));
        break;
      case ValueType::kUint32:
      case ValueType::kInt32:
        Put<uint32_t>(out, static_cast<uint32_t>(bits));
        break;
      default:
        Put<uint64_t>(out, bits);
        break;
    }
    return;
  }
  switch (v.type) {
    case ValueType::kFloat32:
      Put<float>(out, static_cast<float>(std::get<double>(v.data)));
      break;
    case ValueType::kFloat64:
      Put<double>(out, std::get<double>(v.data));
      break;
    case ValueType::kBool:
      Put<uint8_t>(out, std::get<bool>(v.data) ? 1 : 0);
      break;
    case ValueType::kString:
      PutString(out, std::get<std::string>(v.data));
      break;
    case ValueType::kArray: {
      const Array& a = v.AsArray();
      Put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
      Put<uint64_t>(out, a.size());
      for (const Value& e : a) EncodeValue(e, out);
      break;
    }
    default:
      RL_CHECK(false) << "EncodeValue on an unvalidated value";
      break;
  }
}

}  // namespace

void GgufWriter::Set(const std::string& key, Value value) {
  if (key == "general.alignment" && value.is_integer())
    alignment_ = static_cast<uint64_t>(value.AsInt());
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::AddTensor(const std::string& name, TensorType type,
                           std::vector<int64_t> dims,
                           std::function<void(std::span<uint8_t>)> fill) {
  tensors_.push_back(
      PendingTensor{name, type, std::move(dims), std::move(fill)});
}

void GgufWriter::SetAlignment(uint64_t alignment) {
  bool present = false;
  for (const auto& kv : metadata_)
    present = present || kv.first == "general.alignment";
  if (alignment != kDefaultAlignment || present) {
    // A value above 2^32 cannot be stored; Validate rejects it via alignment_.
    Set("general.alignment", Value::U32(static_cast<uint32_t>(alignment)));
  }
  alignment_ = alignment;
}

uint64_t GgufWriter::TensorBytes(TensorType type,
                                 const std::vector<int64_t>& dims) {
  const int64_t block = TensorTypeBlockElements(type);
  const int64_t block_bytes = TensorTypeBlockBytes(type);
  if (block == 0 || dims.empty() || dims.size() > static_cast<size_t>(kMaxDims))
    return 0;
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 1 || elements > std::numeric_limits<int64_t>::max() / d) return 0;
    elements *= d;
  }
  if (dims[0] % block != 0) return 0;
  const auto blocks = static_cast<uint64_t>(elements / block);
  if (blocks >
      std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(block_bytes))
    return 0;
  return blocks * static_cast<uint64_t>(block_bytes);
}

Status GgufWriter::Validate() const {
  if (alignment_ == 0 || alignment_ > kMaxAlignment ||
      !std::has_single_bit(alignment_)) {
    return Status::InvalidArgument(
        fmt::format("alignment {} must be a power of two from 1 to {}",
                    alignment_, kMaxAlignment));
  }
  MetadataBudget budget;
  if (metadata_.size() > budget.limits.max_keys) {
    return Status::InvalidArgument(
        fmt::format("{} metadata keys, over the reader's limit of {}",
                    metadata_.size(), budget.limits.max_keys));
  }
  if (tensors_.size() > budget.limits.max_tensors) {
    return Status::InvalidArgument(
        fmt::format("{} tensors, over the reader's limit of {}",
                    tensors_.size(), budget.limits.max_tensors));
  }
  for (const auto& [key, value] : metadata_) {
    if (key.size() > kMaxKeyBytes) {
      return Status::InvalidArgument(
          fmt::format("metadata key of {} bytes is longer than {}", key.size(),
                      kMaxKeyBytes));
    }
    budget.encoded_bytes += 8 + key.size() + 4;
    Status s =
        ValidateValue(value, 0, budget.limits.StringLimitFor(key), &budget);
    if (!s.ok()) return s.WithContext(fmt::format("metadata key '{}'", key));
    if (budget.encoded_bytes > budget.limits.max_metadata_bytes) {
      return Status::InvalidArgument(fmt::format(
          "metadata key '{}': the metadata takes more than the reader's limit "
          "of {} bytes",
          key, budget.limits.max_metadata_bytes));
    }
    if (key == "general.alignment") {
      // ggml reads general.alignment as a uint32 and aborts on any other type.
      if (value.type != ValueType::kUint32 ||
          static_cast<uint64_t>(value.AsInt()) != alignment_) {
        return Status::InvalidArgument(
            fmt::format("general.alignment must be the uint32 {}", alignment_));
      }
    }
  }
  std::set<std::string_view> names;
  uint64_t end = 0;
  for (const PendingTensor& t : tensors_) {
    auto fail = [&](std::string_view why) {
      return Status::InvalidArgument(
          fmt::format("tensor '{}': {}", t.name, why));
    };
    if (t.name.size() > kMaxTensorNameBytes) {
      return fail(
          fmt::format("name of {} bytes is longer than {} (ggml's limit)",
                      t.name.size(), kMaxTensorNameBytes));
    }
    if (!names.insert(t.name).second) return fail("duplicate tensor name");
    if (TensorTypeBlockElements(t.type) == 0) {
      return fail(
          fmt::format("unknown tensor type {}", static_cast<uint32_t>(t.type)));
    }
    if (t.dims.empty() || t.dims.size() > static_cast<size_t>(kMaxDims)) {
      return fail(
          fmt::format("{} dims; must be 1 to {}", t.dims.size(), kMaxDims));
    }
    for (int64_t d : t.dims) {
      if (d < 1) return fail(fmt::format("dimension {} must be at least 1", d));
    }
    if (t.dims[0] % TensorTypeBlockElements(t.type) != 0) {
      return fail(fmt::format(
          "dims[0] = {} is not a multiple of the {} block size {}", t.dims[0],
          TensorTypeName(t.type), TensorTypeBlockElements(t.type)));
    }
    const uint64_t bytes = TensorBytes(t.type, t.dims);
    if (bytes == 0 || bytes > std::numeric_limits<uint64_t>::max() / 2 - end)
      return fail("size overflows");
    end += AlignUp(bytes, alignment_);
  }
  return Status::Ok();
}

bool GgufWriter::Serialize(ByteSink& sink) const {
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  Put<uint32_t>(&head, kVersion);
  Put<uint64_t>(&head, tensors_.size());
  Put<uint64_t>(&head, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    PutString(&head, key);
    Put<uint32_t>(&head, static_cast<uint32_t>(value.type));
    EncodeValue(value, &head);
  }
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors_.size());
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<int64_t>(&head, d);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&head, offset);
    sizes.push_back(TensorBytes(t.type, t.dims));
    offset += AlignUp(sizes.back(), alignment_);
  }
  head.resize(AlignUp(head.size(), alignment_), 0);
  if (!sink.Append(head)) return false;
  head = {};

  const std::vector<uint8_t> zeros(alignment_, 0);
  std::vector<uint8_t> buffer;  // one tensor at a time; capacity is reused
  for (size_t i = 0; i < tensors_.size(); ++i) {
    buffer.assign(sizes[i], 0);
    if (tensors_[i].fill) tensors_[i].fill(std::span<uint8_t>(buffer));
    if (!sink.Append(buffer)) return false;
    const uint64_t pad = AlignUp(sizes[i], alignment_) - sizes[i];
    if (!sink.Append(std::span<const uint8_t>(zeros.data(), pad))) return false;
  }
  return true;
}

Status GgufWriter::Write(const std::string& path) const {
  RL_RETURN_IF_ERROR(Validate());
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr)
    return Status::IoError(
        fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  // Large writes bypass stdio's buffer; a 1 MiB buffer batches the small ones.
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  FileSink sink(f);
  bool ok = Serialize(sink);
  int err = sink.error();
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::IoError(
        fmt::format("cannot write {}: {}", tmp, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    return Status::IoError(fmt::format("cannot rename {} to {}: {}", tmp, path,
                                       std::strerror(err)));
  }
  return Status::Ok();
}

std::vector<uint8_t> GgufWriter::WriteToBytes() const {
  Status s = Validate();
  RL_CHECK(s.ok()) << s.ToString();
  std::vector<uint8_t> out;
  VectorSink sink(&out);
  RL_CHECK(Serialize(sink));
  return out;
}

}  // namespace redline::model::gguf

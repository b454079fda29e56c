// libFuzzer target for the GGUF reader (and, on inputs it accepts, the
// writer): parses the input with and without require_supported_types, reads
// every metadata value and the first and last byte of every tensor (ASan flags
// any pointer outside the input), and checks that re-writing an accepted file
// yields a file that parses to the same metadata and tensors.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target gguf_fuzz
//   ./build/fuzz/fuzz/gguf_fuzz -max_total_time=30 tests/data/gguf_seeds
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "base/check.h"
#include "model/gguf/gguf.h"
#include "model/gguf/gguf_writer.h"

namespace {

using redline::model::gguf::Array;
using redline::model::gguf::GgufFile;
using redline::model::gguf::GgufWriter;
using redline::model::gguf::TensorInfo;
using redline::model::gguf::Value;
using redline::model::gguf::ValueType;

// Folds a value into `acc` so the reads cannot be optimised away.
uint64_t Touch(const Value& v, uint64_t acc) {
  acc = acc * 31 + static_cast<uint32_t>(v.type);
  if (v.is_integer()) return acc + static_cast<uint64_t>(v.AsInt());
  if (v.is_float())
    return acc + static_cast<uint64_t>(v.AsDouble() == v.AsDouble());
  switch (v.type) {
    case ValueType::kBool:
      return acc + v.AsBool();
    case ValueType::kString:
      return acc + v.AsString().size() +
             (v.AsString().empty() ? 0 : v.AsString().back());
    case ValueType::kArray:
      for (const Value& e : v.AsArray()) {
        RL_CHECK(e.type == v.array_type);
        acc = Touch(e, acc);
      }
      return acc;
    default:
      RL_CHECK(false) << "parsed value of unknown type";
      return acc;
  }
}

uint64_t TouchFile(const GgufFile& f, std::span<const uint8_t> bytes) {
  uint64_t acc = f.version() + f.alignment();
  for (const auto& [key, value] : f.metadata()) {
    acc += key.size();
    RL_CHECK(f.Find(key) == &value);
    acc = Touch(value, acc);
    // The getters must not crash on any type.
    acc += f.GetString(key).ok() + f.GetInt(key).ok() + f.GetFloat(key).ok() +
           f.GetBool(key).ok();
    acc += f.GetStringArray(key).ok() + f.GetFloatArray(key).ok() +
           f.GetIntArray(key).ok();
  }
  for (const TensorInfo& t : f.tensors()) {
    RL_CHECK(f.FindTensor(t.name) == &t);
    RL_CHECK(t.size_bytes > 0 && t.offset % f.alignment() == 0);
    RL_CHECK(t.data >= bytes.data() &&
             t.data + t.size_bytes <= bytes.data() + bytes.size());
    acc += t.data[0] + t.data[t.size_bytes - 1] +
           static_cast<uint64_t>(t.NumElements());
  }
  return acc;
}

bool SameValue(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type == ValueType::kArray) {
    const Array& x = a.AsArray();
    const Array& y = b.AsArray();
    if (a.array_type != b.array_type || x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!SameValue(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_float()) {
    const double x = a.AsDouble();
    const double y = b.AsDouble();
    return std::memcmp(&x, &y, sizeof(x)) == 0;
  }
  if (a.is_integer()) return a.AsInt() == b.AsInt();
  return a.data == b.data;
}

// An accepted file, re-written by GgufWriter (when it accepts the content),
// must parse back to the same metadata and tensor bytes.
void CheckRoundTrip(const GgufFile& f) {
  // The writer always stores general.alignment as a uint32 (ggml requires
  // it), so a file with another integer type there would not compare equal.
  const Value* alignment = f.Find("general.alignment");
  if (alignment != nullptr && alignment->type != ValueType::kUint32) return;
  GgufWriter w;
  for (const auto& [key, value] : f.metadata()) w.Set(key, value);
  w.SetAlignment(f.alignment());
  for (const TensorInfo& t : f.tensors()) {
    const uint8_t* src = t.data;
    w.AddTensor(t.name, t.type, t.dims, [src](std::span<uint8_t> dst) {
      std::memcpy(dst.data(), src, dst.size());
    });
  }
  if (!w.Validate().ok()) return;  // e.g. tensor names ggml would refuse
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  auto again = GgufFile::Parse(bytes, /*require_supported_types=*/false);
  RL_CHECK(again.ok()) << again.status().ToString();
  RL_CHECK(again->metadata().size() == f.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    RL_CHECK(again->metadata()[i].first == f.metadata()[i].first);
    RL_CHECK(SameValue(again->metadata()[i].second, f.metadata()[i].second));
  }
  RL_CHECK(again->tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& a = again->tensors()[i];
    const TensorInfo& b = f.tensors()[i];
    RL_CHECK(a.name == b.name && a.type == b.type && a.dims == b.dims &&
             a.size_bytes == b.size_bytes);
    RL_CHECK(std::memcmp(a.data, b.data, a.size_bytes) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  volatile uint64_t sink = 0;
  for (bool require_supported : {false, true}) {
    auto f = GgufFile::Parse(bytes, require_supported);
    if (!f.ok()) {
      RL_CHECK(!f.status().message().empty());
      sink = sink + f.status().message().size();
      continue;
    }
    sink = sink + TouchFile(*f, bytes);
    if (!require_supported) CheckRoundTrip(*f);
  }
  return 0;
}

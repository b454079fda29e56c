// GGUF reader and writer: round trips, getters, layout, vocabularies, seeds.
// Hostile inputs are in gguf_hostile_test.cc.
#include "model/gguf/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>

#include "model/gguf/gguf_test_util.h"
#include "model/gguf/gguf_writer.h"

namespace redline::model::gguf {
namespace {

using testing::CopyToWriter;
using ::testing::HasSubstr;
using testing::PatternBytes;
using testing::PatternFill;
using testing::ValuesEqual;

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufTypesTest, Names) {
  EXPECT_EQ(ValueTypeName(ValueType::kUint8), "uint8");
  EXPECT_EQ(ValueTypeName(ValueType::kFloat64), "float64");
  EXPECT_EQ(ValueTypeName(static_cast<ValueType>(13)), "unknown");
  EXPECT_EQ(TensorTypeName(TensorType::kQ4_K), "Q4_K");
  EXPECT_EQ(TensorTypeName(TensorType::kBF16), "BF16");
  EXPECT_EQ(TensorTypeName(TensorType::kMXFP4), "MXFP4");
  EXPECT_EQ(TensorTypeName(static_cast<TensorType>(77)), "type 77");
}

TEST(GgufTypesTest, SupportedTypesAndBlockSizes) {
  for (TensorType t :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16,
        TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1,
        TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kIQ4_NL,
        TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
        TensorType::kQ5_K, TensorType::kQ6_K}) {
    EXPECT_TRUE(IsSupportedTensorType(t)) << TensorTypeName(t);
  }
  for (TensorType t :
       {TensorType::kQ8_1, TensorType::kQ8_K, TensorType::kIQ2_XS,
        TensorType::kIQ4_XS, TensorType::kMXFP4}) {
    EXPECT_FALSE(IsSupportedTensorType(t)) << TensorTypeName(t);
  }
  EXPECT_FALSE(IsSupportedTensorType(static_cast<TensorType>(4)));
  const std::map<TensorType, std::pair<int64_t, int64_t>> expected = {
      {TensorType::kF32, {1, 4}},      {TensorType::kF16, {1, 2}},
      {TensorType::kBF16, {1, 2}},     {TensorType::kQ4_0, {32, 18}},
      {TensorType::kQ8_0, {32, 34}},   {TensorType::kQ4_1, {32, 20}},
      {TensorType::kQ5_0, {32, 22}},   {TensorType::kQ5_1, {32, 24}},
      {TensorType::kQ8_1, {32, 36}},   {TensorType::kQ2_K, {256, 84}},
      {TensorType::kQ3_K, {256, 110}}, {TensorType::kQ4_K, {256, 144}},
      {TensorType::kQ5_K, {256, 176}}, {TensorType::kQ6_K, {256, 210}},
      {TensorType::kQ8_K, {256, 292}}, {TensorType::kI8, {1, 1}},
      {TensorType::kI16, {1, 2}},      {TensorType::kI32, {1, 4}},
      {TensorType::kI64, {1, 8}},      {TensorType::kF64, {1, 8}},
  };
  for (const auto& [type, sizes] : expected) {
    EXPECT_EQ(TensorTypeBlockElements(type), sizes.first)
        << TensorTypeName(type);
    EXPECT_EQ(TensorTypeBlockBytes(type), sizes.second) << TensorTypeName(type);
  }
  EXPECT_EQ(TensorTypeBlockElements(static_cast<TensorType>(77)), 0);
  EXPECT_EQ(TensorTypeBlockBytes(static_cast<TensorType>(5)), 0);
}

TEST(GgufValueTest, ConstructorsAndAccessors) {
  EXPECT_EQ(Value::I8(-5).AsInt(), -5);
  EXPECT_EQ(Value::U64(7).AsDouble(), 7.0);
  EXPECT_TRUE(Value::U16(1).is_integer());
  EXPECT_FALSE(Value::U16(1).is_float());
  EXPECT_TRUE(Value::F64(1).is_float());
  EXPECT_EQ(Value::F32(0.5f).AsDouble(), 0.5);
  EXPECT_TRUE(Value::Bool(true).AsBool());
  EXPECT_FALSE(Value::Bool(false).AsBool());
  EXPECT_EQ(Value::Str("x").AsString(), "x");
  const Value a = Value::I32Array({1, -2});
  EXPECT_EQ(a.type, ValueType::kArray);
  EXPECT_EQ(a.array_type, ValueType::kInt32);
  ASSERT_EQ(a.AsArray().size(), 2u);
  EXPECT_EQ(a.AsArray()[1].AsInt(), -2);
}

// Every value type, extreme values, empty and nested arrays survive a round
// trip in order.
TEST(GgufRoundTripTest, EveryValueType) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::string, Value>> kvs = {
      {"u8.max", Value::U8(255)},
      {"i8.min", Value::I8(-128)},
      {"u16.max", Value::U16(65535)},
      {"i16.min", Value::I16(-32768)},
      {"u32.max", Value::U32(std::numeric_limits<uint32_t>::max())},
      {"i32.min", Value::I32(std::numeric_limits<int32_t>::min())},
      {"f32", Value::F32(-1.25e-3f)},
      {"f32.inf", Value::F32(std::numeric_limits<float>::infinity())},
      {"f32.nan", Value::F32(nan)},
      {"bool.t", Value::Bool(true)},
      {"bool.f", Value::Bool(false)},
      {"str", Value::Str("\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80")},
      {"str.empty", Value::Str("")},
      {"str.nul", Value::Str(std::string("a\0b", 3))},
      {"u64.max", Value::U64(std::numeric_limits<uint64_t>::max())},
      {"i64.min", Value::I64(std::numeric_limits<int64_t>::min())},
      {"f64", Value::F64(3.141592653589793)},
      {"arr.u8",
       Value::ArrayOf(ValueType::kUint8, {Value::U8(0), Value::U8(255)})},
      {"arr.i8", Value::ArrayOf(ValueType::kInt8, {Value::I8(-1)})},
      {"arr.u16",
       Value::ArrayOf(ValueType::kUint16, {Value::U16(1), Value::U16(2)})},
      {"arr.i16", Value::ArrayOf(ValueType::kInt16, {Value::I16(-3)})},
      {"arr.u32", Value::ArrayOf(ValueType::kUint32, {Value::U32(4)})},
      {"arr.i32", Value::I32Array({-5, 6})},
      {"arr.f32", Value::F32Array({1.5f, -0.0f})},
      {"arr.bool", Value::ArrayOf(ValueType::kBool,
                                  {Value::Bool(true), Value::Bool(false)})},
      {"arr.str", Value::StrArray({"a", "", "ccc"})},
      {"arr.u64", Value::ArrayOf(ValueType::kUint64,
                                 {Value::U64(1), Value::U64(1ull << 63)})},
      {"arr.i64", Value::ArrayOf(ValueType::kInt64, {Value::I64(-7)})},
      {"arr.f64", Value::ArrayOf(ValueType::kFloat64, {Value::F64(1e300)})},
      {"arr.empty", Value::ArrayOf(ValueType::kString, {})},
      {"arr.nested",
       Value::ArrayOf(ValueType::kArray,
                      {Value::I32Array({1, 2, 3}), Value::StrArray({"x"}),
                       Value::ArrayOf(ValueType::kArray, {}),
                       Value::ArrayOf(ValueType::kArray,
                                      {Value::ArrayOf(ValueType::kBool,
                                                      {Value::Bool(true)})})})},
  };
  GgufWriter w;
  for (const auto& [k, v] : kvs) w.Set(k, v);
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  Result<GgufFile> f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_TRUE(f->tensors().empty());
  ASSERT_EQ(f->metadata().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, kvs[i].first);
    EXPECT_TRUE(ValuesEqual(f->metadata()[i].second, kvs[i].second))
        << kvs[i].first;
    EXPECT_EQ(f->Find(kvs[i].first), &f->metadata()[i].second);
  }
  // Writing the parsed file again gives the same bytes.
  EXPECT_EQ(CopyToWriter(*f).WriteToBytes(), bytes);
}

TEST(GgufGetterTest, TypedGetters) {
  GgufWriter w;
  w.Set("s", Value::Str("hi"));
  w.Set("u8", Value::U8(9));
  w.Set("i16", Value::I16(-9));
  w.Set("u64.big", Value::U64(std::numeric_limits<uint64_t>::max()));
  w.Set("f32", Value::F32(0.25f));
  w.Set("b", Value::Bool(true));
  w.Set("strs", Value::StrArray({"a", "b"}));
  w.Set("f32s", Value::F32Array({1.f, 2.5f}));
  w.Set("f64s", Value::ArrayOf(ValueType::kFloat64, {Value::F64(0.5)}));
  w.Set("u8s", Value::ArrayOf(ValueType::kUint8, {Value::U8(200)}));
  w.Set("i64s",
        Value::ArrayOf(ValueType::kInt64, {Value::I64(-3), Value::I64(4)}));
  w.Set("u64s.big",
        Value::ArrayOf(ValueType::kUint64, {Value::U64(1ull << 63)}));
  w.Set("nested", Value::ArrayOf(ValueType::kArray, {Value::I32Array({1})}));
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  Result<GgufFile> r = GgufFile::Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = *r;

  EXPECT_EQ(*f.GetString("s"), "hi");
  EXPECT_EQ(*f.GetInt("u8"), 9);
  EXPECT_EQ(*f.GetInt("i16"), -9);
  EXPECT_EQ(*f.GetFloat("f32"), 0.25);
  EXPECT_EQ(*f.GetFloat("u8"), 9.0);
  EXPECT_TRUE(*f.GetBool("b"));
  EXPECT_EQ(*f.GetStringArray("strs"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*f.GetFloatArray("f32s"), (std::vector<float>{1.f, 2.5f}));
  EXPECT_EQ(*f.GetFloatArray("f64s"), (std::vector<float>{0.5f}));
  EXPECT_EQ(*f.GetFloatArray("u8s"), (std::vector<float>{200.f}));
  EXPECT_EQ(*f.GetIntArray("u8s"), (std::vector<int64_t>{200}));
  EXPECT_EQ(*f.GetIntArray("i64s"), (std::vector<int64_t>{-3, 4}));

  EXPECT_EQ(f.GetString("missing").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(f.GetString("missing").status().message(),
              HasSubstr("'missing' not found"));
  EXPECT_EQ(f.GetString("u8").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetString("u8").status().message(),
            "metadata key 'u8' is uint8, expected string");
  EXPECT_EQ(f.GetInt("f32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetInt("u64.big").status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.GetInt("u64.big").status().message(),
              HasSubstr("does not fit int64"));
  EXPECT_EQ(f.GetFloat("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetBool("u8").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      f.GetStringArray("f32s").status().message(),
      "metadata key 'f32s' is array of float32, expected array of string");
  EXPECT_EQ(f.GetIntArray("f32s").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetIntArray("u64s.big").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetFloatArray("strs").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetFloatArray("nested").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetIntArray("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetIntArray("missing").status().code(), StatusCode::kNotFound);
}

// Every supported tensor type and rank: shapes, sizes, aligned consecutive
// offsets and the exact bytes.
TEST(GgufRoundTripTest, SupportedTensorTypes) {
  struct Case {
    TensorType type;
    std::vector<int64_t> dims;
    uint64_t bytes;
  };
  const std::vector<Case> cases = {
      {TensorType::kF32, {5}, 20},
      {TensorType::kF32, {3, 2}, 24},
      {TensorType::kF16, {7, 3, 2}, 84},
      {TensorType::kBF16, {2, 2, 2, 3}, 48},
      {TensorType::kQ8_0, {64, 3}, 204},
      {TensorType::kQ8_0, {32}, 34},
      {TensorType::kQ4_0, {96, 2, 1}, 108},
      {TensorType::kQ4_0, {32, 1, 1, 1}, 18},
  };
  GgufWriter w;
  w.Set("general.architecture", Value::Str("llama"));
  for (size_t i = 0; i < cases.size(); ++i) {
    w.AddTensor("t" + std::to_string(i), cases[i].type, cases[i].dims,
                PatternFill(static_cast<uint32_t>(i)));
  }
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  Result<GgufFile> f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->tensors().size(), cases.size());
  EXPECT_EQ(f->data_offset() % 32, 0u);
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, "t" + std::to_string(i));
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.dims, cases[i].dims);
    EXPECT_EQ(t.size_bytes, cases[i].bytes);
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.data, bytes.data() + f->data_offset() + t.offset);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.size_bytes),
              PatternBytes(static_cast<uint32_t>(i), t.size_bytes));
    EXPECT_EQ(f->FindTensor(t.name), &t);
    expected_offset += (t.size_bytes + 31) / 32 * 32;
  }
  EXPECT_EQ(f->tensors()[2].NumElements(), 42);
  EXPECT_EQ(f->FindTensor("nope"), nullptr);
  // The file ends with the last tensor's padding.
  EXPECT_EQ(bytes.size(), f->data_offset() + expected_offset);
}

// Types Redline cannot compute with still load when not required, with sizes
// from the ggml block table; when required, the first one is named exactly.
TEST(GgufRoundTripTest, UnsupportedTypesLoadWhenNotRequired) {
  const std::vector<TensorType> all = {
      TensorType::kF32,    TensorType::kF16,     TensorType::kQ4_0,
      TensorType::kQ4_1,   TensorType::kQ5_0,    TensorType::kQ5_1,
      TensorType::kQ8_0,   TensorType::kQ8_1,    TensorType::kQ2_K,
      TensorType::kQ3_K,   TensorType::kQ4_K,    TensorType::kQ5_K,
      TensorType::kQ6_K,   TensorType::kQ8_K,    TensorType::kIQ2_XXS,
      TensorType::kIQ2_XS, TensorType::kIQ3_XXS, TensorType::kIQ1_S,
      TensorType::kIQ4_NL, TensorType::kIQ3_S,   TensorType::kIQ2_S,
      TensorType::kIQ4_XS, TensorType::kI8,      TensorType::kI16,
      TensorType::kI32,    TensorType::kI64,     TensorType::kF64,
      TensorType::kIQ1_M,  TensorType::kBF16,    TensorType::kTQ1_0,
      TensorType::kTQ2_0,  TensorType::kMXFP4,
  };
  GgufWriter w;
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t block = TensorTypeBlockElements(all[i]);
    ASSERT_GT(block, 0) << TensorTypeName(all[i]);
    w.AddTensor("blk." + std::to_string(i) + ".w", all[i], {block * 2, 3},
                PatternFill(static_cast<uint32_t>(i)));
  }
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  Result<GgufFile> f =
      GgufFile::Parse(bytes, /*require_supported_types=*/false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->tensors().size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.type, all[i]);
    EXPECT_EQ(t.size_bytes,
              static_cast<uint64_t>(TensorTypeBlockBytes(all[i]) * 2 * 3))
        << TensorTypeName(all[i]);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.size_bytes),
              PatternBytes(static_cast<uint32_t>(i), t.size_bytes));
  }
  Result<GgufFile> strict = GgufFile::Parse(bytes);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(strict.status().message(),
            "tensor blk.7.w has type Q8_1, not supported yet");
}

class GgufAlignmentTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(GgufAlignmentTest, TensorsAndFileAreAligned) {
  const uint64_t a = GetParam();
  GgufWriter w;
  w.Set("general.architecture", Value::Str("llama"));
  w.SetAlignment(a);
  w.AddTensor("a", TensorType::kF32, {3}, PatternFill(1));
  w.AddTensor("b", TensorType::kQ8_0, {32}, PatternFill(2));
  w.AddTensor("c", TensorType::kF16, {1}, PatternFill(3));
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  Result<GgufFile> f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), a);
  // general.alignment is written only when it differs from the default.
  const Value* key = f->Find("general.alignment");
  if (a == 32) {
    EXPECT_EQ(key, nullptr);
  } else {
    ASSERT_NE(key, nullptr);
    EXPECT_EQ(key->type, ValueType::kUint32);
    EXPECT_EQ(static_cast<uint64_t>(key->AsInt()), a);
  }
  EXPECT_EQ(f->data_offset() % a, 0u);
  EXPECT_EQ(bytes.size() % a, 0u);
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.offset % a, 0u) << t.name;
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.size_bytes),
              PatternBytes(t.name[0] - 'a' + 1, t.size_bytes));
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufAlignmentTest,
                         ::testing::Values(1, 2, 8, 16, 32, 64, 4096));

// The exact bytes of a tiny file, laid out by hand from the spec: this pins
// the format other engines read.
TEST(GgufWriterTest, ExactBytesOfTinyFile) {
  GgufWriter w;
  w.Set("a", Value::U32(7));
  w.AddTensor("t", TensorType::kF32, {2}, [](std::span<uint8_t> d) {
    const float v[2] = {1.0f, -2.0f};
    std::memcpy(d.data(), v, sizeof(v));
  });
  testing::RawBytes e;
  e.Header(3, 1, 1);
  e.Str("a").U32(4).U32(7);                // key, uint32, value
  e.Str("t").U32(1).I64(2).U32(0).U64(0);  // name, n_dims, ne[0], F32, offset
  e.Bytes(96 - e.bytes().size(), 0);       // pad to 32 (74 -> 96)
  e.U32(0x3f800000u).U32(0xc0000000u);     // 1.0f, -2.0f
  e.Bytes(24, 0);                          // pad the tensor to 32
  EXPECT_EQ(w.WriteToBytes(), e.bytes());
}

TEST(GgufWriterTest, SetReplacesInPlaceAndKeepsOrder) {
  GgufWriter w;
  w.Set("b", Value::U32(1));
  w.Set("a", Value::U32(2));
  w.Set("b", Value::Str("x"));
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  Result<GgufFile> f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "b");
  EXPECT_EQ(f->metadata()[0].second.AsString(), "x");
  EXPECT_EQ(f->metadata()[1].first, "a");
}

TEST(GgufWriterTest, FillsTensorsOneAtATimeInOrder) {
  std::vector<std::pair<std::string, size_t>> calls;
  GgufWriter w;
  for (const char* name : {"x", "y", "z"}) {
    w.AddTensor(name, TensorType::kF16, {10},
                [&calls, name](std::span<uint8_t> d) {
                  for (uint8_t b : d) EXPECT_EQ(b, 0);  // handed over zeroed
                  calls.emplace_back(name, d.size());
                });
  }
  w.AddTensor("null_fill", TensorType::kF32, {1}, nullptr);
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  EXPECT_EQ(calls, (std::vector<std::pair<std::string, size_t>>{
                       {"x", 20}, {"y", 20}, {"z", 20}}));
  Result<GgufFile> f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(
      std::vector<uint8_t>(f->tensors()[3].data, f->tensors()[3].data + 4),
      std::vector<uint8_t>(4, 0));
}

TEST(GgufWriterTest, WriteThenOpen) {
  const std::string dir = ::testing::TempDir() + "gguf_write_then_open";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.gguf";
  std::filesystem::remove(path);
  GgufWriter w;
  w.Set("general.architecture", Value::Str("llama"));
  w.AddTensor("w", TensorType::kBF16, {16, 4}, PatternFill(9));
  ASSERT_TRUE(w.Write(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // Overwriting an existing file works too.
  ASSERT_TRUE(w.Write(path).ok());
  Result<GgufFile> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->path(), path);
  ASSERT_NE(f->mapping(), nullptr);
  EXPECT_EQ(f->mapping()->size(), std::filesystem::file_size(path));
  EXPECT_EQ(ReadFileBytes(path), w.WriteToBytes());
  const TensorInfo* t = f->FindTensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->size_bytes),
            PatternBytes(9, 128));
  // Moving the file keeps tensor pointers valid (the mapping is owned by
  // pointer).
  GgufFile moved = std::move(f).value();
  EXPECT_EQ(moved.FindTensor("w")->data, t->data);
  std::filesystem::remove_all(dir);
}

TEST(GgufWriterTest, WriteToMissingDirectoryIsIoError) {
  GgufWriter w;
  w.Set("k", Value::U8(1));
  Status s = w.Write("/nonexistent-dir-for-gguf-test/x.gguf");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("x.gguf.tmp"));
}

TEST(GgufFileTest, OpenMissingFileIsNotFound) {
  Result<GgufFile> f = GgufFile::Open("/nonexistent-dir-for-gguf-test/x.gguf");
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

TEST(GgufFileTest, OpenErrorNamesThePath) {
  const std::string path = ::testing::TempDir() + "gguf_not_gguf.bin";
  { std::ofstream(path) << "definitely not a gguf file"; }
  Result<GgufFile> f = GgufFile::Open(path);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr(path + ": not a GGUF file: magic is 'defi'"));
  std::filesystem::remove(path);
}

struct InvalidWriterCase {
  std::string name;
  std::function<void(GgufWriter&)> setup;
  std::string message;  // substring
};

class GgufWriterValidateTest
    : public ::testing::TestWithParam<InvalidWriterCase> {};

TEST_P(GgufWriterValidateTest, Rejects) {
  GgufWriter w;
  w.Set("general.architecture", Value::Str("llama"));
  GetParam().setup(w);
  Status s = w.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(GetParam().message));
  const std::string path =
      ::testing::TempDir() + "gguf_invalid_" + GetParam().name;
  EXPECT_EQ(w.Write(path).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

Value Raw(ValueType type, decltype(Value::data) data) {
  Value v;
  v.type = type;
  v.data = std::move(data);
  return v;
}

// `levels` arrays nested inside each other around one uint8.
Value Nested(int levels) {
  Value v = Value::U8(1);
  for (int i = 0; i < levels; ++i) {
    const ValueType inner = v.type;
    v = Value::ArrayOf(inner, {v});
  }
  return v;
}

const InvalidWriterCase kInvalidWriterCases[] = {
    {"alignment_zero", [](GgufWriter& w) { w.SetAlignment(0); },
     "alignment 0 must be a power of two"},
    {"alignment_three", [](GgufWriter& w) { w.SetAlignment(3); },
     "alignment 3 must be a power of two"},
    {"alignment_huge", [](GgufWriter& w) { w.SetAlignment(uint64_t{1} << 22); },
     "must be a power of two"},
    {"alignment_string",
     [](GgufWriter& w) { w.Set("general.alignment", Value::Str("64")); },
     "general.alignment must be the uint32 32"},
    {"alignment_int64",
     [](GgufWriter& w) { w.Set("general.alignment", Value::I64(64)); },
     "general.alignment must be the uint32 64"},
    {"key_too_long",
     [](GgufWriter& w) { w.Set(std::string(70000, 'k'), Value::U8(1)); },
     "longer than 65535"},
    {"variant_mismatch",
     [](GgufWriter& w) {
       w.Set("k", Raw(ValueType::kUint32, std::string("x")));
     },
     "metadata key 'k': uint32 value holds no integer"},
    {"u8_out_of_range",
     [](GgufWriter& w) { w.Set("k", Raw(ValueType::kUint8, uint64_t{300})); },
     "value 300 does not fit uint8"},
    {"u32_negative",
     [](GgufWriter& w) { w.Set("k", Raw(ValueType::kUint32, int64_t{-1})); },
     "value -1 does not fit uint32"},
    {"i64_from_huge_u64",
     [](GgufWriter& w) { w.Set("k", Raw(ValueType::kInt64, ~uint64_t{0})); },
     "value 18446744073709551615 does not fit int64"},
    {"float_holds_int",
     [](GgufWriter& w) { w.Set("k", Raw(ValueType::kFloat32, uint64_t{1})); },
     "holds no double"},
    {"unknown_value_type",
     [](GgufWriter& w) {
       w.Set("k", Raw(static_cast<ValueType>(13), uint64_t{1}));
     },
     "unknown value type 13"},
    {"array_element_mismatch",
     [](GgufWriter& w) {
       w.Set("k", Value::ArrayOf(ValueType::kUint32,
                                 {Value::U32(1), Value::Str("x")}));
     },
     "array element 1 has type string, expected uint32"},
    {"array_too_deep",
     [](GgufWriter& w) { w.Set("k", Nested(kMaxArrayDepth + 1)); },
     "nested more than 8 levels"},
    {"duplicate_tensor",
     [](GgufWriter& w) {
       w.AddTensor("w", TensorType::kF32, {1}, nullptr);
       w.AddTensor("w", TensorType::kF32, {1}, nullptr);
     },
     "tensor 'w': duplicate tensor name"},
    {"name_too_long",
     [](GgufWriter& w) {
       w.AddTensor(std::string(64, 'n'), TensorType::kF32, {1}, nullptr);
     },
     "name of 64 bytes is longer than 63"},
    {"no_dims",
     [](GgufWriter& w) { w.AddTensor("w", TensorType::kF32, {}, nullptr); },
     "0 dims; must be 1 to 4"},
    {"five_dims",
     [](GgufWriter& w) {
       w.AddTensor("w", TensorType::kF32, {1, 1, 1, 1, 1}, nullptr);
     },
     "5 dims; must be 1 to 4"},
    {"zero_dim",
     [](GgufWriter& w) {
       w.AddTensor("w", TensorType::kF32, {4, 0}, nullptr);
     },
     "dimension 0 must be at least 1"},
    {"block_mismatch",
     [](GgufWriter& w) { w.AddTensor("w", TensorType::kQ8_0, {48}, nullptr); },
     "dims[0] = 48 is not a multiple of the Q8_0 block size 32"},
    {"unknown_tensor_type",
     [](GgufWriter& w) {
       w.AddTensor("w", static_cast<TensorType>(77), {1}, nullptr);
     },
     "unknown tensor type 77"},
    {"size_overflow",
     [](GgufWriter& w) {
       w.AddTensor("w", TensorType::kF32, {int64_t{1} << 40, int64_t{1} << 22},
                   nullptr);
     },
     "size overflows"},
};

INSTANTIATE_TEST_SUITE_P(Cases, GgufWriterValidateTest,
                         ::testing::ValuesIn(kInvalidWriterCases),
                         [](const auto& info) { return info.param.name; });

// The shared vocab-only GGUF files (written by llama.cpp's converter) load,
// with the documented array sizes, and our writer reproduces them exactly.
TEST(GgufVocabTest, LoadsEveryVocabulary) {
  const std::filesystem::path dir =
      std::filesystem::path(RL_SHARED_DIR) / "testdata" / "vocab";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
  // name -> (tokens, merges); 0 merges: none in the file.
  const std::map<std::string, std::pair<size_t, size_t>> expected = {
      {"baichuan", {64000, 0}},
      {"bert-bge", {30522, 0}},
      {"deepseek-llm", {102400, 99757}},
      {"falcon", {65024, 64784}},
      {"gpt-2", {50257, 50000}},
      {"gpt-neox", {50432, 50009}},
      {"llama-bpe", {128256, 280147}},
      {"llama-spm", {32000, 0}},
      {"phi-3", {32064, 0}},
      {"qwen2", {151936, 151387}},
      {"refact", {49216, 48891}},
      {"starcoder", {49152, 48872}},
  };
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("ggml-vocab-", 0) != 0 ||
        entry.path().extension() != ".gguf")
      continue;
    SCOPED_TRACE(file);
    const std::string name = file.substr(11, file.size() - 11 - 5);
    const auto start = std::chrono::steady_clock::now();
    Result<GgufFile> f = GgufFile::Open(entry.path().string());
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ++loaded;
    std::printf("  %-32s %8.1f ms  %zu keys\n", file.c_str(), ms,
                f->metadata().size());
    EXPECT_EQ(f->version(), 3u);
    EXPECT_TRUE(f->tensors().empty());
    Result<std::vector<std::string>> tokens =
        f->GetStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
    Result<std::vector<int64_t>> types =
        f->GetIntArray("tokenizer.ggml.token_type");
    ASSERT_TRUE(types.ok()) << types.status().ToString();
    EXPECT_EQ(types->size(), tokens->size());
    EXPECT_TRUE(f->GetString("tokenizer.ggml.model").ok());
    auto it = expected.find(name);
    if (it != expected.end()) {
      EXPECT_EQ(tokens->size(), it->second.first);
      Result<std::vector<std::string>> merges =
          f->GetStringArray("tokenizer.ggml.merges");
      if (it->second.second == 0) {
        EXPECT_EQ(merges.status().code(), StatusCode::kNotFound);
      } else {
        ASSERT_TRUE(merges.ok()) << merges.status().ToString();
        EXPECT_EQ(merges->size(), it->second.second);
      }
    }
    // Re-encoding the parsed metadata gives the original bytes (up to the
    // padding at the end, which vocab-only writers may omit).
    const std::vector<uint8_t> original(f->mapping()->bytes().begin(),
                                        f->mapping()->bytes().end());
    std::vector<uint8_t> rewritten = CopyToWriter(*f).WriteToBytes();
    ASSERT_GE(rewritten.size(), original.size());
    EXPECT_TRUE(
        std::equal(original.begin(), original.end(), rewritten.begin()));
    EXPECT_LT(rewritten.size() - original.size(), f->alignment());
  }
  EXPECT_GE(loaded, 12);
}

// A synthetic vocabulary as big as the largest real ones parses quickly.
TEST(GgufVocabTest, BigArraysParse) {
  std::vector<std::string> tokens(151936);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = "tok" + std::to_string(i);
  std::vector<std::string> merges(280147);
  for (size_t i = 0; i < merges.size(); ++i)
    merges[i] = "a" + std::to_string(i) + " b";
  GgufWriter w;
  w.Set("tokenizer.ggml.tokens", Value::StrArray(tokens));
  w.Set("tokenizer.ggml.merges", Value::StrArray(merges));
  w.Set("tokenizer.ggml.token_type",
        Value::I32Array(std::vector<int32_t>(tokens.size(), 1)));
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  const auto start = std::chrono::steady_clock::now();
  Result<GgufFile> f = GgufFile::Parse(bytes);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::printf("  parsed %zu tokens + %zu merges (%zu bytes) in %.1f ms\n",
              tokens.size(), merges.size(), bytes.size(), ms);
  EXPECT_EQ(*f->GetStringArray("tokenizer.ggml.tokens"), tokens);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.merges")->size(), merges.size());
}

// tests/data/gguf_seeds holds the fuzz seeds; they are what SeedWriters()
// builds. RL_WRITE_GGUF_SEEDS=1 rewrites them.
TEST(GgufSeedsTest, CommittedSeedsMatchTheirBuilders) {
  const std::filesystem::path dir =
      std::filesystem::path(RL_SOURCE_DIR) / "tests" / "data" / "gguf_seeds";
  const char* write = std::getenv("RL_WRITE_GGUF_SEEDS");
  for (auto& [name, writer] : testing::SeedWriters()) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = writer.WriteToBytes();
    EXPECT_LT(bytes.size(), 4096u);
    if (write != nullptr && std::string(write) == "1") {
      ASSERT_TRUE(writer.Write((dir / name).string()).ok());
    }
    EXPECT_TRUE(ReadFileBytes((dir / name).string()) == bytes)
        << (dir / name)
        << " differs from its builder; run with RL_WRITE_GGUF_SEEDS=1 to "
           "refresh";
    EXPECT_TRUE(GgufFile::Parse(bytes, /*require_supported_types=*/false).ok());
  }
}

}  // namespace
}  // namespace redline::model::gguf

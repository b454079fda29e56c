// Hostile GGUF inputs: a table of files made by mutating one valid file, every
// truncation, single-byte corruptions, hand-built pathological files and
// metadata over the MetadataLimits. Each must fail cleanly with the expected
// code and a message naming the problem, never crash, hang, read out of
// bounds (run under ASan to check that) or allocate out of proportion.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/gguf/gguf.h"
#include "model/gguf/gguf_test_util.h"
#include "model/gguf/gguf_writer.h"

namespace redline::model::gguf {
namespace {

using ::testing::HasSubstr;
using testing::PatternFill;
using testing::RawBytes;

// The valid file every mutation starts from (alignment 64):
//   metadata 0 general.architecture = "llama"
//            1 tokenizer.ggml.tokens = ["a", "b", "c"]
//            2 dup.aaaa = 1, 3 dup.bbbb = 2 (uint32)
//            4 general.alignment = 64
//   tensors  blk.0.attn_q.weight   F32  {32, 2}  256 bytes at 0
//            blk.0.attn_k.weight   Q8_0 {64, 1}   68 bytes at 256
//            blk.0.ffn_down.weight F32  {32}     128 bytes at 384
std::vector<uint8_t> BaseFile() {
  GgufWriter w;
  w.Set("general.architecture", Value::Str("llama"));
  w.Set("tokenizer.ggml.tokens", Value::StrArray({"a", "b", "c"}));
  w.Set("dup.aaaa", Value::U32(1));
  w.Set("dup.bbbb", Value::U32(2));
  w.SetAlignment(64);
  w.AddTensor("blk.0.attn_q.weight", TensorType::kF32, {32, 2}, PatternFill(1));
  w.AddTensor("blk.0.attn_k.weight", TensorType::kQ8_0, {64, 1},
              PatternFill(2));
  w.AddTensor("blk.0.ffn_down.weight", TensorType::kF32, {32}, PatternFill(3));
  return w.WriteToBytes();
}

// Offset of the first GGUF string `s` (its length field) in `bytes`.
size_t FindString(const std::vector<uint8_t>& bytes, std::string_view s) {
  RawBytes enc;
  enc.Str(s);
  auto it = std::search(bytes.begin(), bytes.end(), enc.bytes().begin(),
                        enc.bytes().end());
  if (it == bytes.end()) {
    ADD_FAILURE() << "string not found: " << s;
    return 0;
  }
  return static_cast<size_t>(it - bytes.begin());
}

// Offset just after the string `s` (a key's value type, a tensor's n_dims).
size_t After(const std::vector<uint8_t>& bytes, std::string_view s) {
  return FindString(bytes, s) + 8 + s.size();
}

// Field positions of a tensor info whose shape has `n_dims` dims.
struct TensorFields {
  size_t n_dims, dims, type, offset;
};
TensorFields FieldsOf(const std::vector<uint8_t>& bytes, std::string_view name,
                      size_t n_dims) {
  const size_t p = After(bytes, name);
  return {p, p + 4, p + 4 + 8 * n_dims, p + 8 + 8 * n_dims};
}

void PutU32(std::vector<uint8_t>& b, size_t pos, uint32_t v) {
  std::memcpy(&b[pos], &v, 4);
}
void PutU64(std::vector<uint8_t>& b, size_t pos, uint64_t v) {
  std::memcpy(&b[pos], &v, 8);
}

constexpr const char* kQ = "blk.0.attn_q.weight";
constexpr const char* kK = "blk.0.attn_k.weight";
constexpr const char* kDown = "blk.0.ffn_down.weight";

struct HostileCase {
  std::string name;
  std::function<void(std::vector<uint8_t>&)> mutate;
  std::optional<StatusCode> code;  // nullopt: any error
  std::string message;             // substring ("" for any)
  bool exact = false;              // message must equal, not contain
  bool require_supported = true;
};

// Each row changes one field of BaseFile().
const std::vector<HostileCase>& HostileCases() {
  static const auto* cases = new std::vector<HostileCase>{
      {"bad_magic", [](auto& b) { b[0] = 'X'; }, StatusCode::kInvalidArgument,
       "not a GGUF file: magic is 'XGUF', expected 'GGUF'"},
      {"version_1", [](auto& b) { PutU32(b, 4, 1); },
       StatusCode::kUnimplemented, "GGUF version 1 is not supported"},
      {"version_4", [](auto& b) { PutU32(b, 4, 4); },
       StatusCode::kUnimplemented, "unsupported GGUF version 4 (only 2 and 3)"},
      {"version_0", [](auto& b) { PutU32(b, 4, 0); },
       StatusCode::kUnimplemented, "unsupported GGUF version 0"},
      {"big_endian", [](auto& b) { PutU32(b, 4, 0x03000000u); },
       StatusCode::kUnimplemented, "big-endian GGUF file"},
      {"tensor_count_2e40", [](auto& b) { PutU64(b, 8, uint64_t{1} << 40); },
       StatusCode::kDataLoss,
       "header: tensor count 1099511627776 exceeds the file"},
      {"tensor_count_max", [](auto& b) { PutU64(b, 8, ~uint64_t{0}); },
       StatusCode::kDataLoss,
       "tensor count 18446744073709551615 exceeds the file"},
      {"kv_count_2e60", [](auto& b) { PutU64(b, 16, uint64_t{1} << 60); },
       StatusCode::kDataLoss,
       "header: metadata count 1152921504606846976 exceeds the file"},
      {"kv_count_plus_one", [](auto& b) { PutU64(b, 16, 6); }, std::nullopt,
       ""},
      {"tensor_count_plus_one", [](auto& b) { PutU64(b, 8, 4); }, std::nullopt,
       ""},
      {"key_length_2e63", [](auto& b) { PutU64(b, 24, uint64_t{1} << 63); },
       StatusCode::kDataLoss,
       "metadata key 0: key of 9223372036854775808 bytes at byte 24 exceeds "
       "the file"},
      {"string_length_2e63",
       [](auto& b) {
         PutU64(b, After(b, "general.architecture") + 4, uint64_t{1} << 63);
       },
       StatusCode::kDataLoss,
       "metadata key 0 ('general.architecture'): string of 9223372036854775808 "
       "bytes at byte"},
      {"string_length_plus_one",
       [](auto& b) { PutU64(b, After(b, "general.architecture") + 4, 6); },
       std::nullopt, ""},
      {"array_count_2e60",
       [](auto& b) {
         PutU64(b, After(b, "tokenizer.ggml.tokens") + 8, uint64_t{1} << 60);
       },
       StatusCode::kDataLoss,
       "metadata key 1 ('tokenizer.ggml.tokens'): array of 1152921504606846976 "
       "elements exceeds the file"},
      {"array_count_plus_one",
       [](auto& b) { PutU64(b, After(b, "tokenizer.ggml.tokens") + 8, 4); },
       std::nullopt, ""},
      {"array_string_length_2e62",
       [](auto& b) { PutU64(b, FindString(b, "b"), uint64_t{1} << 62); },
       StatusCode::kDataLoss,
       "metadata key 1 ('tokenizer.ggml.tokens'): array element 1: string of "
       "4611686018427387904"},
      {"unknown_value_type_13",
       [](auto& b) { PutU32(b, After(b, "dup.aaaa"), 13); },
       StatusCode::kInvalidArgument,
       "metadata key 2 ('dup.aaaa'): unknown value type 13 at byte"},
      {"unknown_value_type_max",
       [](auto& b) { PutU32(b, After(b, "dup.aaaa"), 0xffffffffu); },
       StatusCode::kInvalidArgument, "unknown value type 4294967295"},
      {"unknown_array_element_type",
       [](auto& b) { PutU32(b, After(b, "tokenizer.ggml.tokens") + 4, 13); },
       StatusCode::kInvalidArgument,
       "metadata key 1 ('tokenizer.ggml.tokens'): unknown array element type "
       "13"},
      {"duplicate_key",
       [](auto& b) {
         std::memcpy(&b[FindString(b, "dup.bbbb") + 8], "dup.aaaa", 8);
       },
       StatusCode::kInvalidArgument, "metadata key 3 ('dup.aaaa') at byte"},
      {"duplicate_key_says_first",
       [](auto& b) {
         std::memcpy(&b[FindString(b, "dup.bbbb") + 8], "dup.aaaa", 8);
       },
       StatusCode::kInvalidArgument,
       "duplicate key (first seen as metadata key 2)"},
      {"alignment_0",
       [](auto& b) { PutU32(b, After(b, "general.alignment") + 4, 0); },
       StatusCode::kInvalidArgument,
       "general.alignment is 0; it must be a power of two"},
      {"alignment_48",
       [](auto& b) { PutU32(b, After(b, "general.alignment") + 4, 48); },
       StatusCode::kInvalidArgument, "general.alignment is 48"},
      {"alignment_2e30",
       [](auto& b) { PutU32(b, After(b, "general.alignment") + 4, 1u << 30); },
       StatusCode::kInvalidArgument, "general.alignment is 1073741824"},
      {"alignment_float",
       [](auto& b) { PutU32(b, After(b, "general.alignment"), 6); },
       StatusCode::kInvalidArgument,
       "general.alignment is float32, expected an integer"},
      {"tensor_name_length_2e63",
       [](auto& b) { PutU64(b, FindString(b, kQ), uint64_t{1} << 63); },
       StatusCode::kDataLoss,
       "tensor info 0: name of 9223372036854775808 bytes"},
      {"n_dims_5", [](auto& b) { PutU32(b, FieldsOf(b, kQ, 2).n_dims, 5); },
       StatusCode::kInvalidArgument,
       "tensor info 0 ('blk.0.attn_q.weight'): n_dims is 5 at byte"},
      {"n_dims_0", [](auto& b) { PutU32(b, FieldsOf(b, kQ, 2).n_dims, 0); },
       StatusCode::kInvalidArgument, "n_dims is 0"},
      {"n_dims_max",
       [](auto& b) { PutU32(b, FieldsOf(b, kQ, 2).n_dims, 0xffffffffu); },
       StatusCode::kInvalidArgument, "n_dims is 4294967295"},
      {"zero_dim", [](auto& b) { PutU64(b, FieldsOf(b, kQ, 2).dims + 8, 0); },
       StatusCode::kInvalidArgument, "dimension 1 is 0 at byte"},
      {"negative_dim",
       [](auto& b) { PutU64(b, FieldsOf(b, kQ, 2).dims, ~uint64_t{0}); },
       StatusCode::kInvalidArgument, "dimension 0 is -1"},
      {"dim_overflow",
       [](auto& b) {
         PutU64(b, FieldsOf(b, kQ, 2).dims + 8, uint64_t{1} << 62);
       },
       StatusCode::kInvalidArgument,
       "shape [32, 4611686018427387904] overflows int64 elements"},
      {"byte_size_overflow",
       [](auto& b) {
         PutU64(b, FieldsOf(b, kQ, 2).dims + 8, uint64_t{1} << 57);
       },
       StatusCode::kInvalidArgument, "overflows the byte size"},
      {"tensor_bigger_than_file",
       [](auto& b) {
         PutU64(b, FieldsOf(b, kQ, 2).dims + 8, uint64_t{1} << 20);
       },
       StatusCode::kDataLoss,
       "tensor 'blk.0.attn_q.weight' (134217728 bytes at data offset 0) "
       "extends past the end"},
      {"offset_out_of_file",
       [](auto& b) {
         PutU64(b, FieldsOf(b, kDown, 1).offset, uint64_t{1} << 40);
       },
       StatusCode::kDataLoss,
       "tensor 'blk.0.ffn_down.weight' (128 bytes at data offset "
       "1099511627776) extends past"},
      {"offset_wraps",
       [](auto& b) { PutU64(b, FieldsOf(b, kDown, 1).offset, ~uint64_t{63}); },
       StatusCode::kDataLoss, "extends past the end of the file"},
      {"offset_just_past_end",
       [](auto& b) { PutU64(b, FieldsOf(b, kDown, 1).offset, 448); },
       StatusCode::kDataLoss, "extends past the end of the file"},
      {"misaligned_offset",
       [](auto& b) { PutU64(b, FieldsOf(b, kDown, 1).offset, 384 + 32); },
       StatusCode::kInvalidArgument,
       "tensor 'blk.0.ffn_down.weight': offset 416 is not a multiple of the "
       "alignment 64"},
      {"overlapping_tensors",
       [](auto& b) { PutU64(b, FieldsOf(b, kK, 2).offset, 192); },
       StatusCode::kInvalidArgument,
       "tensors 'blk.0.attn_q.weight' (data bytes 0 to 256) and "
       "'blk.0.attn_k.weight' (from data byte 192) overlap"},
      {"same_offset",
       [](auto& b) { PutU64(b, FieldsOf(b, kDown, 1).offset, 0); },
       StatusCode::kInvalidArgument, "overlap"},
      {"unsupported_type_iq2xs",
       [](auto& b) { PutU32(b, FieldsOf(b, kDown, 1).type, 17); },
       StatusCode::kUnimplemented,
       "tensor blk.0.ffn_down.weight has type IQ2_XS, not supported yet",
       /*exact=*/true},
      {"unsupported_type_q8k",
       [](auto& b) { PutU32(b, FieldsOf(b, kQ, 2).type, 15); },
       StatusCode::kUnimplemented,
       "tensor blk.0.attn_q.weight has type Q8_K, not supported yet",
       /*exact=*/true},
      {"supported_q4k_row_shorter_than_its_block",
       [](auto& b) { PutU32(b, FieldsOf(b, kDown, 1).type, 12); },
       StatusCode::kInvalidArgument,
       "dims[0] = 32 is not a multiple of the Q4_K block size 256"},
      {"unsupported_type_q4k_not_required",
       [](auto& b) { PutU32(b, FieldsOf(b, kDown, 1).type, 12); },
       StatusCode::kInvalidArgument,
       "dims[0] = 32 is not a multiple of the Q4_K block size 256", false,
       /*require_supported=*/false},
      {"unknown_tensor_type_77",
       [](auto& b) { PutU32(b, FieldsOf(b, kDown, 1).type, 77); },
       StatusCode::kInvalidArgument,
       "tensor info 2 ('blk.0.ffn_down.weight'): unknown tensor type 77 at "
       "byte"},
      {"removed_tensor_type_4",
       [](auto& b) { PutU32(b, FieldsOf(b, kDown, 1).type, 4); },
       StatusCode::kInvalidArgument, "unknown tensor type 4", false,
       /*require_supported=*/false},
      {"block_size_mismatch",
       [](auto& b) { PutU64(b, FieldsOf(b, kK, 2).dims, 48); },
       StatusCode::kInvalidArgument,
       "dims[0] = 48 is not a multiple of the Q8_0 block size 32"},
      {"duplicate_tensor_name",
       [](auto& b) {
         std::memcpy(&b[FindString(b, kK) + 8], kQ, std::strlen(kQ));
       },
       StatusCode::kInvalidArgument,
       "tensor info 1 ('blk.0.attn_q.weight'): duplicate tensor name (first "
       "seen as tensor info 0)"},
      {"truncated_in_tensor_data", [](auto& b) { b.resize(b.size() - 1); },
       StatusCode::kDataLoss, "file truncated: tensor 'blk.0.ffn_down.weight'"},
      {"truncated_in_header", [](auto& b) { b.resize(20); },
       StatusCode::kDataLoss,
       "file truncated: header metadata count at byte 16 needs 8 bytes, only 4 "
       "remain"},
      {"truncated_in_tensor_info",
       [](auto& b) { b.resize(FieldsOf(b, kDown, 1).offset + 2); },
       StatusCode::kDataLoss,
       "tensor info 2 ('blk.0.ffn_down.weight'): file truncated: offset at "
       "byte ",
       false},
      {"truncated_in_tensor_info_says_remaining",
       [](auto& b) { b.resize(FieldsOf(b, kDown, 1).offset + 2); },
       StatusCode::kDataLoss, "needs 8 bytes, only 2 remain", false},
      {"empty", [](auto& b) { b.clear(); }, StatusCode::kDataLoss,
       "too small for a GGUF header"},
  };
  return *cases;
}

class GgufHostileTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(GgufHostileTest, FailsCleanly) {
  const HostileCase& c = GetParam();
  std::vector<uint8_t> bytes = BaseFile();
  c.mutate(bytes);
  // Exact-size heap copy so ASan flags any read past the end.
  const std::vector<uint8_t> exact(bytes.begin(), bytes.end());
  Result<GgufFile> f = GgufFile::Parse(exact, c.require_supported);
  ASSERT_FALSE(f.ok()) << "parsed a hostile file";
  if (c.code) {
    EXPECT_EQ(f.status().code(), *c.code) << f.status().ToString();
  }
  if (c.exact) {
    EXPECT_EQ(f.status().message(), c.message);
  } else {
    EXPECT_THAT(f.status().message(), HasSubstr(c.message));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, GgufHostileTest,
                         ::testing::ValuesIn(HostileCases()),
                         [](const auto& info) { return info.param.name; });

TEST(GgufHostileTest, BaseFileIsValid) {
  const std::vector<uint8_t> bytes = BaseFile();
  Result<GgufFile> f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensors()[1].offset, 256u);
  EXPECT_EQ(f->tensors()[2].offset, 384u);
  EXPECT_EQ(bytes.size(), f->data_offset() + 512);
  // A v2 file is the same layout.
  std::vector<uint8_t> v2 = bytes;
  PutU32(v2, 4, 2);
  Result<GgufFile> f2 = GgufFile::Parse(v2);
  ASSERT_TRUE(f2.ok()) << f2.status().ToString();
  EXPECT_EQ(f2->version(), 2u);
}

// Cutting the file anywhere before the end of the last tensor fails with
// DataLoss; cutting only trailing padding is fine.
TEST(GgufHostileTest, TruncatedAtEveryByte) {
  for (const auto& [name, writer] : testing::SeedWriters()) {
    const std::vector<uint8_t> bytes = writer.WriteToBytes();
    Result<GgufFile> full = GgufFile::Parse(bytes, false);
    ASSERT_TRUE(full.ok()) << name;
    uint64_t needed = 0;
    for (const TensorInfo& t : full->tensors())
      needed = std::max(needed, full->data_offset() + t.offset + t.size_bytes);
    if (full->tensors().empty())
      needed = full->data_offset();  // upper bound on the last metadata byte
    for (size_t n = 0; n < bytes.size(); ++n) {
      const std::vector<uint8_t> prefix(
          bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      for (bool require : {false, true}) {
        Result<GgufFile> f = GgufFile::Parse(prefix, require);
        if (n >= needed) continue;  // may or may not parse; must not crash
        if (!full->tensors().empty() || n + full->alignment() <= needed) {
          // Only the padding after the metadata of a vocab-only file may go.
          ASSERT_FALSE(f.ok()) << name << " cut at " << n;
        }
        if (!f.ok() && f.status().code() != StatusCode::kUnimplemented) {
          EXPECT_EQ(f.status().code(), StatusCode::kDataLoss)
              << name << " cut at " << n << ": " << f.status().ToString();
        }
      }
    }
  }
}

// Every single-byte corruption of every seed either parses into tensors
// inside the buffer or fails; nothing crashes.
TEST(GgufHostileTest, SingleByteCorruptions) {
  int accepted = 0;
  int rejected = 0;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> files = {
      {"base", BaseFile()}};
  for (const auto& [name, writer] : testing::SeedWriters())
    files.emplace_back(name, writer.WriteToBytes());
  for (const auto& [name, original] : files) {
    for (size_t i = 0; i < original.size(); ++i) {
      for (int variant = 0; variant < 4; ++variant) {
        std::vector<uint8_t> bytes = original;
        const uint8_t b = bytes[i];
        bytes[i] = variant == 0   ? 0x00
                   : variant == 1 ? 0xff
                   : variant == 2 ? b ^ 0x01
                                  : b ^ 0x80;
        if (bytes[i] == b) continue;
        for (bool require : {false, true}) {
          Result<GgufFile> f = GgufFile::Parse(bytes, require);
          if (!f.ok()) {
            ++rejected;
            EXPECT_FALSE(f.status().message().empty());
            continue;
          }
          ++accepted;
          for (const TensorInfo& t : f->tensors()) {
            ASSERT_GE(t.data, bytes.data());
            ASSERT_LE(t.data + t.size_bytes, bytes.data() + bytes.size())
                << name << " byte " << i;
          }
        }
      }
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);  // e.g. flips inside tensor data
}

TEST(GgufHostileTest, HeaderOnlyFileIsValid) {
  RawBytes b;
  b.Header(3, 0, 0);
  Result<GgufFile> f = GgufFile::Parse(b.bytes());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
}

// `levels` nested array headers of one element each around a single uint8.
std::vector<uint8_t> NestedArrays(int levels) {
  RawBytes b;
  b.Header(3, 0, 1).Str("nested").U32(static_cast<uint32_t>(ValueType::kArray));
  for (int i = 0; i < levels; ++i) {
    b.U32(static_cast<uint32_t>(i + 1 < levels ? ValueType::kArray
                                               : ValueType::kUint8))
        .U64(1);
  }
  b.U8(7);
  return b.bytes();
}

TEST(GgufHostileTest, ArrayNestingDepthIsLimited) {
  EXPECT_TRUE(GgufFile::Parse(NestedArrays(kMaxArrayDepth)).ok());
  Result<GgufFile> f = GgufFile::Parse(NestedArrays(kMaxArrayDepth + 1));
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr("metadata key 0 ('nested'): array element 0: "));
  EXPECT_THAT(f.status().message(),
              HasSubstr("is nested more than 8 levels deep"));
  // Deep nesting in a tiny file must not recurse without bound either.
  EXPECT_FALSE(GgufFile::Parse(NestedArrays(100000)).ok());
}

TEST(GgufHostileTest, HugeInnerArrayNamesItsPath) {
  RawBytes b;
  b.Header(3, 0, 1).Str("outer").U32(static_cast<uint32_t>(ValueType::kArray));
  b.U32(static_cast<uint32_t>(ValueType::kArray)).U64(2);  // 2 inner arrays
  b.U32(static_cast<uint32_t>(ValueType::kInt32)).U64(1).U32(5);  // [5]
  b.U32(static_cast<uint32_t>(ValueType::kString))
      .U64(uint64_t{1} << 60);  // huge
  Result<GgufFile> f = GgufFile::Parse(b.bytes());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(),
              HasSubstr("metadata key 0 ('outer'): array element 1: array of "
                        "1152921504606846976 elements exceeds"));
}

TEST(GgufHostileTest, OverlongKeyIsRejected) {
  RawBytes b;
  b.Header(3, 0, 1).Str(std::string(70000, 'k')).U32(0).U8(1);
  Result<GgufFile> f = GgufFile::Parse(b.bytes());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      f.status().message(),
      HasSubstr(
          "key of 70000 bytes at byte 24 is longer than the limit of 65535"));
}

// Metadata that fits the file but would cost far more memory than the file:
// each shape must fail within a second with a message naming the key and the
// limit, having allocated next to nothing. The big files are sparse (only the
// header is written) and opened through the memory map, as a model is.

// Peak resident memory since the last ResetPeakRss(), in bytes; -1 where
// /proc cannot tell (then the memory checks are skipped).
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}
int64_t CurrentRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}
// Writing "5" to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

struct Attempt {
  Status status;
  double seconds = 0;
  int64_t rss_growth_bytes = -1;  // -1: not measured
};

// Writes `head` to a file of `total_bytes` (the rest a hole reading as
// zeros), opens it with `options` and measures time and peak RSS growth.
Attempt OpenSparse(const std::string& name, const std::vector<uint8_t>& head,
                   uint64_t total_bytes, const OpenOptions& options = {}) {
  const std::string path = ::testing::TempDir() + "gguf_limits_" + name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(head.data()),
              static_cast<std::streamsize>(head.size()));
  }
  std::filesystem::resize_file(path,
                               std::max<uint64_t>(total_bytes, head.size()));
  Attempt a;
  const bool measure = ResetPeakRss();
  const int64_t before = CurrentRssBytes();
  const auto start = std::chrono::steady_clock::now();
  Result<GgufFile> f = GgufFile::Open(path, options);
  a.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const int64_t peak = PeakRssBytes();
  if (measure && before >= 0 && peak >= 0) a.rss_growth_bytes = peak - before;
  a.status = f.status();
  std::filesystem::remove(path);
  return a;
}

constexpr int64_t kSmallRssBytes = int64_t{16} << 20;

void ExpectFastAndSmall(const Attempt& a) {
  EXPECT_LT(a.seconds, 1.0) << a.status.ToString();
  if (a.rss_growth_bytes >= 0) {
    EXPECT_LT(a.rss_growth_bytes, kSmallRssBytes) << a.status.ToString();
  }
}

uint32_t TypeId(ValueType t) { return static_cast<uint32_t>(t); }

// Header, key "tokenizer.ggml.token_type", uint8 array of `n` elements (the
// elements themselves left to the sparse tail).
std::vector<uint8_t> U8ArrayHead(uint64_t n) {
  RawBytes b;
  b.Header(3, 0, 1).Str("tokenizer.ggml.token_type");
  b.U32(TypeId(ValueType::kArray)).U32(TypeId(ValueType::kUint8)).U64(n);
  return b.bytes();
}

TEST(GgufLimitsTest, ArrayOf16MElementsFailsFast) {
  const uint64_t n = uint64_t{1} << 24;
  const std::vector<uint8_t> head = U8ArrayHead(n);
  const Attempt a = OpenSparse("array16m", head, head.size() + n);
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("metadata key 0 ('tokenizer.ggml.token_type'): array "
                        "of 16777216 elements at byte 61 exceeds the limit of "
                        "1048576 elements per metadata array "
                        "(MetadataLimits::max_array_length)"));
  ExpectFastAndSmall(a);
}

TEST(GgufLimitsTest, ArrayAtTheLimitParses) {
  const std::vector<uint8_t> head = U8ArrayHead(kMaxMetadataArrayLength);
  const Attempt a =
      OpenSparse("array_at_limit", head, head.size() + kMaxMetadataArrayLength);
  EXPECT_TRUE(a.status.ok()) << a.status.ToString();
}

TEST(GgufLimitsTest, OptionsRaiseTheArrayLimit) {
  const uint64_t n = kMaxMetadataArrayLength + 1;
  const std::vector<uint8_t> head = U8ArrayHead(n);
  OpenOptions options;
  EXPECT_FALSE(
      OpenSparse("array_raised", head, head.size() + n, options).status.ok());
  options.limits.max_array_length = n;
  const Attempt a = OpenSparse("array_raised", head, head.size() + n, options);
  EXPECT_TRUE(a.status.ok()) << a.status.ToString();
}

TEST(GgufLimitsTest, TokenStringOf100MBFailsFast) {
  const uint64_t len = uint64_t{100} << 20;
  RawBytes b;
  b.Header(3, 0, 1).Str("tokenizer.ggml.tokens");
  b.U32(TypeId(ValueType::kArray)).U32(TypeId(ValueType::kString)).U64(2);
  b.Str("a").U64(len);
  const Attempt a = OpenSparse("token100mb", b.bytes(), b.bytes().size() + len);
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("metadata key 0 ('tokenizer.ggml.tokens'): array "
                        "element 1: string of 104857600 bytes at byte 78 is "
                        "longer than the limit of 1048576 bytes "
                        "(MetadataLimits::max_string_bytes)"));
  ExpectFastAndSmall(a);
}

// One top-level string value of `len` bytes under `key`.
std::vector<uint8_t> StringHead(std::string_view key, uint64_t len) {
  RawBytes b;
  b.Header(3, 0, 1).Str(key).U32(TypeId(ValueType::kString)).U64(len);
  return b.bytes();
}

TEST(GgufLimitsTest, ChatTemplateOver1MiBFails) {
  const uint64_t len = kMaxMetadataStringBytes + 1;
  const std::vector<uint8_t> head = StringHead("tokenizer.chat_template", len);
  const Attempt a = OpenSparse("template", head, head.size() + len);
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("metadata key 0 ('tokenizer.chat_template'): string "
                        "of 1048577 bytes at byte 59 is longer than the limit "
                        "of 1048576 bytes (MetadataLimits::max_string_bytes)"));
  ExpectFastAndSmall(a);
}

TEST(GgufLimitsTest, EmbeddedTokenizerJsonHasItsOwnLimit) {
  const uint64_t len = uint64_t{8} << 20;  // a 128k-token tokenizer.json
  std::vector<uint8_t> head = StringHead("tokenizer.huggingface.json", len);
  EXPECT_TRUE(OpenSparse("hf_json", head, head.size() + len).status.ok());
  const uint64_t over = kMaxMetadataDocumentBytes + 1;
  head = StringHead("tokenizer.huggingface.json", over);
  const Attempt a = OpenSparse("hf_json_over", head, head.size() + over);
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("string of 67108865 bytes at byte 62 is longer than "
                        "the limit of 67108864 bytes "
                        "(MetadataLimits::max_document_bytes)"));
  ExpectFastAndSmall(a);
}

// Arrays each within the per-array limit, over the file's total: the first
// pass sees it before any array is built.
TEST(GgufLimitsTest, TotalArrayElementsFailFast) {
  const uint64_t n = kMaxMetadataArrayLength;
  const int arrays = 5;
  RawBytes b;
  b.Header(3, 0, arrays);
  for (int i = 0; i < arrays; ++i) {
    b.Str("array." + std::to_string(i));
    b.U32(TypeId(ValueType::kArray)).U32(TypeId(ValueType::kUint8)).U64(n);
    b.Bytes(n, 0);
  }
  const std::vector<uint8_t>& bytes = b.bytes();
  const Attempt a = OpenSparse("total_elements", bytes, bytes.size());
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("metadata key 4 ('array.4'): array of 1048576 "
                        "elements at byte"));
  EXPECT_THAT(a.status.message(),
              HasSubstr("exceeds the limit of 4194304 metadata array elements "
                        "in total (MetadataLimits::max_array_elements)"));
  ExpectFastAndSmall(a);
}

// 300 strings of 1 MiB: each within its limit, 300 MiB of metadata in all.
TEST(GgufLimitsTest, TotalMetadataBytesFailFast) {
  const uint64_t len = kMaxMetadataStringBytes;
  const int keys = 300;
  // Sparse: write each pair's header, skip its bytes with a hole.
  const std::string path = ::testing::TempDir() + "gguf_limits_total_bytes";
  uint64_t end = 0;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    RawBytes header;
    header.Header(3, 0, keys);
    out.write(reinterpret_cast<const char*>(header.bytes().data()),
              static_cast<std::streamsize>(header.bytes().size()));
    end = header.bytes().size();
    for (int i = 0; i < keys; ++i) {
      RawBytes kv;
      kv.Str(fmt::format("general.note.{:03}", i))
          .U32(TypeId(ValueType::kString))
          .U64(len);
      out.seekp(static_cast<std::streamoff>(end));
      out.write(reinterpret_cast<const char*>(kv.bytes().data()),
                static_cast<std::streamsize>(kv.bytes().size()));
      end += kv.bytes().size() + len;
    }
  }
  std::filesystem::resize_file(path, end);
  const bool measure = ResetPeakRss();
  const int64_t before = CurrentRssBytes();
  const auto start = std::chrono::steady_clock::now();
  Result<GgufFile> f = GgufFile::Open(path);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const int64_t peak = PeakRssBytes();
  std::filesystem::remove(path);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr("metadata key 255 ('general.note.255'): the metadata "
                        "up to byte"));
  EXPECT_THAT(f.status().message(),
              HasSubstr("over the limit of 268435456 bytes "
                        "(MetadataLimits::max_metadata_bytes)"));
  EXPECT_LT(seconds, 1.0);
  if (measure && before >= 0 && peak >= 0) {
    EXPECT_LT(peak - before, kSmallRssBytes);
  }
}

TEST(GgufLimitsTest, KeyAndTensorCountsAreLimited) {
  const uint64_t n = kMaxMetadataKeys + 1;
  RawBytes keys;
  keys.Header(3, 0, n);
  Attempt a = OpenSparse("keys", keys.bytes(), 24 + n * 13);
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("header: metadata count 65537 exceeds the limit of "
                        "65536 keys (MetadataLimits::max_keys)"));
  ExpectFastAndSmall(a);
  RawBytes tensors;
  tensors.Header(3, kMaxTensors + 1, 0);
  a = OpenSparse("tensors", tensors.bytes(), 24 + (kMaxTensors + 1) * 32);
  EXPECT_EQ(a.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status.message(),
              HasSubstr("header: tensor count 65537 exceeds the limit of "
                        "65536 tensors (MetadataLimits::max_tensors)"));
  ExpectFastAndSmall(a);
}

TEST(GgufLimitsTest, OptionsLowerTheStringLimit) {
  RawBytes b;
  b.Header(3, 0, 1).Str("general.name").U32(TypeId(ValueType::kString));
  b.Str("a longer name");
  OpenOptions options;
  EXPECT_TRUE(GgufFile::Parse(b.bytes(), options).ok());
  options.limits.max_string_bytes = 4;
  Result<GgufFile> f = GgufFile::Parse(b.bytes(), options);
  EXPECT_THAT(f.status().message(),
              HasSubstr("metadata key 0 ('general.name'): string of 13 bytes "
                        "at byte 48 is longer than the limit of 4 bytes"));
}

// A file with a nested array whose inner arrays share the element budget.
TEST(GgufLimitsTest, NestedArraysShareTheElementBudget) {
  RawBytes b;
  b.Header(3, 0, 1).Str("outer").U32(TypeId(ValueType::kArray));
  b.U32(TypeId(ValueType::kArray)).U64(3);
  for (int i = 0; i < 3; ++i)
    b.U32(TypeId(ValueType::kUint8)).U64(2).U8(1).U8(2);
  OpenOptions options;
  EXPECT_TRUE(GgufFile::Parse(b.bytes(), options).ok());
  options.limits.max_array_elements = 3 + 2 * 3 - 1;
  Result<GgufFile> f = GgufFile::Parse(b.bytes(), options);
  EXPECT_THAT(f.status().message(),
              HasSubstr("array element 2: array of 2 elements"));
  EXPECT_THAT(f.status().message(), HasSubstr("in total"));
}

// The writer refuses what the reader would, so make-model never writes a file
// it cannot open.
TEST(GgufLimitsTest, WriterKeepsToTheLimits) {
  GgufWriter strings;
  strings.Set("tokenizer.chat_template",
              Value::Str(std::string(kMaxMetadataStringBytes + 1, 'x')));
  EXPECT_THAT(strings.Validate().message(),
              HasSubstr("metadata key 'tokenizer.chat_template': string of "
                        "1048577 bytes is longer than the reader's limit of "
                        "1048576"));
  GgufWriter document;
  document.Set("tokenizer.huggingface.json",
               Value::Str(std::string(kMaxMetadataStringBytes + 1, 'x')));
  EXPECT_TRUE(document.Validate().ok());
  GgufWriter arrays;
  arrays.Set("tokenizer.ggml.token_type",
             Value::ArrayOf(ValueType::kUint8,
                            Array(kMaxMetadataArrayLength + 1, Value::U8(1))));
  EXPECT_THAT(arrays.Validate().message(),
              HasSubstr("array of 1048577 elements is longer than the "
                        "reader's limit of 1048576"));
}

TEST(GgufHostileTest, BoolsOtherThanZeroOrOneReadAsTrue) {
  RawBytes b;
  b.Header(3, 0, 1).Str("b").U32(static_cast<uint32_t>(ValueType::kBool)).U8(2);
  Result<GgufFile> f = GgufFile::Parse(b.bytes());
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(*f->GetBool("b"));
}

TEST(GgufHostileTest, ShortFiles) {
  using std::string_view_literals::operator""sv;
  for (std::string_view s :
       {""sv, "G"sv, "GGU"sv, "GGUF"sv, "GGUF\x03"sv, "GGUF\x03\0\0\0"sv}) {
    const std::vector<uint8_t> bytes(s.begin(), s.end());
    Result<GgufFile> f = GgufFile::Parse(bytes);
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << s.size();
  }
  const std::vector<uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  EXPECT_THAT(GgufFile::Parse(elf).status().message(),
              HasSubstr("magic is '\\x7fELF'"));
}

}  // namespace
}  // namespace redline::model::gguf

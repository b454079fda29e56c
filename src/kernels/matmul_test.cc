// MatMul, QuantizeRow and DequantizeRow on every ISA this CPU runs x every
// weight type, against the scalar reference (kernels/ref) and against plain
// float products.
//
// Tolerances are stated relative to the "magnitude" of an output,
// m = sum_c |w[r, c] * x[t, c]| (the sum of absolute terms), which bounds
// any summation-order error:
//   SIMD vs ref, every type: 1e-5 * m. Float types convert weights exactly
//     in both; quantized types quantize x bit-identically and take exact
//     integer block dots, so only f32 summation order differs. AVX-512
//     quantized kernels accumulate blocks in the reference's order (one fma
//     per block, as ggml's AMX/VNNI kernels do) and must match it exactly.
//   Quantized vs float product of dequantized weights and unrounded x:
//     sum_c |w_c| * 0.6 * d_x(c) (x rounding is at most d_x / 2, plus the
//     fp16 rounding of the stored scale, 127 * 2^-11 * d_x) + 1e-5 * m.
//   Against the original f32 weights (quantization error of the weights):
//     F16 1e-3 * m, BF16 8e-3 * m, Q8_0 2e-2 * m, Q4_0 0.2 * m.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/float16.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"
#include "kernels/packed.h"

namespace redline::kernels {
namespace {

// Restores the ISA that was active before the test.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : saved_(ActiveIsa()) {
    EXPECT_TRUE(SetActiveIsa(isa));
  }
  ~ScopedIsa() { SetActiveIsa(saved_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa saved_;
};

// Types QuantizeRow can write; the other block types get random blocks.
bool HasQuantizer(DType type) {
  return !IsQuantized(type) || type == DType::kQ8_0 || type == DType::kQ4_0;
}

// Types with a packed layout (packed.h).
bool Packable(DType type) {
  return type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_1 ||
         type == DType::kIQ4_NL || type == DType::kQ5_0 ||
         type == DType::kQ5_1 || type == DType::kQ2_K || type == DType::kQ3_K ||
         type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K ||
         type == DType::kF16 || type == DType::kBF16;
}

// Whether `isa`'s products read the packed layout of `type`: AVX2 and up.
bool PackedOn(DType type, Isa isa) {
  return Packable(type) && isa >= Isa::kAvx2;
}

// Where the AVX-512 kernels take the reference's operations in its order
// exactly: Q8_0/Q4_0 in both layouts, Q4_1/IQ4_NL/Q5_0/Q5_1 in panels.
bool AvxExact(DType type, bool packed) {
  return type == DType::kQ8_0 || type == DType::kQ4_0 ||
         (packed && (type == DType::kQ4_1 || type == DType::kIQ4_NL ||
                     type == DType::kQ5_0 || type == DType::kQ5_1));
}

// n rounded up to a whole number of the type's blocks.
int64_t ColsFor(DType type, int64_t n) {
  const int64_t b = BlockElements(type);
  return (n + b - 1) / b * b;
}

// Byte offsets of the fp16 scale fields of each block type, and whether
// the field is a signed min (Q4_1/Q5_1 m) rather than a positive scale.
struct ScaleField {
  size_t offset;
  bool signed_min;
};
std::vector<ScaleField> ScaleFields(DType type) {
  switch (type) {
    case DType::kQ4_1:
      return {{offsetof(BlockQ4_1, d), false}, {offsetof(BlockQ4_1, m), true}};
    case DType::kQ5_0:
      return {{offsetof(BlockQ5_0, d), false}};
    case DType::kQ5_1:
      return {{offsetof(BlockQ5_1, d), false}, {offsetof(BlockQ5_1, m), true}};
    case DType::kIQ4_NL:
      return {{offsetof(BlockIQ4_NL, d), false}};
    case DType::kQ2_K:
      return {{offsetof(BlockQ2_K, d), false},
              {offsetof(BlockQ2_K, dmin), false}};
    case DType::kQ3_K:
      return {{offsetof(BlockQ3_K, d), false}};
    case DType::kQ4_K:
      return {{offsetof(BlockQ4_K, d), false},
              {offsetof(BlockQ4_K, dmin), false}};
    case DType::kQ5_K:
      return {{offsetof(BlockQ5_K, d), false},
              {offsetof(BlockQ5_K, dmin), false}};
    case DType::kQ6_K:
      return {{offsetof(BlockQ6_K, d), false}};
    default:
      return {};
  }
}

// Random blocks of `type` (random quant bits and sub-block scales) whose
// fp16 scales keep dequantized weights around [-1, 1]: scale fields get
// `unit` times a factor in [0.5, 1.5) (a signed min in [-1, 1)).
std::vector<uint8_t> RandomBlocks(DType type, int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * BlockBytes(type)));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const bool k_quant = BlockElements(type) == kQkSuper;
  // Largest |q| times the largest sub-block scale the type stores.
  const float unit = type == DType::kQ6_K     ? 1.0f / (32 * 128)
                     : type == DType::kQ3_K   ? 1.0f / (4 * 32)
                     : type == DType::kQ2_K   ? 1.0f / (3 * 15)
                     : k_quant                ? 1.0f / (31 * 63)
                     : type == DType::kIQ4_NL ? 1.0f / 127
                                              : 1.0f / 16;
  std::uniform_real_distribution<float> factor(0.5f, 1.5f);
  std::uniform_real_distribution<float> min(-1.0f, 1.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (const ScaleField& f : ScaleFields(type)) {
      const uint16_t h =
          Fp32ToFp16(f.signed_min ? min(rng) : unit * factor(rng));
      std::memcpy(bytes.data() + b * BlockBytes(type) + f.offset, &h, 2);
    }
  }
  return bytes;
}

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// A weight matrix in `type` built from random floats, with its dequantized
// values.
struct TestMatrix {
  DType type;
  int64_t rows, cols;
  std::vector<float> original;     // [rows, cols] before quantization
  std::vector<uint8_t> bytes;      // [rows, RowBytes]
  std::vector<float> dequantized;  // [rows, cols]
  std::vector<uint8_t> packed;     // PackedBytes; empty for float types

  // With the packed copy, so ISAs with packed kernels use them.
  WeightView View() const {
    return WeightView{type, rows, cols, bytes.data(),
                      packed.empty() ? nullptr : packed.data()};
  }
  // The row layout only.
  WeightView RowView() const {
    return WeightView{type, rows, cols, bytes.data()};
  }
};

// Fills m->packed from m->bytes (quantized types), in two calls to check
// that panel ranges compose.
void Pack(TestMatrix* m) {
  if (!Packable(m->type)) return;
  m->packed.assign(static_cast<size_t>(PackedBytes(m->type, m->rows, m->cols)),
                   0xcd);
  const int64_t panels = PackedPanels(m->rows);
  PackWeights(m->RowView(), 0, panels / 2, m->packed.data());
  PackWeights(m->RowView(), panels / 2, panels, m->packed.data());
}

TestMatrix MakeMatrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m{type, rows, cols, RandomFloats(rows * cols, seed), {}, {}, {}};
  // Vary the row scales so per-block scales differ.
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      m.original[r * cols + c] *= 0.25f + 0.1f * static_cast<float>(r % 13);
  }
  const int64_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(static_cast<size_t>(rows * row_bytes));
  m.dequantized.resize(static_cast<size_t>(rows * cols));
  if (HasQuantizer(type)) {
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(type, m.original.data() + r * cols, cols,
                  m.bytes.data() + r * row_bytes);
    }
  } else {
    m.bytes = RandomBlocks(type, rows * cols / BlockElements(type), seed);
  }
  const WeightView view = m.View();
  for (int64_t r = 0; r < rows; ++r)
    DequantizeRow(view, r, m.dequantized.data() + r * cols);
  if (!HasQuantizer(type)) m.original = m.dequantized;
  Pack(&m);
  return m;
}

std::vector<float> RunMatMul(const TestMatrix& m, const std::vector<float>& x,
                             int64_t n_tokens, ThreadPool& pool,
                             size_t scratch_offset = 0, bool packed = true) {
  std::vector<float> y(static_cast<size_t>(n_tokens * m.rows), std::nanf(""));
  std::vector<std::byte> scratch(MatMulScratchBytes(m.type, m.cols, n_tokens) +
                                 scratch_offset);
  MatMul(packed ? m.View() : m.RowView(), x.data(), n_tokens, y.data(),
         std::span<std::byte>(scratch).subspan(scratch_offset), pool);
  return y;
}

// sum_c |w[r, c] * x[t, c]|
double Magnitude(const std::vector<float>& w, const std::vector<float>& x,
                 int64_t cols, int64_t r, int64_t t) {
  double m = 0.0;
  for (int64_t c = 0; c < cols; ++c)
    m += std::fabs(static_cast<double>(w[r * cols + c]) * x[t * cols + c]);
  return m;
}

double Dot(const std::vector<float>& w, const std::vector<float>& x,
           int64_t cols, int64_t r, int64_t t) {
  double s = 0.0;
  for (int64_t c = 0; c < cols; ++c)
    s += static_cast<double>(w[r * cols + c]) * x[t * cols + c];
  return s;
}

// Bound on |(w . x_quantized) - (w . x)| from rounding x to Q8_0.
double ActivationRoundingBound(const std::vector<float>& w,
                               const std::vector<float>& x, int64_t cols,
                               int64_t r, int64_t t) {
  double bound = 0.0;
  for (int64_t b = 0; b < cols / kQkBlock; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < kQkBlock; ++j)
      amax = std::fmax(amax, std::fabs(x[t * cols + b * kQkBlock + j]));
    const double d = amax / 127.0;
    for (int j = 0; j < kQkBlock; ++j)
      bound += std::fabs(w[r * cols + b * kQkBlock + j]) * 0.6 * d;
  }
  return bound;
}

// x rounded to binary16 with the conversions of base/float16.h, finite
// values saturated at +-65504: what MatMul documents for F16 weights.
std::vector<float> RoundedToF16(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] =
        Fp16ToFp32(Fp32ToFp16(std::fmax(-65504.0f, std::fmin(65504.0f, x[i]))));
  return out;
}

double OriginalTolerance(DType type) {
  switch (type) {
    case DType::kF32:
      return 1e-5;
    case DType::kF16:
      return 1e-3;
    case DType::kBF16:
      return 8e-3;
    case DType::kQ8_0:
      return 2e-2;
    case DType::kQ4_0:
      return 0.2;
    default:  // random blocks: not compared with an original
      return 0.0;
  }
}

using IsaDType = std::tuple<Isa, DType>;

std::vector<IsaDType> AllIsaDTypes() {
  std::vector<IsaDType> out;
  for (Isa isa : AvailableIsas()) {
    for (DType type : kAllDTypes) out.emplace_back(isa, type);
  }
  return out;
}

std::string ParamName(const testing::TestParamInfo<IsaDType>& info) {
  return std::string(IsaName(std::get<0>(info.param))) + "_" +
         std::string(DTypeName(std::get<1>(info.param)));
}

class MatMulTest : public testing::TestWithParam<IsaDType> {
 protected:
  Isa isa() const { return std::get<0>(GetParam()); }
  DType type() const { return std::get<1>(GetParam()); }
};

struct Shape {
  int64_t rows, cols;
};

// Rows not multiples of any tile; block counts that leave partial 16-block
// groups and odd final pairs (576 = 18 blocks, 1056 = 33). Float types also
// get column counts that are not multiples of a vector.
std::vector<Shape> ShapesFor(DType type) {
  if (BlockElements(type) == kQkSuper) {
    return {{1, 256},   {7, 512},  {33, 768},  {70, 1280},
            {19, 2304}, {5, 4096}, {1000, 256}};
  }
  // 1000 rows: several whole 16-row panels per stream of a thread's share
  // of 2, and panels left over (packed decode reads four panels in step).
  std::vector<Shape> shapes = {{1, 32},   {7, 64},   {33, 96},
                               {70, 576}, {45, 896}, {19, 1056},
                               {5, 4096}, {17, 160}, {1000, 64}};
  if (!IsQuantized(type)) {
    shapes.insert(shapes.end(), {{5, 33}, {9, 47}, {3, 1}, {4, 100}, {6, 17}});
  }
  return shapes;
}

TEST_P(MatMulTest, MatchesReferenceAndFloatProduct) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const Shape& s : ShapesFor(type())) {
    const TestMatrix m = MakeMatrix(type(), s.rows, s.cols, seed++);
    // 17 and 40 tokens: prefill kernels with full and partial token tiles.
    for (int64_t n_tokens : {1, 2, 3, 5, 17, 40}) {
      const std::vector<float> x = RandomFloats(n_tokens * s.cols, seed++);
      std::vector<float> expected;
      {
        ScopedIsa scalar(Isa::kScalar);
        expected = RunMatMul(m, x, n_tokens, pool);
      }
      // Both layouts (they differ only where the ISA has packed kernels).
      for (const bool packed : {false, true}) {
        std::vector<float> actual;
        {
          ScopedIsa scoped(isa());
          actual = RunMatMul(m, x, n_tokens, pool, 0, packed);
        }
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < s.rows; ++r) {
            const size_t i = static_cast<size_t>(t * s.rows + r);
            const double mag = Magnitude(m.dequantized, x, s.cols, r, t);
            const std::string where = "rows=" + std::to_string(s.rows) +
                                      " cols=" + std::to_string(s.cols) +
                                      " n_tokens=" + std::to_string(n_tokens) +
                                      " t=" + std::to_string(t) +
                                      " r=" + std::to_string(r) +
                                      (packed ? " packed" : " rows");
            ASSERT_NEAR(actual[i], expected[i], 1e-5 * mag + 1e-30)
                << "vs ref, " << where;
            if (AvxExact(type(), packed) &&
                (isa() >= Isa::kAvx512 || (isa() >= Isa::kAvx2 && packed))) {
              ASSERT_EQ(actual[i], expected[i])
                  << "AVX-512, AMX and the AVX2 and AVX-VNNI 32-element "
                     "panels sum blocks in the reference's order, "
                  << where;
            }
            // F16 weights multiply x rounded to binary16 (saturated).
            const double exact =
                Dot(m.dequantized, type() == DType::kF16 ? RoundedToF16(x) : x,
                    s.cols, r, t);
            const double act_bound =
                IsQuantized(type())
                    ? ActivationRoundingBound(m.dequantized, x, s.cols, r, t)
                    : 0.0;
            ASSERT_NEAR(actual[i], exact, act_bound + 1e-5 * mag + 1e-30)
                << "vs float, " << where;
            // (Random-block types have no original beyond the dequantized
            // weights already checked.)
            if (!HasQuantizer(type())) continue;
            const double original = Dot(m.original, x, s.cols, r, t);
            ASSERT_NEAR(actual[i], original,
                        OriginalTolerance(type()) *
                                Magnitude(m.original, x, s.cols, r, t) +
                            1e-30)
                << "vs original weights, " << where;
          }
        }
      }
    }
  }
}

// Products under 2^18 multiply-adds run on the calling thread whatever the
// pool (matmul.cc), so 131 rows split only with 5 and 29 tokens; 1031 rows
// split for decode too.
TEST_P(MatMulTest, ThreadCountsGiveIdenticalResults) {
  ScopedIsa scoped(isa());
  for (const int64_t rows : {int64_t{131}, int64_t{1031}}) {
    const TestMatrix m = MakeMatrix(type(), rows, ColsFor(type(), 896), 7);
    for (int64_t n_tokens : {1, 5, 29}) {
      const std::vector<float> x = RandomFloats(n_tokens * m.cols, 8);
      ThreadPool one(1);
      const std::vector<float> y1 = RunMatMul(m, x, n_tokens, one);
      for (int threads : {2, 3}) {
        ThreadPool pool(threads);
        const std::vector<float> yn = RunMatMul(m, x, n_tokens, pool);
        ASSERT_EQ(std::memcmp(y1.data(), yn.data(), y1.size() * sizeof(float)),
                  0)
            << threads << " threads, rows=" << rows
            << ", n_tokens=" << n_tokens;
      }
    }
  }
}

// Token t of a prefill product equals the decode product of token t alone.
TEST_P(MatMulTest, PrefillRowsMatchDecode) {
  ScopedIsa scoped(isa());
  ThreadPool pool(2);
  const TestMatrix m = MakeMatrix(type(), 37, ColsFor(type(), 576), 9);
  for (const int64_t n_tokens : {6, 30}) {
    const std::vector<float> x = RandomFloats(n_tokens * m.cols, 10);
    const std::vector<float> y = RunMatMul(m, x, n_tokens, pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const std::vector<float> xt(x.begin() + t * m.cols,
                                  x.begin() + (t + 1) * m.cols);
      const std::vector<float> yt = RunMatMul(m, xt, 1, pool);
      for (int64_t r = 0; r < m.rows; ++r) {
        ASSERT_NEAR(y[t * m.rows + r], yt[r],
                    1e-5 * Magnitude(m.dequantized, x, m.cols, r, t) + 1e-30)
            << "n_tokens=" << n_tokens << " t=" << t << " r=" << r;
      }
    }
  }
}

// Token t of a product of any size equals the decode product of token t
// alone bit for bit, on every ISA and type, on the packed and the row
// layout: speculative verification passes and batched decoding see plain
// decoding's logits (docs/NUMERICS.md), so greedy output cannot change.
// Widths past one F16 chunk (256 columns) and past 1024; token counts on
// both sides of every tile size.
TEST_P(MatMulTest, EveryBatchEqualsDecodeExactly) {
  ScopedIsa scoped(isa());
  ThreadPool pool(2);
  for (const int64_t width : {int64_t{896}, int64_t{2304}}) {
    const TestMatrix m = MakeMatrix(type(), 37, ColsFor(type(), width), 9);
    for (const bool packed : {true, false}) {
      for (const int64_t n_tokens : {2, 3, 4, 5, 9, 12, 13, 16, 17, 33, 65}) {
        const std::vector<float> x = RandomFloats(n_tokens * m.cols, 10);
        const std::vector<float> y = RunMatMul(m, x, n_tokens, pool, 0, packed);
        for (int64_t t = 0; t < n_tokens; ++t) {
          const std::vector<float> xt(x.begin() + t * m.cols,
                                      x.begin() + (t + 1) * m.cols);
          const std::vector<float> yt = RunMatMul(m, xt, 1, pool, 0, packed);
          ASSERT_EQ(std::memcmp(y.data() + t * m.rows, yt.data(),
                                yt.size() * sizeof(float)),
                    0)
              << "cols=" << m.cols << " packed=" << packed
              << " n_tokens=" << n_tokens << " t=" << t;
        }
      }
    }
  }
}

// The AVX2 and AVX-512 panel products of 16-bit float weights run the same FMA
// chains (one per output, column order, from zero); those of Q2_K ... Q6_K
// weights take the same exact integer terms through the same float operations
// in the same order (matmul_kpacked_avx2.cc); those of the 32-element block
// types both take the reference's. So they give the same bits, for decode and
// batches, where the CPU has both. The AVX-VNNI build of the panels takes
// the same integers by vpdpbusd chains (the K-quants' times their scales by
// vpmulld), so it gives those bits too.
TEST(PanelsTest, Avx2EqualsAvx512BitForBit) {
  const std::vector<Isa> isas = AvailableIsas();
  const auto has = [&](Isa isa) {
    return std::find(isas.begin(), isas.end(), isa) != isas.end();
  };
  if (!has(Isa::kAvx2) || !has(Isa::kAvx512)) {
    GTEST_SKIP() << "needs a CPU with AVX2 and AVX-512";
  }
  std::vector<Isa> ymm_isas = {Isa::kAvx2};
  if (has(Isa::kAvxVnni)) ymm_isas.push_back(Isa::kAvxVnni);
  ThreadPool pool(2);
  for (const DType type :
       {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ5_0,
        DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
        DType::kQ5_1, DType::kQ4_1, DType::kIQ4_NL}) {
    const std::vector<Shape> shapes =
        BlockElements(type) == kQkSuper
            ? std::vector<Shape>{{37, 768}, {70, 256}, {5, 2304}}
        : IsQuantized(type) ? std::vector<Shape>{{37, 896}, {70, 64}, {5, 320}}
                            : std::vector<Shape>{{37, 896}, {70, 47}, {5, 300}};
    for (const Shape& s : shapes) {
      const TestMatrix m = MakeMatrix(type, s.rows, s.cols, 11);
      for (const int64_t n_tokens : {1, 2, 3, 7, 13, 40}) {
        const std::vector<float> x = RandomFloats(n_tokens * s.cols, 12);
        std::vector<float> want;
        {
          ScopedIsa scoped(Isa::kAvx512);
          want = RunMatMul(m, x, n_tokens, pool);
        }
        for (const Isa isa : ymm_isas) {
          ScopedIsa scoped(isa);
          const std::vector<float> got = RunMatMul(m, x, n_tokens, pool);
          ASSERT_EQ(
              std::memcmp(got.data(), want.data(), got.size() * sizeof(float)),
              0)
              << IsaName(isa) << " " << DTypeName(type) << " rows=" << s.rows
              << " cols=" << s.cols << " n_tokens=" << n_tokens;
        }
      }
    }
  }
}

// The caller's scratch need not be aligned.
TEST_P(MatMulTest, UnalignedScratch) {
  ScopedIsa scoped(isa());
  ThreadPool pool(2);
  const TestMatrix m = MakeMatrix(type(), 9, ColsFor(type(), 128), 11);
  const std::vector<float> x = RandomFloats(3 * m.cols, 12);
  const std::vector<float> aligned = RunMatMul(m, x, 3, pool, 0);
  const std::vector<float> unaligned = RunMatMul(m, x, 3, pool, 3);
  ASSERT_EQ(std::memcmp(aligned.data(), unaligned.data(),
                        aligned.size() * sizeof(float)),
            0);
}

// Special inputs: zero blocks (scale 0), a lone large value per block,
// extreme magnitudes.
TEST_P(MatMulTest, ZeroAndSpikyBlocks) {
  ScopedIsa scoped(isa());
  ThreadPool pool(2);
  const int64_t rows = 6, cols = ColsFor(type(), 160);
  std::vector<float> w = RandomFloats(rows * cols, 13);
  for (int64_t c = 0; c < 32; ++c) w[c] = 0.0f;  // row 0, block 0 all zero
  for (int64_t c = 32; c < 64; ++c) w[cols + c] = c == 40 ? 1000.0f : 0.0f;
  TestMatrix m{type(), rows, cols, w, {}, {}, {}};
  m.bytes.resize(static_cast<size_t>(rows * RowBytes(type(), cols)));
  m.dequantized.resize(static_cast<size_t>(rows * cols));
  if (HasQuantizer(type())) {
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(type(), w.data() + r * cols, cols,
                  m.bytes.data() + r * RowBytes(type(), cols));
    }
  } else {
    // Random blocks, with row 0's first block all zero bytes (zero scales)
    // and row 1's first block scaled up a thousandfold.
    m.bytes = RandomBlocks(type(), rows * cols / BlockElements(type()), 13);
    std::memset(m.bytes.data(), 0, static_cast<size_t>(BlockBytes(type())));
    for (const ScaleField& f : ScaleFields(type())) {
      uint8_t* p = m.bytes.data() + RowBytes(type(), cols) + f.offset;
      uint16_t h;
      std::memcpy(&h, p, 2);
      h = Fp32ToFp16(Fp16ToFp32(h) * 1000.0f);
      std::memcpy(p, &h, 2);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    DequantizeRow(m.View(), r, m.dequantized.data() + r * cols);
  Pack(&m);
  for (int64_t n_tokens : {1, 4}) {
    std::vector<float> x = RandomFloats(n_tokens * cols, 14, -100.0f, 100.0f);
    for (int64_t c = 64; c < 96; ++c) x[c] = 0.0f;  // token 0, block 2 all zero
    x[100] = 1e-3f;
    std::vector<float> expected;
    {
      ScopedIsa scalar(Isa::kScalar);
      expected = RunMatMul(m, x, n_tokens, pool);
    }
    const std::vector<float> actual = RunMatMul(m, x, n_tokens, pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const size_t i = static_cast<size_t>(t * rows + r);
        ASSERT_NEAR(actual[i], expected[i],
                    1e-5 * Magnitude(m.dequantized, x, cols, r, t) + 1e-30)
            << "t=" << t << " r=" << r;
      }
    }
  }
}

// MatMulMany gives exactly what separate MatMul calls give.
TEST_P(MatMulTest, ManyMatchesSeparateCalls) {
  ScopedIsa scoped(isa());
  ThreadPool pool(2);
  // Mixed with another type too: quantized types share the Q8 activations.
  const DType other = IsQuantized(type()) ? DType::kQ4_0 : DType::kF16;
  const std::vector<TestMatrix> ms = {
      MakeMatrix(type(), 45, 256, 21), MakeMatrix(type(), 16, 256, 22),
      MakeMatrix(other, 7, 256, 23), MakeMatrix(type(), 33, 256, 24)};
  for (int64_t n_tokens : {1, 5, 17}) {
    const std::vector<float> x = RandomFloats(n_tokens * 256, 25);
    std::vector<WeightView> views;
    std::vector<std::vector<float>> ys;
    for (const TestMatrix& m : ms) {
      views.push_back(m.View());
      ys.emplace_back(static_cast<size_t>(n_tokens * m.rows), std::nanf(""));
    }
    std::vector<float*> y_ptrs;
    for (auto& y : ys) y_ptrs.push_back(y.data());
    // F16's scratch covers a quantized group's (MatMulScratchBytes).
    const bool half = type() == DType::kF16 || other == DType::kF16;
    std::vector<std::byte> scratch(
        MatMulScratchBytes(half ? DType::kF16 : DType::kQ8_0, 256, n_tokens));
    MatMulMany(views, x.data(), n_tokens, y_ptrs, scratch, pool);
    for (size_t i = 0; i < ms.size(); ++i) {
      const std::vector<float> single = RunMatMul(ms[i], x, n_tokens, pool);
      ASSERT_EQ(std::memcmp(single.data(), ys[i].data(),
                            single.size() * sizeof(float)),
                0)
          << "matrix " << i << " n_tokens=" << n_tokens;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsasAndTypes, MatMulTest,
                         testing::ValuesIn(AllIsaDTypes()), ParamName);

// Weights and activations at the ends of their ranges, where vpmaddubsw's
// s16 pair sums come closest to saturating: Q8_0 bytes -128 and 127,
// Q4_0/Q4_1 nibbles 0 and 15 (IQ4_NL's: values -127 and 113), Q5_0/Q5_1/Q5_K
// values 0 and 31 (every value 31 in half
// the blocks), activations +-127 with scale 1 and signs chosen to make
// every product of row 0 as large as it can be. Weight scales are 1 (mins
// 0), so every partial sum is an integer below 2^24 and every ISA, layout
// and order must give the exact integer dot.
TEST(MatMulExtremesTest, EveryIsaAndLayoutGivesTheExactDot) {
  // 35 rows: two whole panels, which decode reads as streams in step, and a
  // partial one.
  constexpr int64_t kRows = 35, kCols = 256;
  for (const DType type :
       {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kIQ4_NL, DType::kQ5_0,
        DType::kQ5_1, DType::kQ5_K}) {
    const int64_t row_bytes = RowBytes(type, kCols);
    const int64_t n_blocks = kCols / BlockElements(type);
    const int64_t block_bytes = row_bytes / n_blocks;
    TestMatrix m{type, kRows, kCols, {}, {}, {}, {}};
    m.bytes.resize(static_cast<size_t>(kRows * row_bytes));
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t* block = m.bytes.data() + r * row_bytes + b * block_bytes;
        block[0] = 0x00;  // binary16 1.0
        block[1] = 0x3c;
        // The 5-bit types: value 31 everywhere in half the blocks, else 0
        // and 31 alternating in pairs.
        const bool all_high = (r + b) % 2 == 0;
        auto high = [&](int e) { return all_high || (e / 2) % 2 == 0; };
        if (type == DType::kQ5_0 || type == DType::kQ5_1) {
          // (Q5_1: the min m at bytes 2-3 stays 0.) qh (4 bytes: bit e the
          // fifth bit of element e), then qs (low nibble element j, high
          // nibble element j + 16).
          const size_t qh = type == DType::kQ5_0 ? offsetof(BlockQ5_0, qh)
                                                 : offsetof(BlockQ5_1, qh);
          const size_t qs = qh + 4;
          for (int e = 0; e < 32; ++e) {
            if (!high(e)) continue;
            block[qh + e / 8] |= static_cast<uint8_t>(1u << (e % 8));
            block[qs + e % 16] |= static_cast<uint8_t>(e < 16 ? 0x0f : 0xf0);
          }
          continue;
        }
        if (type == DType::kQ5_K) {
          // dmin 0; every sub-block scale 1, min 0 (ScaleMinK4's bytes);
          // qh[l] bit k the fifth bit of element 32k + l; qs[32j + l] low
          // nibble element 64j + l, high nibble element 64j + 32 + l.
          uint8_t* scales = block + offsetof(BlockQ5_K, scales);
          for (int k = 0; k < 4; ++k) scales[k] = 1;
          for (int k = 8; k < 12; ++k) scales[k] = 1;
          for (int e = 0; e < kQkSuper; ++e) {
            if (!high(e)) continue;
            block[offsetof(BlockQ5_K, qh) + e % 32] |=
                static_cast<uint8_t>(1u << (e / 32));
            block[offsetof(BlockQ5_K, qs) + 32 * (e / 64) + e % 32] |=
                static_cast<uint8_t>(e % 64 < 32 ? 0x0f : 0xf0);
          }
          continue;
        }
        const bool q8 = type == DType::kQ8_0;
        // (Q4_1: the min m at bytes 2-3 stays 0.)
        const size_t qs =
            type == DType::kQ4_1 ? offsetof(BlockQ4_1, qs) : size_t{2};
        for (int j = 0; j < (q8 ? 32 : 16); ++j) {
          const bool low = (j / 2 + r + b) % 2 == 0;
          block[qs + j] = q8 ? static_cast<uint8_t>(low ? 0x80 : 0x7f)
                             : static_cast<uint8_t>(low ? 0xf0 : 0x0f);
        }
      }
    }
    m.dequantized.resize(static_cast<size_t>(kRows * kCols));
    for (int64_t r = 0; r < kRows; ++r)
      DequantizeRow(m.RowView(), r, m.dequantized.data() + r * kCols);
    Pack(&m);
    for (const int64_t n_tokens : {1, 3, 6}) {
      std::vector<float> x(static_cast<size_t>(n_tokens * kCols));
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t c = 0; c < kCols; ++c) {
          const bool negative = (m.dequantized[c] < 0.0f) != (t % 2 == 1);
          x[t * kCols + c] = negative ? -127.0f : 127.0f;
        }
      }
      for (const Isa isa : AvailableIsas()) {
        ScopedIsa scoped(isa);
        ThreadPool pool(2);
        for (const bool packed : {false, true}) {
          const std::vector<float> y =
              RunMatMul(m, x, n_tokens, pool, 0, packed);
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < kRows; ++r) {
              ASSERT_EQ(y[t * kRows + r],
                        static_cast<float>(Dot(m.dequantized, x, kCols, r, t)))
                  << DTypeName(type) << " " << IsaName(isa)
                  << (packed ? " packed" : " rows") << " t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Activation quantizer: every ISA bit-identical to the reference.

class QuantizeActivationsTest : public testing::TestWithParam<Isa> {};

TEST_P(QuantizeActivationsTest, BitIdenticalToReference) {
  KernelTable ref_table;
  ref::FillTable(&ref_table);
  ScopedIsa scoped(GetParam());
  const KernelTable& table = ActiveKernels();
  const int64_t cols = 4096;
  std::vector<float> x = RandomFloats(cols, 21, -3.0f, 3.0f);
  // Exact ties: amax 127 gives d = 1, so x.5 must round half to even (ggml's
  // x86 quantizer).
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) + 0.5f;
  x[31] = 127.0f;
  // Just below halves (0.5 - 2^-25 is where "add 0.5 and truncate" fails).
  x[0] = 0.49999997f;
  x[1] = -0.49999997f;
  x[2] = std::nextafter(2.5f, 0.0f);
  x[3] = std::nextafter(-7.5f, 0.0f);
  x[4] = 126.5f;
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;                      // zero block
  for (int j = 64; j < 96; ++j) x[j] = j == 70 ? -1e-20f : 0.0f;  // tiny
  for (int j = 96; j < 128; ++j) x[j] = (j % 2 ? 1.0f : -1.0f) * 3e4f;  // large
  // Blocks 4..67: halves k + 0.5 and their float neighbours, d = 1.
  for (int b = 4; b < 68; ++b) {
    for (int j = 0; j < 31; ++j) {
      const float h = static_cast<float>((b * 31 + j) % 254 - 127) + 0.5f;
      const int which = j % 3;
      x[b * 32 + j] =
          which == 0 ? h : std::nextafter(h, which == 1 ? 200.0f : -200.0f);
    }
    x[b * 32 + 31] = b % 2 ? 127.0f : -127.0f;
  }
  std::vector<int8_t> q_ref(cols), q(cols);
  std::vector<float> d_ref(cols / 32), d(cols / 32);
  ref_table.quantize_q8(x.data(), cols, q_ref.data(), d_ref.data());
  table.quantize_q8(x.data(), cols, q.data(), d.data());
  EXPECT_EQ(q, q_ref);
  EXPECT_EQ(std::memcmp(d.data(), d_ref.data(), d.size() * sizeof(float)), 0);
  // Ties to even, as ggml's x86 quantizer (_mm256_round_ps, nearest).
  EXPECT_EQ(q_ref[0], 0);    // 0.49999997
  EXPECT_EQ(q_ref[1], 0);    // -0.49999997
  EXPECT_EQ(q_ref[2], 2);    // just below 2.5
  EXPECT_EQ(q_ref[3], -7);   // just above -7.5
  EXPECT_EQ(q_ref[4], 126);  // 126.5
  EXPECT_EQ(q_ref[16], 0);   // 0.5
  EXPECT_EQ(q_ref[18], 2);   // 2.5
  EXPECT_EQ(q_ref[13], -2);  // -2.5
  EXPECT_EQ(q_ref[14], -2);  // -1.5
  EXPECT_EQ(q_ref[15], 0);   // -0.5
  EXPECT_EQ(d_ref[0], 1.0f);
  EXPECT_EQ(d_ref[1], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, QuantizeActivationsTest,
                         testing::ValuesIn(AvailableIsas()),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

// ---------------------------------------------------------------------------
// QuantizeRow / DequantizeRow.

TEST(QuantizeRowTest, RoundTripErrorBounds) {
  const int64_t n = 4096;
  const std::vector<float> x = RandomFloats(n, 31, -5.0f, 5.0f);
  for (DType type :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    std::vector<uint8_t> bytes(static_cast<size_t>(RowBytes(type, n)));
    QuantizeRow(type, x.data(), n, bytes.data());
    std::vector<float> back(n);
    DequantizeRow(WeightView{type, 1, n, bytes.data()}, 0, back.data());
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j)
        amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      for (int j = 0; j < 32; ++j) {
        const int64_t i = b * 32 + j;
        double tol = 0.0;
        switch (type) {
          case DType::kF32:
            tol = 0.0;
            break;
          case DType::kF16:
            tol = std::fabs(x[i]) * std::ldexp(1.0, -11);
            break;
          case DType::kBF16:
            tol = std::fabs(x[i]) * std::ldexp(1.0, -8);
            break;
          // d/2 from rounding q plus 127 * (fp16 rounding of d).
          case DType::kQ8_0:
            tol = 0.6 * amax / 127.0;
            break;
          // q - 8 in [-8, 7]: values near +amax clamp, error up to d; plus
          // 8 * (fp16 rounding of d).
          case DType::kQ4_0:
            tol = 1.01 * amax / 8.0;
            break;
          default:  // no quantizer
            break;
        }
        ASSERT_NEAR(back[i], x[i], tol) << DTypeName(type) << " i=" << i;
      }
    }
  }
}

TEST(QuantizeRowTest, Q8_0KnownBlock) {
  // amax 127 gives d = 1 exactly and q = roundf(x).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 16.5f;
  x[0] = -127.0f;
  BlockQ8_0 block;
  QuantizeRow(DType::kQ8_0, x.data(), 32, &block);
  EXPECT_EQ(block.d, Fp32ToFp16(1.0f));
  EXPECT_EQ(block.qs[0], -127);
  EXPECT_EQ(block.qs[1], -16);  // -15.5 rounds away from zero
  EXPECT_EQ(block.qs[16], -1);  // -0.5
  EXPECT_EQ(block.qs[17], 1);   // 0.5
  EXPECT_EQ(block.qs[31], 15);  // 14.5
}

TEST(QuantizeRowTest, Q4_0KnownBlock) {
  // The largest magnitude (-8) maps to q = 0 with d = 1; q = trunc(x + 8.5)
  // clamped to 15.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;
  x[1] = 7.4f;    // 15.9 -> 15
  x[2] = 0.5f;    // 9.0 -> 9
  x[3] = -0.5f;   // 8.0 -> 8
  x[16] = 7.9f;   // 16.4 -> 16 -> clamped 15
  x[17] = -7.6f;  // 0.9 -> 0
  BlockQ4_0 block;
  QuantizeRow(DType::kQ4_0, x.data(), 32, &block);
  EXPECT_EQ(block.d, Fp32ToFp16(1.0f));
  EXPECT_EQ(block.qs[0], 0xF0);  // lo 0 (x0), hi 15 (x16)
  EXPECT_EQ(block.qs[1], 0x0F);  // lo 15 (x1), hi 0 (x17)
  EXPECT_EQ(block.qs[0] & 15, 0);
  EXPECT_EQ(block.qs[0] >> 4, 15);
  EXPECT_EQ(block.qs[1] & 15, 15);
  EXPECT_EQ(block.qs[1] >> 4, 0);
  EXPECT_EQ(block.qs[2] & 15, 9);
  EXPECT_EQ(block.qs[3] & 15, 8);
  EXPECT_EQ(block.qs[4], 8 | (8 << 4));  // zeros
}

TEST(QuantizeRowTest, Q4_0PositiveMaxGivesNegativeScale) {
  std::vector<float> x(32, 0.0f);
  x[5] = 4.0f;  // d = 4 / -8 = -0.5; 4 maps to q = 0
  BlockQ4_0 block;
  QuantizeRow(DType::kQ4_0, x.data(), 32, &block);
  EXPECT_EQ(Fp16ToFp32(block.d), -0.5f);
  std::vector<float> back(32);
  DequantizeRow(WeightView{DType::kQ4_0, 1, 32, &block}, 0, back.data());
  EXPECT_EQ(back[5], 4.0f);
  EXPECT_EQ(back[0], 0.0f);
}

TEST(MatMulScratchTest, QuantizedTypesAndF16NeedScratch) {
  EXPECT_EQ(MatMulScratchBytes(DType::kF32, 896, 128), 0u);
  EXPECT_EQ(MatMulScratchBytes(DType::kBF16, 896, 1), 0u);
  EXPECT_GE(MatMulScratchBytes(DType::kQ8_0, 896, 1), 896u + 28u * 4u);
  EXPECT_GE(MatMulScratchBytes(DType::kQ4_0, 896, 3), 3u * (896u + 28u * 4u));
  // F16: x rounded (f32 and binary16), after room for a quantized group.
  EXPECT_GE(MatMulScratchBytes(DType::kF16, 896, 3),
            MatMulScratchBytes(DType::kQ8_0, 896, 3) + 3u * 896u * 6u);
}

// A group that mixes F16 and quantized matrices uses both scratch areas:
// each product equals its own MatMul.
TEST(MatMulScratchTest, F16AndQuantizedInOneGroup) {
  ThreadPool pool(2);
  const int64_t cols = 256, n_tokens = 3;
  const TestMatrix f16 = MakeMatrix(DType::kF16, 20, cols, 5);
  const TestMatrix q8 = MakeMatrix(DType::kQ8_0, 36, cols, 6);
  const std::vector<float> x = RandomFloats(n_tokens * cols, 7);
  for (Isa isa : AvailableIsas()) {
    ScopedIsa scoped(isa);
    const std::vector<float> y_f16 = RunMatMul(f16, x, n_tokens, pool);
    const std::vector<float> y_q8 = RunMatMul(q8, x, n_tokens, pool);
    std::vector<float> a(y_f16.size()), b(y_q8.size());
    std::vector<std::byte> scratch(
        MatMulScratchBytes(DType::kF16, cols, n_tokens));
    const WeightView ws[] = {f16.View(), q8.View()};
    float* ys[] = {a.data(), b.data()};
    MatMulMany(ws, x.data(), n_tokens, ys, scratch, pool);
    EXPECT_EQ(a, y_f16) << IsaName(isa);
    EXPECT_EQ(b, y_q8) << IsaName(isa);
  }
}

// Activations for F16 weights: every ISA bit-identical to the scalar
// conversions (round to nearest even, subnormals, saturation, NaN kept).
TEST(RoundF16Test, BitIdenticalToScalarConversions) {
  std::vector<float> x = RandomFloats(1000, 41, -70000.0f, 70000.0f);
  const std::vector<float> small = RandomFloats(200, 42, -1e-4f, 1e-4f);
  x.insert(x.end(), small.begin(), small.end());
  x.insert(x.end(),
           {0.0f, -0.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f,
            65519.0f, 65520.0f, -1e30f, std::numeric_limits<float>::infinity(),
            6e-8f, 3e-8f, -2.98e-8f, 5.96e-8f});
  // Lengths that leave every tail of a vector.
  for (Isa isa : AvailableIsas()) {
    ScopedIsa scoped(isa);
    for (const size_t n : {x.size(), x.size() - 1, size_t{7}, size_t{15}}) {
      std::vector<float> rounded(n);
      std::vector<uint16_t> bits(n);
      ActiveKernels().round_f16(x.data(), static_cast<int64_t>(n),
                                rounded.data(), bits.data());
      for (size_t i = 0; i < n; ++i) {
        const float clamped = std::fmax(-65504.0f, std::fmin(65504.0f, x[i]));
        ASSERT_EQ(bits[i], Fp32ToFp16(clamped))
            << IsaName(isa) << " x=" << x[i];
        ASSERT_EQ(rounded[i], Fp16ToFp32(bits[i])) << IsaName(isa);
      }
    }
    // Ties go to even; saturation instead of inf; NaN stays NaN.
    const float in[] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1e30f,
                        std::numeric_limits<float>::quiet_NaN()};
    float out[4];
    uint16_t h[4];
    ActiveKernels().round_f16(in, 4, out, h);
    EXPECT_EQ(out[0], 1.0f) << IsaName(isa);
    EXPECT_EQ(out[1], 1.0f + 4.0f / 2048) << IsaName(isa);
    EXPECT_EQ(out[2], 65504.0f) << IsaName(isa);
    EXPECT_TRUE(std::isnan(out[3])) << IsaName(isa);
  }
}

TEST(IsaTest, ScalarAlwaysAvailableAndSelectable) {
  const std::vector<Isa> isas = AvailableIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  const Isa saved = ActiveIsa();
  for (Isa isa : isas) {
    EXPECT_TRUE(SetActiveIsa(isa));
    EXPECT_EQ(ActiveIsa(), isa);
  }
  SetActiveIsa(saved);
  EXPECT_EQ(IsaName(Isa::kAvx512), "avx512");
  EXPECT_EQ(IsaName(Isa::kAvxVnni), "avxvnni");
}

}  // namespace
}  // namespace redline::kernels

namespace redline::kernels {
namespace {

TEST(PackedLayoutTest, Sizes) {
  EXPECT_EQ(PackedPanels(1), 1);
  EXPECT_EQ(PackedPanels(16), 1);
  EXPECT_EQ(PackedPanels(17), 2);
  EXPECT_EQ(PackedPanelBytes(DType::kQ8_0, 64), 2 * 544);
  EXPECT_EQ(PackedPanelBytes(DType::kQ4_0, 64), 2 * 288);
  EXPECT_EQ(PackedBytes(DType::kQ8_0, 17, 64), 2 * 2 * 544);
  EXPECT_EQ(PackedPanelBytes(DType::kF16, 64), 64 * 32);
  EXPECT_EQ(PackedBytes(DType::kBF16, 17, 10), 2 * 10 * 32);
  EXPECT_EQ(PackedPanelBytes(DType::kF32, 64), 0);
  EXPECT_EQ(PackedPanelBytes(DType::kQ5_0, 64), 2 * 352);
  EXPECT_EQ(PackedPanelBytes(DType::kQ4_K, 512), 2 * 2368);
  EXPECT_EQ(PackedPanelBytes(DType::kQ6_K, 512), 2 * 3360);
  EXPECT_EQ(PackedBytes(DType::kQ6_K, 17, 256), 2 * 3360);
  EXPECT_EQ(PackedPanelBytes(DType::kQ5_1, 64), 2 * 384);
  EXPECT_EQ(PackedPanelBytes(DType::kQ5_K, 512), 2 * 2880);
  EXPECT_EQ(PackedPanelBytes(DType::kQ4_1, 64), 2 * 320);
  EXPECT_EQ(PackedPanelBytes(DType::kIQ4_NL, 64), 2 * 288);
  EXPECT_EQ(PackedPanelBytes(DType::kQ2_K, 512), 2 * 1344);
  EXPECT_EQ(PackedPanelBytes(DType::kQ3_K, 512), 2 * 1824);
  EXPECT_EQ(PackedPanelBytes(DType::kF32, 256), 0);
}

// The AVX2, AVX-512 and AMX tables have products on every packed type
// (packed.h); the scalar table on none, and no table on the other types.
TEST(PackedLayoutTest, HelpsOnlyWhereAKernelReadsIt) {
  for (Isa isa : AvailableIsas()) {
    ScopedIsa scoped(isa);
    for (const DType type : kAllDTypes) {
      EXPECT_EQ(PackedLayoutHelps(type), PackedOn(type, isa))
          << IsaName(isa) << " " << DTypeName(type);
    }
  }
}

// 16-bit float panels: column c of panel p holds rows 16p.. of column c,
// padding rows +0.
TEST(PackedLayoutTest, HalfBytesAreWhereTheHeaderSays) {
  for (DType type : {DType::kF16, DType::kBF16}) {
    const TestMatrix m = MakeMatrix(type, 19, 21, 33);
    ASSERT_EQ(m.packed.size(), static_cast<size_t>(2 * 21 * 32));
    for (int64_t row = 0; row < 32; ++row) {
      for (int64_t c = 0; c < 21; ++c) {
        uint16_t got, want = 0;
        std::memcpy(
            &got,
            m.packed.data() + (row / 16) * 21 * 32 + c * 32 + (row % 16) * 2,
            2);
        if (row < m.rows) std::memcpy(&want, m.RowView().Row(row) + 2 * c, 2);
        ASSERT_EQ(got, want)
            << DTypeName(type) << " row " << row << " col " << c;
      }
    }
  }
}

// The byte layout packed.h documents, element by element.
TEST(PackedLayoutTest, BytesAreWhereTheHeaderSays) {
  for (DType type :
       {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kIQ4_NL}) {
    const TestMatrix m = MakeMatrix(type, 17, 64, 31);
    const bool q8 = type == DType::kQ8_0;
    const bool q4_1 = type == DType::kQ4_1;
    const int64_t quant_bytes = q8 ? 512 : 256;
    const int64_t block_bytes = quant_bytes + (q4_1 ? 64 : 32);
    const int64_t groups = q8 ? 8 : 4;
    const size_t qs = q4_1 ? offsetof(BlockQ4_1, qs) : size_t{2};
    for (int64_t row = 0; row < 32; ++row) {
      const int64_t p = row / 16, r = row % 16;
      for (int64_t b = 0; b < 2; ++b) {
        const uint8_t* block =
            m.packed.data() + p * PackedPanelBytes(type, 64) + b * block_bytes;
        const uint8_t* file_block =
            row < m.rows ? m.RowView().Row(row) + b * BlockBytes(type)
                         : nullptr;
        uint16_t scale, file_scale = 0;
        std::memcpy(&scale, block + quant_bytes + 2 * r, 2);
        if (file_block != nullptr) std::memcpy(&file_scale, file_block, 2);
        ASSERT_EQ(scale, file_scale) << "row " << row << " block " << b;
        if (q4_1) {
          uint16_t min, file_min = 0;
          std::memcpy(&min, block + quant_bytes + 32 + 2 * r, 2);
          if (file_block != nullptr)
            std::memcpy(&file_min, file_block + offsetof(BlockQ4_1, m), 2);
          ASSERT_EQ(min, file_min) << "row " << row << " block " << b;
        }
        for (int64_t g = 0; g < groups; ++g) {
          for (int64_t i = 0; i < 4; ++i) {
            const uint8_t byte = block[(g * 16 + r) * 4 + i];
            uint8_t want;
            if (file_block == nullptr) {
              want = q8 ? 0x80 : 0x88;  // padding: weight 0
            } else if (q8) {
              const auto w = static_cast<int8_t>(file_block[2 + 4 * g + i]);
              want = static_cast<uint8_t>(w + 128);
            } else {
              want = file_block[qs + 4 * g + i];
            }
            ASSERT_EQ(byte, want) << DTypeName(type) << " row " << row
                                  << " block " << b << " group " << g;
          }
        }
      }
    }
  }
}

// Q5_0 and Q5_1 panels: Q4_0's nibble lanes, then the fifth bits as one
// mask per operand, then the scales (and Q5_1's mins).
TEST(PackedLayoutTest, Q5BytesAreWhereTheHeaderSays) {
  for (const DType type : {DType::kQ5_0, DType::kQ5_1}) {
    const bool q5_1 = type == DType::kQ5_1;
    const int64_t block_bytes = q5_1 ? 384 : 352;
    const size_t qh = q5_1 ? offsetof(BlockQ5_1, qh) : offsetof(BlockQ5_0, qh);
    const size_t qs = q5_1 ? offsetof(BlockQ5_1, qs) : offsetof(BlockQ5_0, qs);
    const TestMatrix m = MakeMatrix(type, 17, 64, 41);
    for (int64_t row = 0; row < 32; ++row) {
      const int64_t p = row / 16, r = row % 16;
      for (int64_t b = 0; b < 2; ++b) {
        const uint8_t* block =
            m.packed.data() + p * PackedPanelBytes(type, 64) + b * block_bytes;
        const uint8_t* file = row < m.rows
                                  ? m.RowView().Row(row) + b * BlockBytes(type)
                                  : nullptr;
        const std::string where =
            std::string(DTypeName(type)) + " row " + std::to_string(row);
        for (int64_t g = 0; g < 4; ++g) {
          for (int64_t i = 0; i < 4; ++i) {
            const uint8_t want = file ? file[qs + 4 * g + i] : 0;
            ASSERT_EQ(block[(g * 16 + r) * 4 + i], want) << where;
          }
        }
        // Element e's fifth bit (qh bit e) at bit 4r + e % 4 of the
        // little-endian mask e / 4.
        for (int64_t e = 0; e < 32; ++e) {
          const int want = file ? file[qh + e / 8] >> (e % 8) & 1 : 0;
          const int64_t bit = 4 * r + e % 4;
          const int got = block[256 + 8 * (e / 4) + bit / 8] >> (bit % 8) & 1;
          ASSERT_EQ(got, want) << where << " element " << e;
        }
        uint16_t got, want = 0;
        std::memcpy(&got, block + 320 + 2 * r, 2);
        if (file) std::memcpy(&want, file, 2);
        ASSERT_EQ(got, want) << where << " d";
        if (!q5_1) continue;
        want = 0;
        std::memcpy(&got, block + 352 + 2 * r, 2);
        if (file) std::memcpy(&want, file + offsetof(BlockQ5_1, m), 2);
        ASSERT_EQ(got, want) << where << " m";
      }
    }
  }
}

// Q2_K and Q3_K panels, element by element: every row's qs lanes (and
// Q3_K's hmask lanes) where packed.h says, Q2_K's scale bytes as stored,
// Q3_K's scales decoded (6 bits minus 32), the binary16 fields, and padding
// rows all zero.
TEST(PackedLayoutTest, LowBitKQuantBytesAreWhereTheHeaderSays) {
  constexpr int64_t kCols = 512;
  for (const DType type : {DType::kQ2_K, DType::kQ3_K}) {
    const bool q3 = type == DType::kQ3_K;
    const TestMatrix m = MakeMatrix(type, 19, kCols, 43);
    const int64_t block_bytes = q3 ? 1824 : 1344;
    const size_t qs = q3 ? offsetof(BlockQ3_K, qs) : offsetof(BlockQ2_K, qs);
    const int64_t scales_at = q3 ? 1536 : 1024;
    for (int64_t row = 0; row < 32; ++row) {
      const int64_t p = row / 16, r = row % 16;
      for (int64_t i = 0; i < kCols / 256; ++i) {
        const uint8_t* block = m.packed.data() +
                               p * PackedPanelBytes(type, kCols) +
                               i * block_bytes;
        const uint8_t* file = row < m.rows
                                  ? m.RowView().Row(row) + i * BlockBytes(type)
                                  : nullptr;
        const std::string where = std::string(DTypeName(type)) + " row " +
                                  std::to_string(row) + " block " +
                                  std::to_string(i);
        for (int64_t n = 0; n < 2; ++n) {
          for (int64_t g = 0; g < 8; ++g) {
            for (int64_t k = 0; k < 4; ++k) {
              const uint8_t want = file ? file[qs + 32 * n + 4 * g + k] : 0;
              ASSERT_EQ(block[((n * 8 + g) * 16 + r) * 4 + k], want) << where;
              if (!q3 || n == 1) continue;
              const uint8_t want_h =
                  file ? file[offsetof(BlockQ3_K, hmask) + 4 * g + k] : 0;
              ASSERT_EQ(block[1024 + (g * 16 + r) * 4 + k], want_h)
                  << where << " hmask";
            }
          }
        }
        int decoded[16] = {};
        if (file != nullptr && q3)
          ScalesQ3K(file + offsetof(BlockQ3_K, scales), decoded);
        for (int64_t k = 0; k < 16; ++k) {
          const uint8_t got = block[scales_at + k * 16 + r];
          if (q3) {
            ASSERT_EQ(static_cast<int8_t>(got), decoded[k]) << where;
          } else {
            ASSERT_EQ(got, file ? file[offsetof(BlockQ2_K, scales) + k] : 0)
                << where;
          }
        }
        for (int f = 0; f < (q3 ? 1 : 2); ++f) {
          uint16_t got, want = 0;
          std::memcpy(&got, block + scales_at + 256 + 32 * f + 2 * r, 2);
          const size_t at =
              q3 ? offsetof(BlockQ3_K, d) : offsetof(BlockQ2_K, d) + 2 * f;
          if (file) std::memcpy(&want, file + at, 2);
          ASSERT_EQ(got, want) << where << (f ? " dmin" : " d");
        }
      }
    }
  }
}

// The K-quant panel bytes packed.h documents, element by element: every
// row's quant bits, scales and fp16 fields found where the header says, and
// padding rows all zero.
TEST(PackedLayoutTest, KQuantBytesAreWhereTheHeaderSays) {
  constexpr int64_t kCols = 512;
  for (DType type : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const TestMatrix m = MakeMatrix(type, 19, kCols, 37);
    // Q5_K: Q4_K's bytes with qh (512 bytes) after qs.
    const bool q4 = type != DType::kQ6_K;
    const bool q5 = type == DType::kQ5_K;
    const int64_t block_bytes = type == DType::kQ4_K ? 2368 : q5 ? 2880 : 3360;
    const int64_t after_qh = q5 ? 512 : 0;
    for (int64_t row = 0; row < 32; ++row) {
      const int64_t p = row / 16, r = row % 16;
      for (int64_t i = 0; i < kCols / 256; ++i) {
        const uint8_t* block = m.packed.data() +
                               p * PackedPanelBytes(type, kCols) +
                               i * block_bytes;
        const uint8_t* file = row < m.rows
                                  ? m.RowView().Row(row) + i * BlockBytes(type)
                                  : nullptr;
        auto lane = [&](int64_t run, int64_t g, int64_t k) {
          return block[run + (g * 16 + r) * 4 + k];
        };
        const std::string where = std::string(DTypeName(type)) + " row " +
                                  std::to_string(row) + " block " +
                                  std::to_string(i);
        if (q4) {
          const size_t qs =
              q5 ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);
          for (int64_t j = 0; j < 4; ++j) {
            for (int64_t g = 0; g < 8; ++g) {
              for (int64_t k = 0; k < 4; ++k) {
                const uint8_t want = file ? file[qs + 32 * j + 4 * g + k] : 0;
                ASSERT_EQ(lane(0, j * 8 + g, k), want) << where;
              }
            }
          }
          for (int64_t g = 0; q5 && g < 8; ++g) {
            for (int64_t k = 0; k < 4; ++k) {
              const uint8_t want =
                  file ? file[offsetof(BlockQ5_K, qh) + 4 * g + k] : 0;
              ASSERT_EQ(lane(2048, g, k), want) << where << " qh";
            }
          }
          const uint8_t* s =
              file ? file + offsetof(BlockQ4_K, scales) : nullptr;
          for (int k = 0; k < 8; ++k) {
            int sc = 0, mn = 0;
            if (s != nullptr) {
              sc =
                  k < 4 ? s[k] & 63 : (s[k + 4] & 0xf) | ((s[k - 4] >> 6) << 4);
              mn = k < 4 ? s[k + 4] & 63 : (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
            }
            ASSERT_EQ(block[after_qh + 2048 + k * 16 + r], sc)
                << where << " scale " << k;
            ASSERT_EQ(block[after_qh + 2176 + k * 16 + r], mn)
                << where << " min " << k;
          }
          for (int f = 0; f < 2; ++f) {
            uint16_t got, want = 0;
            std::memcpy(&got, block + after_qh + 2304 + 32 * f + 2 * r, 2);
            if (file) std::memcpy(&want, file + 2 * f, 2);
            ASSERT_EQ(got, want) << where << (f ? " dmin" : " d");
          }
        } else {
          for (int64_t n = 0; n < 2; ++n) {
            for (int64_t g = 0; g < 8; ++g) {
              for (int64_t k = 0; k < 4; ++k) {
                for (int64_t c = 0; c < 2; ++c) {
                  const uint8_t want = file ? file[offsetof(BlockQ6_K, ql) +
                                                   64 * n + 32 * c + 4 * g + k]
                                            : 0;
                  ASSERT_EQ(lane(0, (n * 2 + c) * 8 + g, k), want) << where;
                }
                const uint8_t want_h =
                    file ? file[offsetof(BlockQ6_K, qh) + 32 * n + 4 * g + k]
                         : 0;
                ASSERT_EQ(lane(2048, n * 8 + g, k), want_h) << where;
              }
            }
          }
          for (int k = 0; k < 16; ++k) {
            const uint8_t want =
                file ? file[offsetof(BlockQ6_K, scales) + k] : 0;
            ASSERT_EQ(block[3072 + k * 16 + r], want) << where << " scale";
          }
          uint16_t got, want = 0;
          std::memcpy(&got, block + 3328 + 2 * r, 2);
          if (file) std::memcpy(&want, file + offsetof(BlockQ6_K, d), 2);
          ASSERT_EQ(got, want) << where << " d";
        }
      }
    }
  }
}

}  // namespace
}  // namespace redline::kernels

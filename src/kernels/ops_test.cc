// Element-wise and row-wise ops on every ISA this CPU runs, against the
// scalar reference and against closed forms in f64.
//
// Tolerances: RmsNorm, Add: 1e-6 relative (same f32 operations, f64 sums);
// Softmax: 2e-6 relative (SIMD exp is a polynomial, ~2 ulp); SiluMul: 2e-6
// relative against f64, and bit-identical between ISAs;
// AttentionHead: 1e-5 of max |v| (f32 dot products in another order).
// AttentionHeadF16: 2e-3 of max |v| between ISAs (the f32 dot products differ
// in order, which can flip a binary16 rounding of the running output); 1e-2
// of max |v| against exact f64 attention over the same binary16 inputs (the
// output is accumulated in binary16, as ggml does).
// Rope: bit-identical to the reference on every ISA (the same fma and
// product per output). Argmax: exact (the documented tie and NaN rule).
// AttentionChunk: 1e-5 relative (max, sum) and 2e-5 absolute on outputs of
// |v| <= 2 against the f64 reference and exact attention, chunks merged or
// not (f32 sums, a ~2 ulp exp).
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/float16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace redline::kernels {
namespace {

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

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

class OpsTest : public testing::TestWithParam<Isa> {};

const int64_t kSizes[] = {1, 5, 8, 15, 16, 17, 33, 64, 576, 896, 4097};

TEST_P(OpsTest, RmsNormMatchesReference) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = RandomFloats(n, 1, -3.0f, 3.0f);
    const std::vector<float> w = RandomFloats(n, 2, 0.5f, 1.5f);
    std::vector<float> expected(n), actual(n);
    {
      ScopedIsa s(Isa::kScalar);
      RmsNorm(x.data(), w.data(), n, 1e-6f, expected.data());
    }
    {
      ScopedIsa s(GetParam());
      RmsNorm(x.data(), w.data(), n, 1e-6f, actual.data());
      std::vector<float> in_place = x;
      RmsNorm(in_place.data(), w.data(), n, 1e-6f, in_place.data());
      EXPECT_EQ(in_place, actual) << "n=" << n;
    }
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv_rms = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(actual[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-30)
          << "n=" << n << " i=" << i;
      ASSERT_NEAR(actual[i], x[i] * inv_rms * w[i],
                  1e-6 * std::fabs(x[i] * inv_rms * w[i]) + 1e-30);
    }
  }
}

TEST_P(OpsTest, SoftmaxMatchesReferenceAndClosedForm) {
  ScopedIsa s(GetParam());
  for (int64_t n : kSizes) {
    std::vector<float> x = RandomFloats(n, 3, -30.0f, 30.0f);
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // masked entry
    // x - max is rounded to f32 in every implementation (that rounding alone
    // moves exp by up to |x - max| * 2^-24); the closed form does the same.
    float max = -INFINITY;
    for (float v : x) max = std::fmax(max, v);
    double sum = 0.0;
    for (float v : x) sum += std::exp(static_cast<double>(v - max));
    std::vector<float> actual = x;
    Softmax(actual.data(), n);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i] - max)) / sum;
      ASSERT_NEAR(actual[i], want, 2e-6 * want + 1e-37)
          << "n=" << n << " i=" << i;
      total += actual[i];
    }
    if (n > 3) {
      EXPECT_EQ(actual[2], 0.0f);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST_P(OpsTest, SoftmaxOfLargeLogits) {
  ScopedIsa s(GetParam());
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f, 1000.0f};
  Softmax(x.data(), 4);
  const double e1 = std::exp(-1.0);
  EXPECT_NEAR(x[0], 1.0 / (2.0 + e1), 1e-6);
  EXPECT_NEAR(x[1], e1 / (2.0 + e1), 1e-6);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_NEAR(x[3], 1.0 / (2.0 + e1), 1e-6);
}

TEST_P(OpsTest, SiluMulMatchesClosedForm) {
  ScopedIsa s(GetParam());
  for (int64_t n : kSizes) {
    std::vector<float> g = RandomFloats(n, 4, -20.0f, 20.0f);
    const std::vector<float> u = RandomFloats(n, 5, -2.0f, 2.0f);
    if (n > 4) {
      g[0] = -80.0f;
      g[1] = 80.0f;
      g[2] = 0.0f;
      g[3] = -100.0f;  // exp(100) overflows in f32: the result must still be ~0
    }
    std::vector<float> out(n);
    SiluMul(g.data(), u.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[i];
      const double want = gi / (1.0 + std::exp(-gi)) * u[i];
      ASSERT_NEAR(out[i], want, 2e-6 * std::fabs(want) + 1e-37)
          << "n=" << n << " g=" << gi;
    }
    std::vector<float> alias = g;
    SiluMul(alias.data(), u.data(), n, alias.data());
    EXPECT_EQ(alias, out);
    std::vector<float> scalar(n);
    {
      ScopedIsa ref(Isa::kScalar);
      SiluMul(g.data(), u.data(), n, scalar.data());
    }
    EXPECT_EQ(scalar, out) << "every ISA computes the same e^x";
  }
}

TEST_P(OpsTest, AddIsExact) {
  ScopedIsa s(GetParam());
  for (int64_t n : kSizes) {
    const std::vector<float> x = RandomFloats(n, 6);
    const std::vector<float> y0 = RandomFloats(n, 7);
    std::vector<float> y = y0;
    Add(x.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], y0[i] + x[i]);
  }
}

TEST_P(OpsTest, RopeRotatesTheDocumentedPairs) {
  ScopedIsa s(GetParam());
  const int64_t n_heads = 3, head_dim = 8, pos = 5;
  const float theta_scale = 0.1f;
  const std::vector<float> freq_factors = {1.0f, 2.0f, 4.0f, 8.0f};
  const std::vector<float> x = RandomFloats(n_heads * head_dim, 8);
  for (const float* factors :
       {static_cast<const float*>(nullptr), freq_factors.data()}) {
    std::vector<float> cos_sin(head_dim);
    RopeCosSin(pos, head_dim / 2, theta_scale, factors, cos_sin.data());
    for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
      std::vector<float> y = x;
      Rope(y.data(), n_heads, head_dim, cos_sin.data(), style);
      for (int64_t h = 0; h < n_heads; ++h) {
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          const int64_t a = style == RopeStyle::kNorm ? 2 * i : i;
          const int64_t b =
              style == RopeStyle::kNorm ? 2 * i + 1 : i + head_dim / 2;
          const double angle = pos * std::pow(double(theta_scale), double(i)) /
                               (factors ? factors[i] : 1.0);
          EXPECT_NEAR(cos_sin[2 * i], std::cos(angle), 1e-6);
          EXPECT_NEAR(cos_sin[2 * i + 1], std::sin(angle), 1e-6);
          const double x0 = x[h * head_dim + a], x1 = x[h * head_dim + b];
          EXPECT_NEAR(y[h * head_dim + a],
                      x0 * std::cos(angle) - x1 * std::sin(angle), 1e-6);
          EXPECT_NEAR(y[h * head_dim + b],
                      x0 * std::sin(angle) + x1 * std::cos(angle), 1e-6);
        }
      }
    }
  }
  std::vector<float> cos_sin(head_dim);
  RopeCosSin(0, head_dim / 2, theta_scale, nullptr, cos_sin.data());
  std::vector<float> z = x;
  Rope(z.data(), n_heads, head_dim, cos_sin.data(), RopeStyle::kNorm);
  EXPECT_EQ(z, x) << "position 0 is the identity";
}

TEST_P(OpsTest, AttentionHeadMatchesReference) {
  for (int64_t head_dim : {5, 64, 80, 128}) {
    for (int64_t n_kv : {1, 2, 7, 33, 300}) {
      // Rows interleaved with other heads.
      const int64_t kv_stride = head_dim * 2 + 3;
      const std::vector<float> q = RandomFloats(head_dim, 9, -2.0f, 2.0f);
      const std::vector<float> k =
          RandomFloats(n_kv * kv_stride, 10, -2.0f, 2.0f);
      const std::vector<float> v =
          RandomFloats(n_kv * kv_stride, 11, -2.0f, 2.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> scores(n_kv), expected(head_dim), actual(head_dim);
      {
        ScopedIsa s(Isa::kScalar);
        AttentionHead(q.data(), k.data(), v.data(), n_kv, head_dim, kv_stride,
                      scale, scores.data(), expected.data());
      }
      {
        ScopedIsa s(GetParam());
        AttentionHead(q.data(), k.data(), v.data(), n_kv, head_dim, kv_stride,
                      scale, scores.data(), actual.data());
      }
      for (int64_t d = 0; d < head_dim; ++d) {
        ASSERT_NEAR(actual[d], expected[d], 1e-5 * 2.0)
            << "head_dim=" << head_dim << " n_kv=" << n_kv;
      }
      if (n_kv == 1) {
        for (int64_t d = 0; d < head_dim; ++d)
          ASSERT_NEAR(actual[d], v[d], 1e-6);
      }
    }
  }
}

std::vector<uint16_t> ToHalf(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = Fp32ToFp16(x[i]);
  return h;
}

TEST_P(OpsTest, AttentionHeadF16MatchesReferenceAndExactAttention) {
  for (int64_t head_dim : {5, 64, 80, 128}) {
    for (int64_t n_kv : {1, 2, 7, 33, 300}) {
      // Rows interleaved with other heads.
      const int64_t kv_stride = head_dim * 2 + 3;
      const std::vector<float> q = RandomFloats(head_dim, 9, -2.0f, 2.0f);
      const std::vector<uint16_t> k =
          ToHalf(RandomFloats(n_kv * kv_stride, 10, -2.0f, 2.0f));
      const std::vector<uint16_t> v =
          ToHalf(RandomFloats(n_kv * kv_stride, 11, -2.0f, 2.0f));
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> work(2 * head_dim), expected(head_dim),
          actual(head_dim);
      {
        ScopedIsa s(Isa::kScalar);
        AttentionHeadF16(q.data(), k.data(), v.data(), n_kv, head_dim,
                         kv_stride, scale, work.data(), expected.data());
      }
      {
        ScopedIsa s(GetParam());
        AttentionHeadF16(q.data(), k.data(), v.data(), n_kv, head_dim,
                         kv_stride, scale, work.data(), actual.data());
      }
      // Exact attention in f64 over the binary16 q, k, v.
      std::vector<double> p(n_kv);
      double max = -1e300, sum = 0;
      for (int64_t i = 0; i < n_kv; ++i) {
        double dot = 0;
        for (int64_t d = 0; d < head_dim; ++d) {
          dot += double(Fp16ToFp32(Fp32ToFp16(q[d]))) *
                 Fp16ToFp32(k[i * kv_stride + d]);
        }
        p[i] = dot * scale;
        max = std::max(max, p[i]);
      }
      for (double& e : p) sum += (e = std::exp(e - max));
      for (int64_t d = 0; d < head_dim; ++d) {
        double exact = 0;
        for (int64_t i = 0; i < n_kv; ++i)
          exact += p[i] / sum * Fp16ToFp32(v[i * kv_stride + d]);
        ASSERT_NEAR(actual[d], expected[d], 2e-3 * 2.0)
            << "head_dim=" << head_dim << " n_kv=" << n_kv;
        ASSERT_NEAR(actual[d], exact, 1e-2 * 2.0)
            << "head_dim=" << head_dim << " n_kv=" << n_kv;
        // One position: the output is that position's value, exactly.
        if (n_kv == 1) {
          ASSERT_EQ(actual[d], Fp16ToFp32(v[d]));
        }
      }
    }
  }
}

// K or V rows of n_kv positions, each holding two heads and 6 bytes of
// padding (head 1 is the one read), in the element type: f16 rounds,
// q8_0 quantises per block as the KV cache does.
struct KvRows {
  std::vector<uint8_t> bytes;
  int64_t row_bytes = 0;
  int64_t head_bytes = 0;
  const uint8_t* head1() const { return bytes.data() + head_bytes; }
};

KvRows MakeKvRows(KvElement type, int64_t n_kv, int64_t head_dim,
                  uint32_t seed) {
  KvRows r;
  r.head_bytes = type == KvElement::kF16 ? 2 * head_dim : head_dim / 32 * 34;
  r.row_bytes = 2 * r.head_bytes + 6;
  r.bytes.assign(static_cast<size_t>(n_kv * r.row_bytes), 0xff);
  const std::vector<float> x = RandomFloats(n_kv * 2 * head_dim, seed, -2, 2);
  for (int64_t i = 0; i < n_kv; ++i) {
    for (int64_t h = 0; h < 2; ++h) {
      const float* src = x.data() + (i * 2 + h) * head_dim;
      uint8_t* dst = r.bytes.data() + i * r.row_bytes + h * r.head_bytes;
      if (type == KvElement::kF16) {
        for (int64_t d = 0; d < head_dim; ++d) {
          const uint16_t h16 = Fp32ToFp16(src[d]);
          std::memcpy(dst + 2 * d, &h16, 2);
        }
      } else {
        QuantizeRow(DType::kQ8_0, src, head_dim, dst);
      }
    }
  }
  return r;
}

// Element d of position i's head 1, as the kernels read it.
double KvAt(KvElement type, const KvRows& r, int64_t i, int64_t d) {
  const uint8_t* row = r.head1() + i * r.row_bytes;
  if (type == KvElement::kF16) {
    uint16_t h16;
    std::memcpy(&h16, row + 2 * d, 2);
    return Fp16ToFp32(h16);
  }
  uint16_t scale;
  std::memcpy(&scale, row + d / 32 * 34, 2);
  return double(Fp16ToFp32(scale)) *
         static_cast<int8_t>(row[d / 32 * 34 + 2 + d % 32]);
}

// Exact attention in f64 of query q [head_dim] over n_kv positions.
std::vector<double> ExactAttention(KvElement type, const float* q,
                                   const KvRows& k, const KvRows& v,
                                   int64_t n_kv, int64_t head_dim,
                                   float scale) {
  std::vector<double> p(n_kv), out(head_dim, 0.0);
  double max = -1e300, sum = 0;
  for (int64_t i = 0; i < n_kv; ++i) {
    double dot = 0;
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * KvAt(type, k, i, d);
    max = std::max(max, p[i] = dot * scale);
  }
  for (double& e : p) sum += (e = std::exp(e - max));
  for (int64_t i = 0; i < n_kv; ++i) {
    for (int64_t d = 0; d < head_dim; ++d) {
      out[d] += p[i] / sum * KvAt(type, v, i, d);
    }
  }
  return out;
}

TEST_P(OpsTest, AttentionChunkMatchesReferenceForEveryElementType) {
  for (KvElement type : {KvElement::kF16, KvElement::kQ8_0}) {
    for (int64_t head_dim : {8, 16, 32, 64, 80, 128}) {
      if (type == KvElement::kQ8_0 && head_dim % 32 != 0) continue;
      for (int64_t n_q : {1, 3, 7, 18}) {
        for (int64_t n_kv : {1, 2, 8, 15, 16, 17, 100, 256}) {
          const KvRows k = MakeKvRows(type, n_kv, head_dim, 20);
          const KvRows v = MakeKvRows(type, n_kv, head_dim, 21);
          const std::vector<float> q =
              RandomFloats(n_q * head_dim, 22, -2.0f, 2.0f);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          const int64_t floats = AttentionPartialFloats(n_q, head_dim);
          std::vector<float> work(AttentionChunkWorkFloats(head_dim)),
              expected(floats), actual(floats), out(n_q * head_dim);
          {
            ScopedIsa s(Isa::kScalar);
            AttentionChunk(type, q.data(), n_q, k.head1(), v.head1(), n_kv,
                           head_dim, k.row_bytes, scale, work.data(),
                           expected.data());
          }
          {
            ScopedIsa s(GetParam());
            AttentionChunk(type, q.data(), n_q, k.head1(), v.head1(), n_kv,
                           head_dim, k.row_bytes, scale, work.data(),
                           actual.data());
          }
          MergeAttention(actual.data(), 1, n_q, head_dim, out.data());
          const std::string where =
              "type=" + std::to_string(static_cast<int>(type)) +
              " head_dim=" + std::to_string(head_dim) +
              " n_q=" + std::to_string(n_q) + " n_kv=" + std::to_string(n_kv);
          for (int64_t h = 0; h < n_q; ++h) {
            const float max_e = expected[n_q * head_dim + h];
            const float max_a = actual[n_q * head_dim + h];
            ASSERT_NEAR(max_a, max_e, 1e-5 * (1 + std::fabs(max_e))) << where;
            const float sum_e = expected[n_q * (head_dim + 1) + h];
            const float sum_a = actual[n_q * (head_dim + 1) + h];
            ASSERT_NEAR(sum_a, sum_e, 1e-5 * sum_e) << where;
            const std::vector<double> exact = ExactAttention(
                type, q.data() + h * head_dim, k, v, n_kv, head_dim, scale);
            for (int64_t d = 0; d < head_dim; ++d) {
              // |v| <= 2: 1e-5 of it.
              ASSERT_NEAR(out[h * head_dim + d], exact[d], 2e-5) << where;
              ASSERT_NEAR(actual[h * head_dim + d] / sum_a,
                          expected[h * head_dim + d] / sum_e, 2e-5)
                  << where;
              // One position: its value exactly.
              if (n_kv == 1) {
                ASSERT_EQ(out[h * head_dim + d],
                          static_cast<float>(KvAt(type, v, 0, d)))
                    << where;
              }
            }
          }
        }
      }
    }
  }
}

// The transformer hands one call the query heads of several tokens that see
// the same chunk: each head's partial must be what a call of its own gives.
TEST_P(OpsTest, AttentionChunkTreatsEveryQueryHeadAlone) {
  ScopedIsa s(GetParam());
  for (KvElement type : {KvElement::kF16, KvElement::kQ8_0}) {
    for (int64_t head_dim : {16, 32, 64, 80, 128}) {
      if (type == KvElement::kQ8_0 && head_dim % 32 != 0) continue;
      // Groups of heads that the kernels take in blocks of their own sizes
      // (and more heads than one block of scores holds), over whole and
      // partial chunks.
      for (const auto [group, tokens, n_kv] :
           {std::array<int64_t, 3>{7, 3, 256},
            {2, 9, 256},
            {2, 9, 37},
            {1, 5, 200},
            {4, 17, 19}}) {
        const int64_t n_q = group * tokens;
        const KvRows k = MakeKvRows(type, n_kv, head_dim, 30);
        const KvRows v = MakeKvRows(type, n_kv, head_dim, 31);
        const std::vector<float> q =
            RandomFloats(n_q * head_dim, 32, -2.0f, 2.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        std::vector<float> work(AttentionChunkWorkFloats(head_dim));
        std::vector<float> all(AttentionPartialFloats(n_q, head_dim));
        AttentionChunk(type, q.data(), n_q, k.head1(), v.head1(), n_kv,
                       head_dim, k.row_bytes, scale, work.data(), all.data());
        for (int64_t t = 0; t < tokens; ++t) {
          std::vector<float> one(AttentionPartialFloats(group, head_dim));
          AttentionChunk(type, q.data() + t * group * head_dim, group,
                         k.head1(), v.head1(), n_kv, head_dim, k.row_bytes,
                         scale, work.data(), one.data());
          const std::string where =
              "type=" + std::to_string(static_cast<int>(type)) +
              " head_dim=" + std::to_string(head_dim) +
              " group=" + std::to_string(group) +
              " n_kv=" + std::to_string(n_kv) + " token=" + std::to_string(t);
          for (int64_t i = 0; i < group * head_dim; ++i) {
            ASSERT_EQ(one[i], all[t * group * head_dim + i]) << where;
          }
          for (int64_t h = 0; h < group; ++h) {
            ASSERT_EQ(one[group * head_dim + h],
                      all[n_q * head_dim + t * group + h])
                << where;
            ASSERT_EQ(one[group * (head_dim + 1) + h],
                      all[n_q * (head_dim + 1) + t * group + h])
                << where;
          }
        }
      }
    }
  }
}

TEST_P(OpsTest, MergedChunksEqualExactAttentionOverTheWholeSequence) {
  ScopedIsa s(GetParam());
  const int64_t head_dim = 64, n_q = 2;
  for (KvElement type : {KvElement::kF16, KvElement::kQ8_0}) {
    for (int64_t n_kv : {257, 700, 2048}) {
      const KvRows k = MakeKvRows(type, n_kv, head_dim, 30);
      const KvRows v = MakeKvRows(type, n_kv, head_dim, 31);
      // Large scores, so the chunks' maxima differ widely.
      const std::vector<float> q = RandomFloats(n_q * head_dim, 32, -6, 6);
      const float scale = 0.125f;
      const int64_t floats = AttentionPartialFloats(n_q, head_dim);
      const int64_t n_chunks =
          (n_kv + kAttentionChunkKeys - 1) / kAttentionChunkKeys;
      std::vector<float> work(AttentionChunkWorkFloats(head_dim)),
          partials(n_chunks * floats), out(n_q * head_dim);
      for (int64_t c = 0; c < n_chunks; ++c) {
        const int64_t begin = c * kAttentionChunkKeys;
        AttentionChunk(type, q.data(), n_q, k.head1() + begin * k.row_bytes,
                       v.head1() + begin * v.row_bytes,
                       std::min(kAttentionChunkKeys, n_kv - begin), head_dim,
                       k.row_bytes, scale, work.data(),
                       partials.data() + c * floats);
      }
      MergeAttention(partials.data(), n_chunks, n_q, head_dim, out.data());
      for (int64_t h = 0; h < n_q; ++h) {
        const std::vector<double> exact = ExactAttention(
            type, q.data() + h * head_dim, k, v, n_kv, head_dim, scale);
        for (int64_t d = 0; d < head_dim; ++d) {
          ASSERT_NEAR(out[h * head_dim + d], exact[d], 2e-5)
              << "type=" << static_cast<int>(type) << " n_kv=" << n_kv;
        }
      }
    }
  }
}

TEST_P(OpsTest, RopeEqualsReferenceBitForBit) {
  for (int64_t head_dim : {2, 4, 8, 14, 16, 30, 32, 34, 48, 64, 80, 128, 256}) {
    for (int64_t n_heads : {1, 3, 14}) {
      for (int64_t pos : {1, 7, 4095}) {
        std::vector<float> cos_sin(head_dim);
        RopeCosSin(pos, head_dim / 2, 0.7f, nullptr, cos_sin.data());
        const std::vector<float> x =
            RandomFloats(n_heads * head_dim, 40 + head_dim, -3.0f, 3.0f);
        for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
          std::vector<float> want = x;
          {
            ScopedIsa ref(Isa::kScalar);
            Rope(want.data(), n_heads, head_dim, cos_sin.data(), style);
          }
          std::vector<float> got = x;
          {
            ScopedIsa s(GetParam());
            Rope(got.data(), n_heads, head_dim, cos_sin.data(), style);
          }
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]),
                      std::bit_cast<uint32_t>(want[i]))
                << "head_dim " << head_dim << " heads " << n_heads << " style "
                << static_cast<int>(style) << " at " << i;
          }
        }
      }
    }
  }
}

// Every vector lane and tail length against the scalar conversion, on the
// values where conversions differ: halfway cases, the overflow and
// subnormal boundaries, signed zeros, infinities and NaNs with payloads.
TEST_P(OpsTest, ToF16EqualsScalarConversionBitForBit) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {0.0f,
                                -0.0f,
                                1.0f,
                                -1.0f,
                                65504.0f,
                                65519.99f,
                                65520.0f,
                                -65520.0f,
                                1e9f,
                                inf,
                                -inf,
                                std::numeric_limits<float>::denorm_min(),
                                5.96046448e-8f,  // smallest binary16 subnormal
                                2.98023224e-8f,  // half of it: ties to 0
                                2.98023253e-8f,  // just above half
                                6.09755516e-5f,  // largest subnormal
                                6.10351562e-5f,  // smallest normal
                                1.0f + 1.0f / 2048,  // tie, rounds to even
                                1.0f + 3.0f / 2048,  // tie, rounds up
                                std::bit_cast<float>(0x7fc00000u),
                                std::bit_cast<float>(0xffc00000u),
                                std::bit_cast<float>(0x7f800001u),
                                std::bit_cast<float>(0x7fbfffffu),
                                std::bit_cast<float>(0xffffe000u)};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> x;
  for (int rep = 0; rep < 12; ++rep) {  // 1248 values
    for (float v : special) x.push_back(v);
    for (int i = 0; i < 40; ++i) {
      x.push_back(std::bit_cast<float>(bits(rng)));  // any exponent
      x.push_back(RandomFloats(1, bits(rng), -70000.0f, 70000.0f)[0]);
    }
  }
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 1000}) {
    for (int64_t start : {0, 3}) {
      std::vector<uint16_t> got(n + 1, 0xabcd);
      {
        ScopedIsa s(GetParam());
        ToF16(x.data() + start, n, got.data());
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], Fp32ToFp16(x[start + i]))
            << "n " << n << " start " << start << " at " << i << " value "
            << x[start + i];
      }
      ASSERT_EQ(got[n], 0xabcd) << "wrote past n = " << n;
    }
  }
}

// The documented rule, spelled out: the first of equal maxima, NaNs skipped,
// 0 when all are NaN.
int64_t ArgmaxByRule(const std::vector<float>& x) {
  int64_t best = -1;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = static_cast<int64_t>(i);
  }
  return best < 0 ? 0 : best;
}

TEST_P(OpsTest, ArgmaxFollowsTheRuleOnTiesNansAndInfinities) {
  ScopedIsa s(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(77);
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= 70; ++n) sizes.push_back(n);
  for (int64_t n : {255, 256, 257, 1000, 32000, 151936}) sizes.push_back(n);
  for (int64_t n : sizes) {
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> x(n);
      // Few distinct values, so that maxima repeat.
      std::uniform_int_distribution<int> level(-4, 4);
      for (float& v : x) v = 0.25f * level(rng);
      std::uniform_int_distribution<int64_t> at(0, n - 1);
      switch (trial) {
        case 0:
          break;
        case 1:  // NaNs scattered, one on every position class
          for (int k = 0; k < 1 + n / 8; ++k) x[at(rng)] = nan;
          break;
        case 2:
          std::fill(x.begin(), x.end(), nan);
          break;
        case 3:
          std::fill(x.begin(), x.end(), -inf);
          break;
        case 4:  // -inf with NaNs before it
          std::fill(x.begin(), x.end(), -inf);
          for (int k = 0; k < 1 + n / 4; ++k) x[at(rng)] = nan;
          break;
        case 5:
          x[n - 1] = inf;
          break;
        case 6:
          x[0] = inf;
          x[n - 1] = inf;
          break;
        case 7:  // +0 and -0 compare equal: the first stays
          std::fill(x.begin(), x.end(), -1.0f);
          x[at(rng)] = -0.0f;
          x[at(rng)] = 0.0f;
          break;
        case 8:  // a single finite value among NaNs
          std::fill(x.begin(), x.end(), nan);
          x[at(rng)] = -3.5f;
          break;
        case 9:  // a strictly increasing run
          for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
          break;
        case 10:  // maxima near the end of a vector and in the tail
          x[at(rng)] = 9.0f;
          x[n - 1] = 9.0f;
          break;
        default:
          for (float& v : x) v = std::uniform_real_distribution<float>()(rng);
          break;
      }
      ASSERT_EQ(Argmax(x.data(), n), ArgmaxByRule(x))
          << "n=" << n << " trial " << trial;
    }
  }
  EXPECT_EQ(Argmax(nullptr, 0), 0);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, OpsTest, testing::ValuesIn(AvailableIsas()),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

}  // namespace
}  // namespace redline::kernels

// Draft-model speculative decoding: the vocabulary check, the draft cache
// following the accepted tokens, and the property that matters: the tokens
// are those plain decoding gives, greedy and seeded, in Generator and in the
// batching Engine, for a smaller draft, a draft with a different (but
// compatible) vocabulary size, and the target as its own draft; sampled
// drafts are accepted as often as the models agree, and sampled answers
// pass a chi-square test against plain sampling.
#include "engine/draft_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_test_model.h"
#include "engine/generator.h"
#include "kernels/isa.h"
#include "model/arch/model.h"
#include "model/arch/synthetic.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {
namespace {

// A synthetic model: `preset`, optionally reshaped (layers, width, vocab).
std::unique_ptr<model::Model> MakeModel(const std::string& preset,
                                        kernels::DType type, uint64_t seed,
                                        int64_t layers = 0, int64_t width = 0,
                                        int64_t vocab = 0) {
  auto spec = model::SyntheticPreset(preset);
  EXPECT_TRUE(spec.ok());
  if (layers > 0) spec->block_count = layers;
  if (width > 0) {
    spec->embedding_length = width;
    spec->feed_forward_length = 3 * width;
  }
  if (vocab > 0) spec->vocab_size = vocab;
  const std::string path =
      (std::filesystem::temp_directory_path() /
       fmt::format("redline_draft_{}_{}_{}_{}_{}_{}_{}.gguf", preset,
                   static_cast<int>(type), seed, layers, width, vocab,
                   getpid()))
          .string();
  ThreadPool pool(2);
  EXPECT_TRUE(model::WriteSyntheticModel(*spec, type, seed, path, pool).ok());
  auto m = model::Model::Load(path);
  std::filesystem::remove(path);  // the mapping stays valid
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<std::vector<int32_t>> Prompts(int32_t vocab) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> rep = {1};
  for (int r = 0; r < 4; ++r)
    for (int32_t t : {17, 42, 99, 5, 63, 7, 21}) rep.push_back(t % vocab);
  prompts.push_back(rep);
  std::vector<int32_t> plain = {1};
  for (int i = 0; i < 20; ++i) plain.push_back((i * 37 + 11) % vocab);
  prompts.push_back(plain);
  return prompts;
}

model::SamplingParams Params(bool greedy, int max_tokens = 40) {
  model::SamplingParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  if (greedy) {
    p.temperature = 0;
  } else {
    p.temperature = 0.9f;
    p.seed = 1234;
  }
  return p;
}

bool Keep(std::string_view, int32_t) { return true; }

TEST(DraftVocabularyTest, CompatibleModelsPass) {
  auto tiny = MakeModel("tiny", kernels::DType::kQ8_0, 1);
  auto small = MakeModel("tiny", kernels::DType::kQ4_0, 2, 1, 32);
  auto qwen = MakeModel("tiny-qwen2", kernels::DType::kQ8_0, 3);  // vocab 640
  ASSERT_TRUE(tiny && small && qwen);
  EXPECT_TRUE(CheckDraftVocabulary(*tiny, *tiny).ok());
  EXPECT_TRUE(CheckDraftVocabulary(*tiny, *small).ok());
  // 512 vs 640 ids: within the tolerance, the shared ids have equal texts.
  EXPECT_TRUE(CheckDraftVocabulary(*tiny, *qwen).ok());
  EXPECT_TRUE(CheckDraftVocabulary(*qwen, *tiny).ok());
}

TEST(DraftVocabularyTest, MismatchesAreClearErrors) {
  auto tiny = MakeModel("tiny", kernels::DType::kQ8_0, 1);
  auto big = MakeModel("tiny", kernels::DType::kQ8_0, 1, 1, 32, 1024);
  ASSERT_TRUE(tiny && big);
  Status s = CheckDraftVocabulary(*tiny, *big);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("1024 tokens, the target's 512"),
            std::string::npos)
      << s.message();

  // Token texts and special ids, on tokenizers built from specs.
  auto spec = [](std::vector<std::string> tokens, int32_t eos) {
    model::TokenizerSpec t;
    t.model = "llama";
    t.tokens = std::move(tokens);
    t.bos_id = 1;
    t.eos_id = eos;
    t.unk_id = 0;
    auto made = model::Tokenizer::FromSpec(std::move(t));
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return std::move(made).value();
  };
  auto a = spec({"<unk>", "<s>", "</s>", "a", "b", "c"}, 2);
  auto b = spec({"<unk>", "<s>", "</s>", "a", "x", "c"}, 2);
  auto c = spec({"<unk>", "<s>", "</s>", "a", "b", "c"}, 5);
  EXPECT_TRUE(CheckDraftVocabulary(a.get(), 6, a.get(), 6).ok());
  s = CheckDraftVocabulary(a.get(), 6, b.get(), 6);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at token 4: 'x' vs 'b'"), std::string::npos)
      << s.message();
  s = CheckDraftVocabulary(a.get(), 6, c.get(), 6);
  EXPECT_NE(s.message().find("EOS token id is 5, the target's is 2"),
            std::string::npos)
      << s.message();
  s = CheckDraftVocabulary(a.get(), 6, nullptr, 6);
  EXPECT_NE(s.message().find("the draft model has no vocabulary"),
            std::string::npos)
      << s.message();

  // Generator and Engine refuse the pair at creation.
  ThreadPool pool(2);
  auto g =
      Generator::Create(*tiny, pool, 128, 64, model::KvType::kF16, big.get());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EngineOptions o;
  o.n_ctx = 128;
  o.parallel = 1;
  o.speculative.enabled = true;
  o.draft_model = big.get();
  auto e = Engine::Create(*tiny, pool, o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
}

// The draft cache follows the history it is given: after proposing for one
// history, proposing for a different one (rejected draft tokens, a new
// turn) gives what a fresh cache gives.
TEST(DraftModelTest, CacheFollowsTheHistory) {
  auto target = MakeModel("tiny", kernels::DType::kF32, 5);
  auto draft_model = MakeModel("tiny", kernels::DType::kF32, 6, 1);
  ASSERT_TRUE(target && draft_model);
  ThreadPool pool(2);
  DraftModel draft(*draft_model, pool, target->config().vocab_size, 16);
  DraftSequence reused = draft.NewSequence(256, model::KvType::kF32);
  auto propose = [&](DraftSequence& seq, const std::vector<int32_t>& h) {
    std::vector<int32_t> out;
    DraftModel::Job job{&seq, h, nullptr, 0, 5, &out};
    EXPECT_TRUE(draft.Propose(std::span(&job, 1)).ok());
    return out;
  };
  std::vector<int32_t> h = {1,   300, 301, 302, 303, 304, 305, 306, 307, 308,
                            309, 310, 311, 312, 313, 314, 315, 316, 317, 318};
  std::vector<int32_t> first = propose(reused, h);
  ASSERT_EQ(first.size(), 5u);
  // The cache holds the history and the first four draft tokens.
  EXPECT_EQ(reused.cached().size(), h.size() + 4);
  // Two draft tokens accepted, then the target chose something else.
  std::vector<int32_t> h2 = h;
  h2.push_back(first[0]);
  h2.push_back(first[1]);
  h2.push_back(first[2] == 400 ? 401 : 400);
  // Back to an earlier point, then a divergent history.
  std::vector<int32_t> h3(h.begin(), h.begin() + 8);
  h3.push_back(450);
  for (const auto& hist : {h2, h3, h2, h}) {
    DraftSequence fresh = draft.NewSequence(256, model::KvType::kF32);
    EXPECT_EQ(propose(reused, hist), propose(fresh, hist));
    EXPECT_EQ(std::vector<int32_t>(reused.cached().begin(),
                                   reused.cached().begin() + hist.size()),
              hist);
  }
  // A bounded catch-up advances the cache a chunk per call, drafting only
  // once it holds the whole history.
  DraftSequence chunked = draft.NewSequence(256, model::KvType::kF32);
  std::vector<int32_t> got;
  for (size_t want_cached : {8u, 16u}) {
    DraftModel::Job job{&chunked, h, nullptr, 0, 5, &got, 8};
    EXPECT_TRUE(draft.Propose(std::span(&job, 1)).ok());
    EXPECT_TRUE(got.empty());
    EXPECT_EQ(chunked.cached().size(), want_cached);
  }
  DraftModel::Job last{&chunked, h, nullptr, 0, 5, &got, 8};
  EXPECT_TRUE(draft.Propose(std::span(&last, 1)).ok());
  EXPECT_EQ(got, first);
  // k = 0 and k = 1.
  std::vector<int32_t> out;
  DraftModel::Job none{&reused, h, nullptr, 0, 0, &out};
  EXPECT_TRUE(draft.Propose(std::span(&none, 1)).ok());
  EXPECT_TRUE(out.empty());
  DraftModel::Job one{&reused, h, nullptr, 0, 1, &out};
  EXPECT_TRUE(draft.Propose(std::span(&one, 1)).ok());
  EXPECT_EQ(out, std::vector<int32_t>{first[0]});
}

struct Pair {
  std::string name;
  std::string target_preset;
  kernels::DType target_type;
  std::string draft_preset;  // "" = the target itself
  kernels::DType draft_type;
  int64_t draft_layers;     // 0: the preset's
  uint64_t draft_seed = 9;  // the target's is 5: 5 gives a copy's weights
};

class DraftEqualsPlainTest : public ::testing::TestWithParam<Pair> {};

TEST_P(DraftEqualsPlainTest, TokensAreThoseOfPlainDecoding) {
  const Pair& c = GetParam();
  auto target = MakeModel(c.target_preset, c.target_type, 5);
  ASSERT_TRUE(target);
  std::unique_ptr<model::Model> own;
  const model::Model* draft = target.get();
  if (!c.draft_preset.empty()) {
    own = MakeModel(c.draft_preset, c.draft_type, c.draft_seed, c.draft_layers);
    ASSERT_TRUE(own);
    draft = own.get();
  }
  ASSERT_TRUE(CheckDraftVocabulary(*target, *draft).ok());
  ThreadPool pool(2);
  const int32_t vocab = static_cast<int32_t>(target->config().vocab_size);
  int64_t drafted = 0, accepted = 0;
  for (const auto& prompt : Prompts(vocab)) {
    for (bool greedy : {true, false}) {
      const model::SamplingParams p = Params(greedy);
      Generator g1(*target, pool, 256, 64);
      auto base = g1.Generate(prompt, p, Keep);
      ASSERT_TRUE(base.ok());
      auto g2 =
          Generator::Create(*target, pool, 256, 64, model::KvType::kF16, draft);
      ASSERT_TRUE(g2.ok()) << g2.status().ToString();
      SpeculativeOptions so;
      so.enabled = true;
      so.pace_by_cost = false;  // counts below must not depend on timing
      so.max_draft_tokens = 6;
      auto fast = (*g2)->Generate(prompt, p, Keep, so);
      ASSERT_TRUE(fast.ok());
      EXPECT_EQ(fast->tokens, base->tokens)
          << c.name << " greedy=" << greedy << " isa "
          << kernels::IsaName(kernels::ActiveIsa());
      EXPECT_EQ(fast->text, base->text);
      const SpeculativeStats& s = fast->speculative;
      EXPECT_LE(s.accepted_tokens, s.drafted_tokens);
      EXPECT_EQ(s.tokens_emitted,
                static_cast<int64_t>(fast->tokens.size()) - 1);
      drafted += s.drafted_tokens;
      if (c.draft_preset.empty()) {
        // Its own draft: greedy proposals are the target's tokens, and
        // sampled ones too, drawn with the target's next random numbers (up
        // to the rounding of batched passes).
        EXPECT_GT(s.acceptance_rate(), 0.9) << c.name << " greedy=" << greedy;
        EXPECT_GT(s.tokens_per_pass(), 3.0) << c.name << " greedy=" << greedy;
      }
      accepted += s.accepted_tokens;
    }
  }
  EXPECT_GT(drafted, 0);
  if (c.draft_preset.empty() || c.draft_seed == 5) {
    EXPECT_GT(accepted, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pairs, DraftEqualsPlainTest,
    ::testing::Values(
        Pair{"self_q8", "tiny", kernels::DType::kQ8_0, "", {}, 0},
        Pair{"self_f32", "tiny", kernels::DType::kF32, "", {}, 0},
        Pair{"self_qwen2_f16", "tiny-qwen2", kernels::DType::kF16, "", {}, 0},
        // A quantised copy: proposals mostly right, sometimes not.
        Pair{"q4_copy_of_f16", "tiny", kernels::DType::kF16, "tiny",
             kernels::DType::kQ4_0, 0, 5},
        Pair{"small_f16", "tiny", kernels::DType::kF16, "tiny",
             kernels::DType::kQ4_0, 1},
        Pair{"small_q4", "tiny", kernels::DType::kQ4_0, "tiny",
             kernels::DType::kQ8_0, 1},
        // Vocabularies of 640 and 512 ids: the draft cannot read target
        // tokens beyond its vocabulary, nor propose beyond the target's.
        Pair{"qwen2_by_tiny", "tiny-qwen2", kernels::DType::kQ8_0, "tiny",
             kernels::DType::kQ8_0, 1},
        Pair{"tiny_by_qwen2", "tiny", kernels::DType::kQ8_0, "tiny-qwen2",
             kernels::DType::kQ8_0, 1}),
    [](const ::testing::TestParamInfo<Pair>& i) { return i.param.name; });

// Draft-model speculation inside continuous batching: drafts of several
// slots proposed in batched draft passes and verified next to other
// sequences' decode tokens and prompt chunks (small batches cut drafts),
// with one request opting out; every stream equals plain sequential
// generation, also in a second round where the slots' draft caches and
// prefix caches hold earlier requests.
TEST(DraftEngineTest, BatchedDraftSpeculationEqualsPlainDecoding) {
  auto target = MakeModel("tiny", kernels::DType::kQ8_0, 11);
  auto small = MakeModel("tiny", kernels::DType::kQ8_0, 12, 1, 32);
  ASSERT_TRUE(target && small);
  ThreadPool pool(2);
  auto prompt = [](int i) {
    std::vector<int32_t> p = {1};
    for (int r = 0; r < 3; ++r)
      for (int t : {40 + i, 41, 42 + i, 43}) p.push_back(t);
    return p;
  };
  auto params = [](int i) { return Params(i % 3 != 2, 32); };
  std::vector<std::vector<int32_t>> expected;
  {
    Generator gen(*target, pool, 256);
    for (int i = 0; i < 6; ++i) {
      auto r = gen.Generate(prompt(i), params(i), Keep);
      ASSERT_TRUE(r.ok());
      expected.push_back(r->tokens);
    }
  }
  for (const model::Model* draft : {small.get(), target.get()}) {
    for (int64_t batch : {int64_t{6}, int64_t{64}}) {
      EngineOptions o;
      o.n_ctx = 256;
      o.parallel = 3;
      o.max_batch_tokens = batch;
      o.speculative.enabled = true;
      o.speculative.pace_by_cost = false;
      o.speculative.max_draft_tokens = 4;
      o.draft_model = draft;
      auto engine = Engine::Create(*target, pool, o);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      for (int round = 0; round < 2; ++round) {
        std::vector<std::shared_ptr<RequestStream>> streams;
        for (int i = 0; i < 6; ++i) {
          EngineRequest r;
          r.prompt = prompt(i);
          r.sampling = params(i);
          r.speculative = i != 1;
          auto s = (*engine)->Submit(std::move(r));
          ASSERT_TRUE(s.ok());
          streams.push_back(*s);
        }
        for (int i = 0; i < 6; ++i) {
          bool done = false;
          const std::vector<int32_t> tokens =
              testing::StreamTokens(*streams[i], &done);
          EXPECT_TRUE(done);
          EXPECT_EQ(tokens, expected[i])
              << "request " << i << " batch " << batch << " round " << round
              << (draft == target.get() ? " self-draft" : " small draft");
        }
      }
      const EngineStats st = (*engine)->Stats();
      EXPECT_GT(st.spec_drafts, 0u);
      EXPECT_LE(st.spec_accepted_tokens, st.spec_draft_tokens);
      EXPECT_LE(st.spec_drafts, st.spec_draft_tokens);
      if (draft == target.get()) {
        EXPECT_GT(st.spec_accepted_tokens, 0u);
      }
    }
  }
}

// A trained pair: the Q8_0 TinyStories model drafting for its F16 self
// (same vocabulary); and stories260K, whose vocabulary differs, refused.
TEST(DraftModelTest, TrainedModelsAgreeOrAreRefused) {
  const std::string dir = std::string(RL_SHARED_DIR) + "/testdata/models/";
  const std::string f16 = dir + "TinyStories-656K.f16.gguf";
  const std::string q8 = dir + "TinyStories-656K-Q8_0.gguf";
  const std::string other = dir + "stories260K.gguf";
  if (!std::filesystem::exists(f16) || !std::filesystem::exists(q8) ||
      !std::filesystem::exists(other))
    GTEST_SKIP() << "no trained models in " << dir;
  auto target = model::Model::Load(f16);
  auto draft = model::Model::Load(q8);
  auto stories = model::Model::Load(other);
  ASSERT_TRUE(target.ok() && draft.ok() && stories.ok());
  const Status refused = CheckDraftVocabulary(**target, **stories);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(refused.message().empty());
  ASSERT_TRUE(CheckDraftVocabulary(**target, **draft).ok());
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = (*target)->tokenizer()->Encode(
      "Once upon a time, there was a little dog named Max. Max liked to",
      /*add_special=*/true, /*parse_special=*/false);
  for (bool greedy : {true, false}) {
    const model::SamplingParams p = Params(greedy, 64);
    Generator g1(**target, pool, 512);
    auto base = g1.Generate(prompt, p, Keep);
    ASSERT_TRUE(base.ok());
    Generator g2(**target, pool, 512, 256, model::KvType::kF16, draft->get());
    SpeculativeOptions so;
    so.enabled = true;
    so.pace_by_cost = false;  // counts below must not depend on timing
    auto fast = g2.Generate(prompt, p, Keep, so);
    ASSERT_TRUE(fast.ok());
    EXPECT_EQ(fast->tokens, base->tokens) << "greedy=" << greedy;
    // A quantised copy agrees with its original on most tokens, sampled
    // ones too (its draws are the target's).
    EXPECT_GT(fast->speculative.acceptance_rate(), 0.5) << "greedy=" << greedy;
    EXPECT_GT(fast->speculative.tokens_per_pass(), 1.5) << "greedy=" << greedy;
  }
}

// Pearson's two-sample chi-square statistic of two histograms, bins with
// fewer than 10 pooled counts merged into one; *df gets its degrees of
// freedom.
double ChiSquareTwoSample(const std::map<int32_t, int>& a,
                          const std::map<int32_t, int>& b, int* df) {
  double na = 0, nb = 0;
  std::map<int32_t, std::pair<double, double>> bins;
  for (const auto& [t, n] : a) {
    bins[t].first += n;
    na += n;
  }
  for (const auto& [t, n] : b) {
    bins[t].second += n;
    nb += n;
  }
  std::vector<std::pair<double, double>> kept;
  std::pair<double, double> rest{0, 0};
  for (const auto& [t, c] : bins) {
    if (c.first + c.second >= 10) {
      kept.push_back(c);
    } else {
      rest.first += c.first;
      rest.second += c.second;
    }
  }
  if (rest.first + rest.second > 0) kept.push_back(rest);
  double stat = 0;
  const double ka = std::sqrt(nb / na), kb = std::sqrt(na / nb);
  for (const auto& [x, y] : kept) {
    const double d = ka * x - kb * y;
    stat += d * d / (x + y);
  }
  *df = static_cast<int>(kept.size()) - 1;
  return stat;
}

// The chi-square quantile for probability 1 - 0.001 (Wilson-Hilferty; within
// 1 % of the exact value for df >= 3).
double ChiSquareCritical(int df) {
  const double k = df, z = 3.0902;
  const double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * c * c * c;
}

// The tokens of sampled generation with a draft model have the distribution
// of plain sampling (different seeds, so this is a statistical check and not
// the seed-for-seed equality above): a two-sample chi-square at each drafted
// position stays under its 0.999 quantile, while the same test tells the
// draft model's own samples from the target's (the drafts alone would have
// been caught).
TEST(DraftSamplingTest, SampledTokensHavePlainSamplingsDistribution) {
  auto target = MakeModel("tiny", kernels::DType::kF16, 5);
  // Its Q4_0 copy: the two agree on about half the sampled tokens, and
  // their distributions still differ clearly (below).
  auto draft = MakeModel("tiny", kernels::DType::kQ4_0, 5);
  ASSERT_TRUE(target && draft);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 63, 7, 21, 17, 42};
  constexpr int kTokens = 4;
  constexpr int kRuns = 700;
  auto params = [](uint64_t seed) {
    model::SamplingParams p = Params(false, kTokens);
    p.temperature = 1.5f;  // spreads the draws over the top_k
    p.top_k = 6;
    p.repetition_penalty = 1.3f;
    p.seed = seed;
    return p;
  };
  // [position] -> token -> count.
  using Histograms = std::vector<std::map<int32_t, int>>;
  Histograms plain(kTokens), fast(kTokens), drafts_own(kTokens);
  Generator g_plain(*target, pool, 64, 16);
  Generator g_own(*draft, pool, 64, 16);
  auto g_fast = Generator::Create(*target, pool, 64, 16, model::KvType::kF16,
                                  draft.get());
  ASSERT_TRUE(g_fast.ok());
  SpeculativeOptions so;
  so.enabled = true;
  so.pace_by_cost = false;
  so.max_draft_tokens = 3;
  int64_t drafted = 0, accepted = 0;
  for (int i = 0; i < kRuns; ++i) {
    auto a = g_plain.Generate(prompt, params(1 + i), Keep);
    auto b = (*g_fast)->Generate(prompt, params(100000 + i), Keep, so);
    auto c = g_own.Generate(prompt, params(200000 + i), Keep);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    ASSERT_EQ(a->tokens.size(), size_t{kTokens});
    ASSERT_EQ(b->tokens.size(), size_t{kTokens});
    ASSERT_EQ(c->tokens.size(), size_t{kTokens});
    for (int pos = 0; pos < kTokens; ++pos) {
      ++plain[pos][a->tokens[pos]];
      ++fast[pos][b->tokens[pos]];
      ++drafts_own[pos][c->tokens[pos]];
    }
    drafted += b->speculative.drafted_tokens;
    accepted += b->speculative.accepted_tokens;
  }
  // Positions 1.. come from verification passes (position 0 from the
  // prompt's pass); drafts were made and some of them kept.
  EXPECT_GT(drafted, kRuns);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  for (int pos = 1; pos < kTokens; ++pos) {
    int df = 0;
    const double same = ChiSquareTwoSample(plain[pos], fast[pos], &df);
    ASSERT_GE(df, 3) << "position " << pos;
    EXPECT_LT(same, ChiSquareCritical(df)) << "position " << pos;
    const double other = ChiSquareTwoSample(plain[pos], drafts_own[pos], &df);
    ASSERT_GE(df, 3) << "position " << pos;
    EXPECT_GT(other, ChiSquareCritical(df)) << "position " << pos;
  }
}

}  // namespace
}  // namespace redline::engine

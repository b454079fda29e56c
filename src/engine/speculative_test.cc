// Prompt-lookup speculative decoding: the drafter and its controller, and
// the property that matters: the tokens are those plain decoding gives, for
// greedy and seeded sampling, every small preset and weight type and every
// kernel ISA this CPU runs, with prompts that repeat (drafts accepted) and
// prompts that do not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/sanitizers.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_test_model.h"
#include "engine/generator.h"
#include "engine/prompt_lookup.h"
#include "kernels/dtype.h"
#include "kernels/isa.h"
#include "model/arch/model.h"
#include "model/arch/synthetic.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {
namespace {

TEST(PromptLookupTest, DraftsWhatFollowedTheLatestMatch) {
  // ... 5 6 7 [8 9] ... 5 6 7 -> 8 9 (longest n-gram "5 6 7").
  const std::vector<int32_t> h = {1, 5, 6, 7, 8, 9, 2, 3, 5, 6, 7};
  EXPECT_EQ(DraftFromHistory(h, 2, 3, 1), (std::vector<int32_t>{8, 9}));
  // Past the history's end the draft continues with itself.
  EXPECT_EQ(DraftFromHistory(h, 9, 3, 1),
            (std::vector<int32_t>{8, 9, 2, 3, 5, 6, 7, 8, 9}));
  // The latest of two occurrences wins.
  const std::vector<int32_t> two = {4, 1, 4, 2, 4};
  EXPECT_EQ(DraftFromHistory(two, 1, 1, 1), (std::vector<int32_t>{2}));
  // No match, or nothing to draft.
  EXPECT_TRUE(DraftFromHistory(std::vector<int32_t>{1, 2, 3}, 4, 3, 1).empty());
  EXPECT_TRUE(DraftFromHistory(h, 0, 3, 1).empty());
  EXPECT_TRUE(DraftFromHistory(std::vector<int32_t>{7}, 4, 3, 1).empty());
  // A repeating pattern overlapping its own tail drafts whole periods.
  EXPECT_EQ(DraftFromHistory(std::vector<int32_t>{3, 3, 3}, 4, 2, 1),
            (std::vector<int32_t>{3, 3, 3, 3}));
  EXPECT_EQ(DraftFromHistory(std::vector<int32_t>{1, 2, 1, 2}, 5, 2, 1),
            (std::vector<int32_t>{1, 2, 1, 2, 1}));
}

TEST(PromptLookupTest, DraftFromHistoryEqualsTheReferenceScan) {
  std::mt19937 rng(7);
  int drafted = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    // Few distinct tokens, so that n-grams recur at many distances.
    const int vocab = 2 + static_cast<int>(rng() % 5);
    std::vector<int32_t> h(rng() % 48);
    for (int32_t& t : h) t = static_cast<int32_t>(rng() % vocab);
    const int max_tokens = static_cast<int>(rng() % 11);
    const int ngram_max = 1 + static_cast<int>(rng() % 4);
    const int ngram_min = static_cast<int>(rng() % (ngram_max + 1));
    const std::vector<int32_t> got =
        DraftFromHistory(h, max_tokens, ngram_max, ngram_min);
    ASSERT_EQ(got, ref::DraftFromHistory(h, max_tokens, ngram_max, ngram_min))
        << "trial " << trial << ", " << h.size() << " tokens, max_tokens "
        << max_tokens << ", n " << ngram_min << ".." << ngram_max;
    drafted += got.empty() ? 0 : 1;
  }
  EXPECT_GT(drafted, 1000);  // the comparison saw drafts, not just misses
  // Matches only further back than kMaxLookback are not found.
  std::vector<int32_t> h = {5, 6, 7, 8};
  h.resize(kMaxLookback + 4, 1);
  for (size_t i = 4; i < h.size(); ++i) h[i] = static_cast<int32_t>(10 + i);
  h.insert(h.end(), {5, 6, 7});
  EXPECT_TRUE(DraftFromHistory(h, 4, 3, 2).empty());
  EXPECT_TRUE(ref::DraftFromHistory(h, 4, 3, 2).empty());
  h.erase(h.begin() + 4, h.begin() + 11);  // 5 6 7 8 now within reach
  EXPECT_EQ(DraftFromHistory(h, 1, 3, 2), (std::vector<int32_t>{8}));
  EXPECT_EQ(ref::DraftFromHistory(h, 1, 3, 2), (std::vector<int32_t>{8}));
}

TEST(PromptLookupTest, ControllerStopsAtARejectedDraftAndResumesOnAShadowHit) {
  DraftController c(8);
  EXPECT_EQ(c.NextLength(), 8);
  EXPECT_FALSE(c.wants_shadow());
  c.Record(8, 0);  // nothing accepted: plain decoding, shadowed
  for (int i = 0; i < 4 * DraftController::kProbeInterval; ++i) {
    EXPECT_EQ(c.NextLength(), 0);
    EXPECT_TRUE(c.wants_shadow());
    c.RecordShadow(false);
  }
  c.Record(0, 0);  // an empty draft says nothing
  EXPECT_EQ(c.NextLength(), 0);
  c.RecordShadow(true);  // resumes at the rejected length
  EXPECT_EQ(c.NextLength(), 8);
  EXPECT_FALSE(c.wants_shadow());
  c.RecordShadow(false);  // only while off
  EXPECT_EQ(c.NextLength(), 8);
  c.Record(8, 8);
  EXPECT_EQ(c.NextLength(), 8);  // capped at k
  c.Record(8, 1);                // partly accepted: just past the accepted part
  EXPECT_EQ(c.NextLength(), 2);
  c.Record(2, 2);
  EXPECT_EQ(c.NextLength(), 4);
  c.Record(4, 0);
  EXPECT_EQ(c.NextLength(), 0);
  c.RecordShadow(true);
  EXPECT_EQ(c.NextLength(), 4);
  c.Record(4, 4);
  EXPECT_EQ(c.NextLength(), 8);
}

TEST(PromptLookupTest, ControllerWithoutShadowHalvesAndProbes) {
  DraftController c(8, /*shadow=*/false);
  EXPECT_EQ(c.NextLength(), 8);
  c.Record(8, 0);
  EXPECT_EQ(c.NextLength(), 4);
  c.Record(4, 0);
  c.Record(2, 0);
  c.Record(1, 0);
  EXPECT_FALSE(c.wants_shadow());
  int probes = 0;
  for (int i = 0; i < 3 * DraftController::kProbeInterval; ++i)
    probes += c.NextLength() > 0;
  EXPECT_EQ(probes, 3);  // off, with a probe every interval
  c.Record(2, 2);        // a probe that was fully accepted
  EXPECT_EQ(c.NextLength(), 2);
  c.Record(2, 2);
  EXPECT_EQ(c.NextLength(), 4);
  c.Record(4, 4);
  EXPECT_EQ(c.NextLength(), 8);
  c.Record(8, 3);
  EXPECT_EQ(c.NextLength(), 4);
}

TEST(PromptLookupTest, ControllerDraftsWhatPaysForItsPass) {
  // The same acceptance history (half of the first draft's tokens kept,
  // then the length cut to 2), three pass costs.
  auto after = [](double plain_s, double wide9_s) {
    DraftController c(8);
    EXPECT_LT(c.extra_token_cost(), 0);  // nothing timed yet
    EXPECT_EQ(c.acceptance(), 1.0);
    c.RecordPass(1, plain_s);
    c.RecordPass(9, wide9_s);
    c.Record(8, 1);
    EXPECT_DOUBLE_EQ(c.acceptance(), 0.5);
    return c;
  };
  // Memory-bound: a 9-token pass 1.24x a step; the whole allowed length.
  DraftController cheap = after(0.010, 0.0124);
  EXPECT_NEAR(cheap.extra_token_cost(), 0.03, 1e-9);
  EXPECT_EQ(cheap.NextLength(), 2);
  // Weights in cache: 3x; one token.
  DraftController dear = after(0.001, 0.003);
  EXPECT_NEAR(dear.extra_token_cost(), 0.25, 1e-9);
  EXPECT_EQ(dear.NextLength(), 1);
  EXPECT_FALSE(dear.wants_shadow());
  // A pass as dear as its tokens decoded plainly never pays below full
  // acceptance: plain decoding, shadowed, however well shadows hit.
  DraftController never = after(0.001, 0.009);
  EXPECT_EQ(never.NextLength(), 0);
  EXPECT_TRUE(never.wants_shadow());
  for (int i = 0; i < 20; ++i) never.RecordShadow(true);
  EXPECT_GT(never.acceptance(), 0.95);
  EXPECT_EQ(never.NextLength(), 0);
  // Once wide passes are measured cheap, drafting comes back.
  for (int i = 0; i < 40; ++i) never.RecordPass(9, 0.0011);
  EXPECT_EQ(never.NextLength(), 2);
  // Acceptance follows the recent evidence: shadow misses drive it down.
  for (int i = 0; i < 20; ++i) never.RecordShadow(false);
  EXPECT_LT(never.acceptance(), 0.05);
  EXPECT_EQ(never.NextLength(), 0);
  // Without shadows (a draft model) a probe still comes every interval.
  DraftController probed(8, /*shadow=*/false);
  probed.RecordPass(1, 0.001);
  probed.RecordPass(9, 0.009);
  probed.Record(8, 1);
  int probes = 0;
  for (int i = 0; i < 2 * DraftController::kProbeInterval; ++i)
    probes += probed.NextLength() > 0;
  EXPECT_EQ(probes, 2);
}

// Drafting policy on constructed outputs, no model: an answer that copies a
// 200-token passage of its prompt with a few tokens changed (the
// "rewrite this with one change" case), and an answer unrelated to the
// prompt. Each step verifies the controller's draft against the known
// answer, as the engine does. Copying must take few passes; an unrelated
// answer must cost few drafted tokens (each widens a pass for nothing).
struct PolicyRun {
  double tokens_per_pass;
  double drafted_per_token;
};

PolicyRun RunPolicy(std::vector<int32_t> history,
                    const std::vector<int32_t>& answer) {
  const SpeculativeOptions spec;
  DraftController control(spec.max_draft_tokens);
  size_t pos = 0;
  int64_t passes = 0, drafted = 0;
  while (pos < answer.size()) {
    const int k = control.NextLength();
    const std::vector<int32_t> draft =
        k > 0 ? DraftFromHistory(history, k, spec.ngram_max, spec.ngram_min)
              : std::vector<int32_t>{};
    const std::vector<int32_t> shadow =
        k == 0 && control.wants_shadow()
            ? DraftFromHistory(history, 1, spec.ngram_max, spec.ngram_min)
            : std::vector<int32_t>{};
    if (!shadow.empty()) control.RecordShadow(shadow[0] == answer[pos]);
    size_t accepted = 0;
    while (accepted < draft.size() && pos + accepted < answer.size() &&
           draft[accepted] == answer[pos + accepted]) {
      ++accepted;
    }
    const size_t emitted = std::min(accepted + 1, answer.size() - pos);
    history.insert(history.end(), answer.begin() + pos,
                   answer.begin() + pos + emitted);
    pos += emitted;
    ++passes;
    drafted += static_cast<int64_t>(draft.size());
    if (!draft.empty())
      control.Record(static_cast<int>(draft.size()),
                     static_cast<int>(accepted));
  }
  return {static_cast<double>(answer.size()) / passes,
          static_cast<double>(drafted) / answer.size()};
}

TEST(PromptLookupTest, CopiedAnswersTakeFewPassesAndUnrelatedOnesFewDrafts) {
  // Ids from a small vocabulary, so short n-grams recur as in text.
  uint32_t state = 12345;
  auto next_id = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int32_t>(10 + (state >> 8) % 300);
  };
  std::vector<int32_t> passage(200), other(200);
  for (int32_t& t : passage) t = next_id();
  for (int32_t& t : other) t = next_id();
  std::vector<int32_t> prompt = {1, 2, 3, 4};  // "Rewrite this ...:"
  prompt.insert(prompt.end(), passage.begin(), passage.end());
  prompt.push_back(5);

  EXPECT_GE(RunPolicy(prompt, passage).tokens_per_pass, 6.0);
  std::vector<int32_t> one_change = passage;
  one_change[100] = 7;
  EXPECT_GE(RunPolicy(prompt, one_change).tokens_per_pass, 5.0);
  std::vector<int32_t> edits = passage;
  for (size_t i = 20; i < edits.size(); i += 30) edits[i] = 8;
  EXPECT_GE(RunPolicy(prompt, edits).tokens_per_pass, 3.5);

  const PolicyRun unrelated = RunPolicy(prompt, other);
  EXPECT_LT(unrelated.tokens_per_pass, 1.2) << unrelated.tokens_per_pass;
  // At most a tenth of a drafted token per generated token: with a draft
  // position costing a few percent of a memory-bound pass, well under a
  // percent overall.
  EXPECT_LE(unrelated.drafted_per_token, 0.1) << unrelated.drafted_per_token;
}

// `spec`'s weights in `type`, written to a temporary file and loaded.
Result<std::unique_ptr<model::Model>> LoadSynthetic(
    const model::SyntheticSpec& spec, kernels::DType type, uint64_t seed,
    ThreadPool& pool) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("redline_spec_model_" + std::to_string(int(type)) +
                             "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  RL_RETURN_IF_ERROR(model::WriteSyntheticModel(spec, type, seed, path, pool));
  auto m = model::Model::Load(path);
  std::filesystem::remove(path);  // the mapping stays valid
  return m;
}

// The tiny preset as a cycle model (make-model --cycle) of seed 11, in F32:
// greedy decoding walks `next` from any token.
struct CycleModel {
  std::vector<int32_t> next;  // [vocab]: each piece's successor (-1: none)
  std::unique_ptr<model::Model> model;
};
CycleModel LoadCycleModel(ThreadPool& pool) {
  auto spec = model::SyntheticPreset("tiny");
  EXPECT_TRUE(spec.ok());
  spec->successor_cycle = true;
  constexpr uint64_t kSeed = 11;
  CycleModel c;
  c.next = model::SyntheticSuccessors(*spec, kSeed);
  auto m = LoadSynthetic(*spec, kernels::DType::kF32, kSeed, pool);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (m.ok()) c.model = std::move(m).value();
  return c;
}

struct Case {
  std::string preset;
  kernels::DType type;
  kernels::Isa isa;
};

// Dispatches to `isa` for the scope (the weights' layout is chosen at
// load, so a model is loaded inside it), then back to the ISA before.
class IsaScope {
 public:
  explicit IsaScope(kernels::Isa isa)
      : saved_(kernels::ActiveIsa()), ok_(kernels::SetActiveIsa(isa)) {}
  ~IsaScope() { kernels::SetActiveIsa(saved_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
  bool ok() const { return ok_; }

 private:
  kernels::Isa saved_;
  bool ok_;
};

// `prompt`'s answer from a fresh Generator (n_ctx 256, batches of 64), with
// speculation as `so` says (plain where it is disabled).
Result<GenerationResult> Answer(const model::Model& m, ThreadPool& pool,
                                const std::vector<int32_t>& prompt,
                                const model::SamplingParams& p,
                                const SpeculativeOptions& so) {
  Generator g(m, pool, 256, 64);
  return g.Generate(
      prompt, p, [](std::string_view, int32_t) { return true; }, so);
}

// Speculation as the tests want it by default: on, not paced by the
// measured pass cost (counts must not depend on timing).
SpeculativeOptions Speculative() {
  SpeculativeOptions so;
  so.enabled = true;
  so.pace_by_cost = false;
  return so;
}

class SpeculativeEqualsPlainTest : public ::testing::TestWithParam<Case> {};

TEST_P(SpeculativeEqualsPlainTest, TokensAreThoseOfPlainDecoding) {
  const Case& c = GetParam();
  IsaScope isa(c.isa);
  ASSERT_TRUE(isa.ok()) << kernels::IsaName(c.isa);
  ThreadPool pool(2);
  auto spec = model::SyntheticPreset(c.preset);
  ASSERT_TRUE(spec.ok());
  auto m = LoadSynthetic(*spec, c.type, 5, pool);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int32_t vocab = static_cast<int32_t>((*m)->config().vocab_size);
  // A prompt that repeats (drafts will match) and one that does not.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> rep;
  for (int r = 0; r < 4; ++r)
    for (int32_t t : {17, 42, 99, 5, 63, 7, 21}) rep.push_back(t % vocab);
  prompts.push_back(rep);
  std::vector<int32_t> plain;
  for (int i = 0; i < 20; ++i) plain.push_back((i * 37 + 11) % vocab);
  prompts.push_back(plain);
  int64_t accepted = 0;
  for (const auto& prompt : prompts) {
    for (bool greedy : {true, false}) {
      model::SamplingParams p;
      p.max_tokens = 48;
      if (greedy) {
        p.temperature = 0;
      } else {
        p.temperature = 0.9f;
        p.seed = 1234;
      }
      auto base = Answer(**m, pool, prompt, p, SpeculativeOptions{});
      ASSERT_TRUE(base.ok());
      auto fast = Answer(**m, pool, prompt, p, Speculative());
      ASSERT_TRUE(fast.ok());
      EXPECT_EQ(fast->tokens, base->tokens)
          << c.preset << " greedy=" << greedy << " isa "
          << kernels::IsaName(kernels::ActiveIsa());
      EXPECT_EQ(fast->text, base->text);
      EXPECT_EQ(fast->finish, base->finish);
      // Paced by the measured pass cost (drafts vary with timing; the
      // tokens may not).
      SpeculativeOptions paced_so = Speculative();
      paced_so.pace_by_cost = true;
      auto paced = Answer(**m, pool, prompt, p, paced_so);
      ASSERT_TRUE(paced.ok());
      EXPECT_EQ(paced->tokens, base->tokens) << c.preset << " paced";
      // Verification passes of up to 41 tokens: past every kernel's
      // small-batch tiles (MatMulTest.EveryBatchEqualsDecodeExactly).
      SpeculativeOptions wide = Speculative();
      wide.max_draft_tokens = 40;
      auto long_drafts = Answer(**m, pool, prompt, p, wide);
      ASSERT_TRUE(long_drafts.ok());
      EXPECT_EQ(long_drafts->tokens, base->tokens) << c.preset << " k=40";
      const SpeculativeStats& s = fast->speculative;
      EXPECT_LE(s.accepted_tokens, s.drafted_tokens);
      EXPECT_EQ(s.tokens_emitted,
                static_cast<int64_t>(fast->tokens.size()) - 1);
      accepted += s.accepted_tokens;
    }
  }
  // Greedy decoding of a synthetic model falls into loops that the drafter
  // predicts; a run with no acceptance at all would test nothing.
  EXPECT_GT(accepted, 0);
}

std::vector<Case> SpeculativeCases() {
  using kernels::DType;
  std::vector<Case> cases;
  for (const kernels::Isa isa : kernels::AvailableIsas()) {
    for (const DType t :
         {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
      cases.push_back({"tiny", t, isa});
    }
    for (const DType t : {DType::kQ8_0, DType::kF16})
      cases.push_back({"tiny-qwen2", t, isa});
    // A real model's shape: 30 layers, head_dim 64, three query heads per KV
    // head, 49152 pieces. Not on the scalar ISA, where it takes tens of
    // seconds (the tiny presets cover that arithmetic). Under
    // ThreadSanitizer, 30-50x slower, on the dispatched ISA only: the
    // threads' work is the same on every ISA. The larger presets' shapes
    // would take minutes.
    if (isa != kernels::Isa::kScalar &&
        (!kThreadSanitizer || isa == kernels::ActiveIsa())) {
      cases.push_back({"smollm2-135m", DType::kQ8_0, isa});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Presets, SpeculativeEqualsPlainTest,
    ::testing::ValuesIn(SpeculativeCases()), [](const auto& info) {
      std::string name = info.param.preset + "_" +
                         std::string(kernels::DTypeName(info.param.type)) +
                         "_" + std::string(kernels::IsaName(info.param.isa));
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// A cycle model (make-model --cycle) follows one cycle through its word
// pieces; quoting a passage it wrote makes an answer that echoes the prompt
// (every draft right), and a prompt in which each pair of answer tokens is
// followed by a wrong one makes every draft wrong. Both on a real forward
// pass: the tokens equal plain decoding's, the echo takes few passes, and
// the misses stop drafting.
TEST(SpeculativeTest, CycleModelEchoIsAcceptedAndMissesBackOff) {
  auto spec = model::SyntheticPreset("tiny");
  ASSERT_TRUE(spec.ok());
  spec->successor_cycle = true;
  const uint64_t seed = 11;
  const std::vector<int32_t> next = model::SyntheticSuccessors(*spec, seed);
  // One cycle through every piece: from any piece, back after all of them.
  int64_t pieces = 0;
  for (int32_t s : next) pieces += s >= 0;
  ASSERT_GT(pieces, 200);
  int32_t t = next.size() - 1;
  for (int64_t i = 0; i < pieces; ++i) {
    t = next[t];
    ASSERT_GE(t, 0);
    if (i + 1 < pieces) {
      ASSERT_NE(t, static_cast<int32_t>(next.size() - 1));
    }
  }
  EXPECT_EQ(t, static_cast<int32_t>(next.size() - 1));

  ThreadPool pool(2);
  for (kernels::DType type : {kernels::DType::kF32, kernels::DType::kQ4_0}) {
    auto m = LoadSynthetic(*spec, type, seed, pool);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const int kTokens = 64;
    model::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = kTokens;
    p.ignore_eos = true;
    auto sink = [](std::string_view, int32_t) { return true; };
    const int32_t start = 300;
    // Plain greedy decoding walks the cycle, whatever came before.
    std::vector<int32_t> walk;
    for (int32_t u = next[start]; walk.size() < 3 * kTokens; u = next[u])
      walk.push_back(u);
    Generator plain(**m, pool, 1024, 64);
    const std::vector<int32_t> prompt = {5, 9, start};
    auto base = plain.Generate(prompt, p, sink);
    ASSERT_TRUE(base.ok());
    ASSERT_EQ(base->tokens,
              std::vector<int32_t>(walk.begin(), walk.begin() + kTokens))
        << kernels::DTypeName(type);

    SpeculativeOptions so;
    so.enabled = true;
    so.pace_by_cost = false;  // counts below must not depend on timing
    // Echo: the passage, then its first token again.
    std::vector<int32_t> echo = {start};
    echo.insert(echo.end(), walk.begin(), walk.begin() + kTokens + 8);
    echo.push_back(start);
    Generator g1(**m, pool, 1024, 64);
    auto fast = g1.Generate(echo, p, sink, so);
    ASSERT_TRUE(fast.ok());
    EXPECT_EQ(fast->tokens, base->tokens);
    EXPECT_GT(fast->speculative.tokens_per_pass(), 6.0);
    EXPECT_EQ(fast->speculative.accepted_tokens,
              fast->speculative.drafted_tokens);

    // Miss: (a_i, a_i+1, wrong) for every answer position; the wrong
    // tokens are pieces from further along the cycle.
    std::vector<int32_t> answer = {start};
    answer.insert(answer.end(), walk.begin(), walk.begin() + kTokens + 8);
    std::vector<int32_t> miss;
    for (int i = 0; i + 1 < static_cast<int>(answer.size()); ++i) {
      miss.push_back(answer[i]);
      miss.push_back(answer[i + 1]);
      miss.push_back(walk[2 * kTokens + i % kTokens]);
    }
    miss.push_back(start);
    Generator g2(**m, pool, 1024, 64);
    auto missed = g2.Generate(miss, p, sink, so);
    ASSERT_TRUE(missed.ok());
    EXPECT_EQ(missed->tokens, base->tokens);
    const SpeculativeStats& s = missed->speculative;
    EXPECT_EQ(s.accepted_tokens, 0);
    EXPECT_GT(s.drafted_tokens, 0);  // drafts were made, and all rejected
    // The controller stops at the first rejected draft, and the shadow
    // drafts after it (all wrong here) cost no pass.
    EXPECT_EQ(s.drafted_tokens, so.max_draft_tokens);
    EXPECT_EQ(s.target_passes, kTokens - 1);
  }
}

// Prompts that reach the end of the context: an echo (every draft right)
// whose answer runs until the context is full, so the last drafts must be
// cut to the room left. Prompt lookup and a draft model (the target
// itself), in Generator and in the batching Engine, give plain decoding's
// tokens and end by length with the context exactly full; a prompt of
// n_ctx - 1 tokens gets one token and one of n_ctx tokens is refused.
TEST(SpeculativeTest, EchoesRunToTheEndOfTheContext) {
  ThreadPool pool(2);
  const CycleModel cycle = LoadCycleModel(pool);
  ASSERT_TRUE(cycle.model);
  const model::Model& m = *cycle.model;
  const std::vector<int32_t>& next = cycle.next;
  constexpr int64_t kCtx = 160;
  auto sink = [](std::string_view, int32_t) { return true; };
  model::SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;  // max_tokens unset: up to the end of the context
  const int32_t start = 300;
  std::vector<int32_t> walk;
  for (int32_t u = next[start]; walk.size() < kCtx; u = next[u])
    walk.push_back(u);
  for (int64_t answer : {int64_t{21}, int64_t{9}, int64_t{1}}) {
    // The passage, then its first token again: the answer repeats it.
    std::vector<int32_t> prompt = {start};
    prompt.insert(prompt.end(), walk.begin(),
                  walk.begin() + (kCtx - answer - 2));
    prompt.push_back(start);
    ASSERT_EQ(static_cast<int64_t>(prompt.size()), kCtx - answer);
    Generator plain(m, pool, kCtx, 64);
    auto base = plain.Generate(prompt, p, sink);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    ASSERT_EQ(static_cast<int64_t>(base->tokens.size()), answer);
    EXPECT_EQ(base->finish, model::FinishReason::kLength);
    SpeculativeOptions so;
    so.enabled = true;
    so.pace_by_cost = false;
    for (bool draft_model : {false, true}) {
      auto g = Generator::Create(m, pool, kCtx, 64, model::KvType::kF16,
                                 draft_model ? &m : nullptr);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      auto fast = (*g)->Generate(prompt, p, sink, so);
      ASSERT_TRUE(fast.ok()) << fast.status().ToString();
      EXPECT_EQ(fast->tokens, base->tokens)
          << "answer " << answer << " draft model " << draft_model;
      EXPECT_EQ(fast->finish, model::FinishReason::kLength);
      if (answer > 2) {
        EXPECT_GT(fast->speculative.accepted_tokens, 0) << answer;
      }
    }
    for (bool draft_model : {false, true}) {
      EngineOptions o;
      o.n_ctx = kCtx;
      o.parallel = 2;
      o.max_batch_tokens = 64;
      o.speculative.enabled = true;
      o.speculative.pace_by_cost = false;
      o.draft_model = draft_model ? &m : nullptr;
      auto engine = Engine::Create(m, pool, o);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (int i = 0; i < 2; ++i) {
        EngineRequest r;
        r.prompt = prompt;
        r.sampling = p;
        auto stream = (*engine)->Submit(std::move(r));
        ASSERT_TRUE(stream.ok()) << stream.status().ToString();
        streams.push_back(*stream);
      }
      for (const auto& stream : streams) {
        bool done = false;
        EXPECT_EQ(testing::StreamTokens(*stream, &done), base->tokens)
            << "engine, answer " << answer << " draft model " << draft_model;
        EXPECT_TRUE(done);
      }
    }
  }
  // No room for an answer: refused, with the documented message.
  std::vector<int32_t> full(walk.begin(), walk.begin() + kCtx);
  Generator g(m, pool, kCtx, 64);
  SpeculativeOptions so;
  so.enabled = true;
  auto refused = g.Generate(full, p, sink, so);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(model::IsPromptTooLong(refused.status()))
      << refused.status().ToString();
}

// A trained model's greedy answers, plain and speculative, to two prompts
// that repeat themselves: a passage written twice, and the model's own
// story after "Once upon a time" given back with that start again (which
// it continues with the story: drafts are made and accepted). The tokens
// must be plain decoding's. Returns the speculative runs' stats.
struct EchoStats {
  SpeculativeStats twice;  // the passage written twice
  SpeculativeStats echo;   // the model's own story given back
};
EchoStats CheckTrainedEcho(const std::string& path) {
  EchoStats stats;
  auto m = model::Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok() || (*m)->tokenizer() == nullptr) return stats;
  const model::Tokenizer& tok = *(*m)->tokenizer();
  ThreadPool pool(2);
  model::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 64;
  auto answer = [&](const std::vector<int32_t>& prompt, bool speculative) {
    auto r = Answer(**m, pool, prompt, p,
                    speculative ? Speculative() : SpeculativeOptions{});
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r).value() : GenerationResult{};
  };
  const std::vector<int32_t> start =
      tok.Encode("Once upon a time", /*add_special=*/true,
                 /*parse_special=*/false);
  std::vector<int32_t> echo = start;
  for (const int32_t t : answer(start, false).tokens) echo.push_back(t);
  const std::vector<int32_t> again =
      tok.Encode("Once upon a time", /*add_special=*/false,
                 /*parse_special=*/false);
  echo.insert(echo.end(), again.begin(), again.end());
  const std::vector<int32_t> twice = tok.Encode(
      "Once upon a time there was a little girl named Lily. She loved to "
      "play outside. Once upon a time there was a little girl named Lily.",
      /*add_special=*/true, /*parse_special=*/false);
  const std::vector<int32_t>* const prompts[] = {&twice, &echo};
  for (const std::vector<int32_t>* prompt : prompts) {
    const GenerationResult base = answer(*prompt, false);
    const GenerationResult fast = answer(*prompt, true);
    EXPECT_EQ(fast.tokens, base.tokens) << (prompt == &echo ? "echo" : "twice");
    EXPECT_LE(fast.speculative.accepted_tokens,
              fast.speculative.drafted_tokens);
    (prompt == &echo ? stats.echo : stats.twice) = fast.speculative;
  }
  return stats;
}

TEST(SpeculativeTest, TrainedModelEchoesAreAcceptedAndEqual) {
  const std::string dir = std::string(RL_SHARED_DIR) + "/testdata/models/";
  int checked = 0;
  for (const char* file :
       {"stories260K.gguf", "TinyStories-656K.f16.gguf",
        "TinyStories-656K-Q8_0.gguf", "TinyStories-656K.Q2_K.gguf"}) {
    const std::string path = dir + file;
    if (!std::filesystem::exists(path)) continue;
    for (const kernels::Isa isa : kernels::AvailableIsas()) {
      SCOPED_TRACE(std::string(file) + " " +
                   std::string(kernels::IsaName(isa)));
      IsaScope scope(isa);
      ASSERT_TRUE(scope.ok());
      const EchoStats s = CheckTrainedEcho(path);
      EXPECT_GT(s.echo.accepted_tokens, 0);
      EXPECT_GT(s.echo.tokens_per_pass(), 1.0);
      // stories260K also continues the passage written twice with it.
      if (std::string_view(file) == "stories260K.gguf") {
        EXPECT_GT(s.twice.accepted_tokens, 0);
        EXPECT_GT(s.twice.tokens_per_pass(), 1.0);
      }
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no trained model in " << dir;
}

}  // namespace
}  // namespace redline::engine

namespace redline::engine {
namespace {

// Speculation inside continuous batching: drafts verified next to other
// sequences' decode tokens and prompt chunks (small batches force the
// budget to cut drafts), with some requests opting out; every stream equals
// plain sequential generation, and the prefix cache afterwards holds only
// accepted tokens (a repeated request reuses them and still matches).
void CheckBatchedSpeculation(const model::Model& m, ThreadPool& pool) {
  auto prompt = [](int i) {
    std::vector<int32_t> p;
    for (int r = 0; r < 3; ++r)
      for (int t : {40 + i, 41, 42 + i, 43}) p.push_back(t);
    return p;
  };
  auto params = [](int i) {
    model::SamplingParams p;
    p.max_tokens = 40;
    p.ignore_eos = true;
    if (i % 3 == 2) {
      p.temperature = 0.8f;
      p.seed = 77 + i;
    } else {
      p.temperature = 0;
    }
    return p;
  };
  std::vector<std::vector<int32_t>> expected;
  {
    Generator gen(m, pool, 256);
    for (int i = 0; i < 6; ++i) {
      auto r = gen.Generate(prompt(i), params(i),
                            [](std::string_view, int32_t) { return true; });
      ASSERT_TRUE(r.ok());
      expected.push_back(r->tokens);
    }
  }
  // Paced by the measured pass cost only in the last run: the acceptance
  // counts checked in the others must not depend on timing.
  for (const auto& [batch, paced] :
       {std::pair{int64_t{6}, false}, std::pair{int64_t{64}, false},
        std::pair{int64_t{64}, true}}) {
    EngineOptions o;
    o.n_ctx = 256;
    o.parallel = 3;
    o.max_batch_tokens = batch;
    o.speculative.enabled = true;
    o.speculative.pace_by_cost = paced;
    Engine engine(m, pool, o);
    for (int round = 0; round < 2; ++round) {
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (int i = 0; i < 6; ++i) {
        EngineRequest r;
        r.prompt = prompt(i);
        r.sampling = params(i);
        r.speculative = i != 1;  // one opts out
        auto s = engine.Submit(std::move(r));
        ASSERT_TRUE(s.ok());
        streams.push_back(*s);
      }
      for (int i = 0; i < 6; ++i) {
        bool done = false;
        const std::vector<int32_t> tokens =
            testing::StreamTokens(*streams[i], &done);
        EXPECT_TRUE(done);
        EXPECT_EQ(tokens, expected[i])
            << "request " << i << " batch " << batch << " round " << round;
      }
    }
    if (!paced) {
      EXPECT_GT(engine.Stats().spec_accepted_tokens, 0u) << batch;
    }
    EXPECT_LE(engine.Stats().spec_accepted_tokens,
              engine.Stats().spec_draft_tokens);
  }
}

// The engine's tiny Q8_0 model (testing::TinyTestModel's preset and seed),
// loaded under each ISA this CPU runs.
TEST(SpeculativeEngineTest, BatchedSpeculationEqualsPlainDecoding) {
  ThreadPool pool(2);
  auto spec = model::SyntheticPreset("tiny");
  ASSERT_TRUE(spec.ok());
  for (const kernels::Isa isa : kernels::AvailableIsas()) {
    SCOPED_TRACE(kernels::IsaName(isa));
    IsaScope scope(isa);
    ASSERT_TRUE(scope.ok());
    auto m = LoadSynthetic(*spec, kernels::DType::kQ8_0, 11, pool);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    CheckBatchedSpeculation(**m, pool);
  }
}

// An answer that starts quoting its prompt only after a while: the first
// draft is rejected and drafting stops, and the shadow drafts made before
// each plain step (no pass of their own) turn it back on once the quote
// begins, in `redline run` and in the batching engine alike.
TEST(SpeculativeEngineTest, ShadowDraftsResumeWhenTheAnswerStartsQuoting) {
  ThreadPool pool(2);
  const CycleModel cycle = LoadCycleModel(pool);
  ASSERT_TRUE(cycle.model);
  const model::Model& m = *cycle.model;
  const std::vector<int32_t>& next = cycle.next;

  const int kTokens = 64;
  const int kLate = 24;  // answer tokens before the quote begins
  const int32_t start = 300;
  std::vector<int32_t> walk;
  for (int32_t u = next[start]; walk.size() < 3 * kTokens; u = next[u])
    walk.push_back(u);
  std::vector<int32_t> answer = {start};
  answer.insert(answer.end(), walk.begin(), walk.begin() + kTokens + 8);
  // Every pair of the first kLate answer tokens followed by a wrong token,
  // then the rest of the answer quoted.
  std::vector<int32_t> prompt;
  for (int i = 0; i < kLate; ++i) {
    prompt.push_back(answer[i]);
    prompt.push_back(answer[i + 1]);
    prompt.push_back(walk[2 * kTokens + i]);
  }
  prompt.insert(prompt.end(), answer.begin() + kLate + 1, answer.end());
  prompt.push_back(start);
  const std::vector<int32_t> expected(walk.begin(), walk.begin() + kTokens);

  model::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = kTokens;
  p.ignore_eos = true;
  SpeculativeOptions so;
  so.enabled = true;
  so.pace_by_cost = false;  // counts below must not depend on timing
  const int64_t quoted = kTokens - kLate;
  Generator gen(m, pool, 1024, 64);
  auto r = gen.Generate(
      prompt, p, [](std::string_view, int32_t) { return true; }, so);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, expected);
  const SpeculativeStats& s = r->speculative;
  // Most of the quote accepted; rejected: the first draft and at most one
  // more at the quote's start.
  EXPECT_GE(s.accepted_tokens, quoted - 2 * so.max_draft_tokens)
      << s.accepted_tokens;
  EXPECT_LE(s.drafted_tokens - s.accepted_tokens, 2 * so.max_draft_tokens)
      << s.drafted_tokens;

  EngineOptions o;
  o.n_ctx = 1024;
  o.parallel = 2;
  o.max_batch_tokens = 64;
  o.speculative.enabled = true;
  o.speculative.pace_by_cost = false;
  Engine engine(m, pool, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 2; ++i) {
    EngineRequest req;
    req.prompt = prompt;
    req.sampling = p;
    req.speculative = i == 0;  // the other decodes plainly beside it
    auto st = engine.Submit(std::move(req));
    ASSERT_TRUE(st.ok());
    streams.push_back(*st);
  }
  for (int i = 0; i < 2; ++i) {
    bool done = false;
    EXPECT_EQ(testing::StreamTokens(*streams[i], &done), expected)
        << "request " << i;
    EXPECT_TRUE(done);
  }
  const EngineStats stats = engine.Stats();
  EXPECT_GE(static_cast<int64_t>(stats.spec_accepted_tokens),
            quoted - 2 * so.max_draft_tokens)
      << stats.spec_accepted_tokens;
  EXPECT_LE(static_cast<int64_t>(stats.spec_draft_tokens -
                                 stats.spec_accepted_tokens),
            2 * so.max_draft_tokens)
      << stats.spec_draft_tokens;
}

}  // namespace
}  // namespace redline::engine

#include "engine/draft_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <utility>

#include "model/sampling/sampling_ops.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {
namespace {

int64_t SharedPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t limit = std::min(a.size(), b.size());
  size_t n = 0;
  while (n < limit && a[n] == b[n]) ++n;
  return static_cast<int64_t>(n);
}

Status SpecialMismatch(const char* what, int32_t target, int32_t draft) {
  return Status::InvalidArgument(fmt::format(
      "the draft model's {} token id is {}, the target's is {}: the "
      "vocabularies differ",
      what, draft, target));
}

}  // namespace

Status CheckDraftVocabulary(const model::Model& target,
                            const model::Model& draft) {
  const model::Tokenizer* t = target.tokenizer();
  const model::Tokenizer* d = draft.tokenizer();
  if (t == nullptr || d == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "the {} model has no usable vocabulary ({}); a draft model needs the "
        "target's vocabulary to be checked",
        t == nullptr ? "target" : "draft",
        (t == nullptr ? target : draft).tokenizer_status().ToString()));
  }
  return CheckDraftVocabulary(t, target.config().vocab_size, d,
                              draft.config().vocab_size);
}

Status CheckDraftVocabulary(const model::Tokenizer* t, int64_t tv,
                            const model::Tokenizer* d, int64_t dv) {
  if (t == nullptr || d == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "the {} model has no vocabulary; a draft model needs the target's",
        t == nullptr ? "target" : "draft"));
  }
  if (t->model() != d->model()) {
    return Status::InvalidArgument(
        fmt::format("the draft model's tokenizer is '{}', the target's is "
                    "'{}': the vocabularies differ",
                    d->model(), t->model()));
  }
  if (std::abs(tv - dv) > kMaxDraftVocabDifference) {
    return Status::InvalidArgument(fmt::format(
        "the draft model's vocabulary has {} tokens, the target's {}: more "
        "than {} apart, so they are not the same vocabulary",
        dv, tv, kMaxDraftVocabDifference));
  }
  if (t->bos_id() != d->bos_id())
    return SpecialMismatch("BOS", t->bos_id(), d->bos_id());
  if (t->eos_id() != d->eos_id())
    return SpecialMismatch("EOS", t->eos_id(), d->eos_id());
  if (t->eot_id() != d->eot_id())
    return SpecialMismatch("EOT", t->eot_id(), d->eot_id());
  if (t->unk_id() != d->unk_id())
    return SpecialMismatch("unknown", t->unk_id(), d->unk_id());
  if (t->add_bos() != d->add_bos()) {
    return Status::InvalidArgument(
        fmt::format("the draft model {} BOS to prompts and the target {}: the "
                    "vocabularies differ",
                    d->add_bos() ? "adds" : "does not add",
                    t->add_bos() ? "does" : "does not"));
  }
  const int64_t shared = std::min({tv, dv, t->vocab_size(), d->vocab_size()});
  for (int64_t i = 0; i < shared; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (t->TokenText(id) != d->TokenText(id)) {
      return Status::InvalidArgument(fmt::format(
          "the draft model's vocabulary differs from the target's at token "
          "{}: '{}' vs '{}'",
          id, d->TokenText(id), t->TokenText(id)));
    }
  }
  return Status::Ok();
}

DraftModel::DraftModel(const model::Model& draft, ThreadPool& pool,
                       int64_t target_vocab_size, int64_t max_batch_tokens)
    : model_(draft),
      transformer_(draft.config(), draft.weights(), pool,
                   std::max<int64_t>(1, max_batch_tokens)),
      target_vocab_(std::min(target_vocab_size, draft.config().vocab_size)) {}

DraftSequence DraftModel::NewSequence(int64_t n_ctx,
                                      model::KvType kv_type) const {
  return DraftSequence(transformer_.NewCache(n_ctx, kv_type));
}

Status DraftModel::Propose(std::span<Job> jobs) {
  std::vector<size_t> active;
  for (size_t j = 0; j < jobs.size(); ++j) {
    jobs[j].draft->clear();
    if (jobs[j].max_tokens > 0 && !jobs[j].history.empty()) active.push_back(j);
  }
  if (active.empty()) return Status::Ok();
  Status s;
  try {
    s = Run(jobs, active);
  } catch (const std::bad_alloc&) {
    s = Status::ResourceExhausted("out of memory in the draft model");
  }
  if (!s.ok()) {
    // A failed pass may have written some positions; what the caches hold
    // for sure is the shared prefix kept before it, which Run recorded.
    for (size_t j : active) jobs[j].draft->clear();
  }
  return s;
}

Status DraftModel::Run(std::span<Job> jobs, std::span<const size_t> active) {
  const int64_t vocab = model_.config().vocab_size;
  const model::Tokenizer* tok = model_.tokenizer();
  // 1. Catch up: each cache keeps the prefix it shares with the history
  //    (never the last token, whose logits give the first draft token) and
  //    runs the rest (or the next max_catch_up_tokens of it: no draft
  //    then); one logits row per job that drafts.
  batch_.clear();
  batch_seq_.clear();
  std::vector<size_t> going;
  for (size_t j : active) {
    Job& job = jobs[j];
    DraftSequence& seq = *job.sequence;
    const int64_t n = static_cast<int64_t>(job.history.size());
    const int64_t keep =
        std::min<int64_t>(SharedPrefix(seq.cached_, job.history), n - 1);
    seq.cached_.resize(static_cast<size_t>(keep));
    // A target token beyond a smaller draft vocabulary: the draft cannot
    // read this history, so this sequence gets no draft.
    if (std::any_of(job.history.begin() + keep, job.history.end(),
                    [&](int32_t id) { return id < 0 || id >= vocab; }))
      continue;
    int64_t end = n;
    if (job.max_catch_up_tokens > 0)
      end = std::min<int64_t>(n, keep + job.max_catch_up_tokens);
    if (end == n) going.push_back(j);
    for (int64_t p = keep; p < end; ++p) {
      batch_.push_back(
          {job.history[static_cast<size_t>(p)], p, &seq.cache_, p + 1 == n});
      batch_seq_.push_back(&seq);
    }
  }
  // Each drafting job's sampler, following its sequence's (null: argmax).
  std::vector<model::Sampler*> samplers(jobs.size(), nullptr);
  for (size_t j : going) {
    Job& job = jobs[j];
    if (job.sampler == nullptr) continue;
    DraftSequence& seq = *job.sequence;
    if (!seq.sampler_ || !seq.sampler_->Follow(*job.sampler))
      seq.sampler_ = model::Sampler::FollowerOf(*job.sampler, vocab);
    if (!seq.sampler_) continue;  // the request's params do not fit: argmax
    samplers[j] = &*seq.sampler_;
    seq.drafted_.assign(job.history.begin(), job.history.end());
  }
  while (!batch_.empty()) {
    const size_t rows = going.size();
    if (logits_.size() < rows * vocab) logits_.resize(rows * vocab);
    RL_RETURN_IF_ERROR(transformer_.Forward(
        batch_, std::span<float>(logits_.data(), rows * vocab)));
    // The pass succeeded: its tokens are cached now (a job's tokens are
    // consecutive in the batch and follow its cached ones).
    for (const model::BatchToken& t : batch_) {
      DraftSequence& seq = *batch_seq_[static_cast<size_t>(&t - batch_.data())];
      seq.cached_.push_back(t.token);
      seq.cache_.set_n_used(static_cast<int64_t>(seq.cached_.size()));
    }
    batch_.clear();
    batch_seq_.clear();
    std::vector<size_t> next;
    for (size_t r = 0; r < rows; ++r) {
      Job& job = jobs[going[r]];
      const std::span<float> row(logits_.data() + r * vocab, vocab);
      model::Sampler* sampler = samplers[going[r]];
      int32_t token = 0;
      if (sampler != nullptr) {
        // Drawn with the number the target will draw at this position.
        token = sampler->Sample(row, job.sequence->drafted_,
                                static_cast<size_t>(job.prompt_tokens));
        job.sequence->drafted_.push_back(token);
      } else {
        token = model::Argmax(row);
      }
      if (token >= target_vocab_) continue;
      job.draft->push_back(token);
      const bool eog = tok != nullptr && tok->IsEog(token);
      if (eog || static_cast<int>(job.draft->size()) >= job.max_tokens)
        continue;
      // The draft token runs next to give the one after it; the last
      // draft token never needs to.
      const int64_t pos = static_cast<int64_t>(job.sequence->cached_.size());
      batch_.push_back({token, pos, &job.sequence->cache_, true});
      batch_seq_.push_back(job.sequence);
      next.push_back(going[r]);
    }
    going = std::move(next);
  }
  return Status::Ok();
}

}  // namespace redline::engine

#include "model/tokenizer/bpe.h"

#include <algorithm>
#include <climits>

#include "model/tokenizer/byte_level.h"

namespace redline::model::tokenizer_internal {

BpeModel::BpeModel(const Vocab& vocab, bool ignore_merges)
    : vocab_(vocab), ignore_merges_(ignore_merges) {
  for (int b = 0; b < 256; ++b) {
    byte_ids_[static_cast<size_t>(b)] =
        vocab.Find(byte_level::ByteToText(static_cast<uint8_t>(b)));
  }
}

std::unique_ptr<BpeModel> BpeModel::Create(
    const Vocab& vocab, const std::vector<std::string>& merges,
    bool ignore_merges) {
  std::unique_ptr<BpeModel> model(new BpeModel(vocab, ignore_merges));
  model->merges_.Reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    // Split at the first space after the first byte, as llama.cpp does (a
    // part may itself start with a space in non-byte-level vocabularies).
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) continue;
    const std::string_view left(merge.data(), space);
    const std::string_view right(merge.data() + space + 1,
                                 merge.size() - space - 1);
    const int32_t left_id = vocab.Find(left);
    const int32_t right_id = vocab.Find(right);
    joined.assign(left);
    joined.append(right);
    const int32_t merged_id = vocab.Find(joined);
    if (left_id < 0 || right_id < 0 || merged_id < 0) continue;
    model->merges_.Insert(
        left_id, right_id,
        MergeTable::Merge{static_cast<int32_t>(rank), merged_id});
  }
  return model;
}

void BpeModel::MergeShort(std::vector<int32_t>* ids_ptr) const {
  std::vector<int32_t>& ids = *ids_ptr;
  size_t n = ids.size();
  if (n < 2) return;
  // ranks[i], merged[i]: the merge of pair (i, i+1); INT_MAX when none.
  int32_t ranks[kShortWordBytes];
  int32_t merged[kShortWordBytes];
  auto lookup = [&](size_t i) {
    const MergeTable::Merge m = merges_.Find(ids[i], ids[i + 1]);
    ranks[i] = m.rank < 0 ? INT_MAX : m.rank;
    merged[i] = m.merged_id;
  };
  for (size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT_MAX) break;
    ids[best] = merged[best];
    // Remove symbol best+1 and pair `best` (now consumed).
    for (size_t i = best + 1; i + 1 < n; ++i) ids[i] = ids[i + 1];
    for (size_t i = best; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) lookup(best - 1);
    if (best + 1 < n) lookup(best);
  }
  ids.resize(n);
}

void BpeModel::MergeLong(std::vector<int32_t>* ids_ptr) const {
  std::vector<int32_t>& ids = *ids_ptr;
  const auto n = static_cast<int32_t>(ids.size());
  struct Candidate {
    int32_t rank;
    int32_t left;  // symbol index; ties merge leftmost first
    int32_t left_id;
    int32_t right_id;
    int32_t merged_id;
  };
  struct Later {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
    }
  };
  thread_local std::vector<int32_t> next, prev;
  thread_local std::vector<Candidate> heap;  // min-heap under Later
  next.resize(static_cast<size_t>(n));
  prev.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
    prev[static_cast<size_t>(i)] = i - 1;
  }
  heap.clear();
  auto push = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int32_t lid = ids[static_cast<size_t>(left)];
    const int32_t rid = ids[static_cast<size_t>(right)];
    const MergeTable::Merge m = merges_.Find(lid, rid);
    if (m.rank < 0) return;
    heap.push_back(Candidate{m.rank, left, lid, rid, m.merged_id});
    std::push_heap(heap.begin(), heap.end(), Later{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  constexpr int32_t kDead = INT_MIN;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Later{});
    const Candidate c = heap.back();
    heap.pop_back();
    const auto left = static_cast<size_t>(c.left);
    const int32_t right = next[left];
    // Stale if either side changed since the candidate was queued (a
    // symbol's text only grows, so equal ids mean an unchanged symbol).
    if (ids[left] != c.left_id || right < 0 ||
        ids[static_cast<size_t>(right)] != c.right_id) {
      continue;
    }
    ids[left] = c.merged_id;
    ids[static_cast<size_t>(right)] = kDead;
    const int32_t after = next[static_cast<size_t>(right)];
    next[left] = after;
    if (after >= 0) prev[static_cast<size_t>(after)] = c.left;
    push(prev[left]);
    push(c.left);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)])
    ids[out++] = ids[static_cast<size_t>(i)];
  ids.resize(out);
}

void BpeModel::EncodeUncached(std::string_view word,
                              std::vector<int32_t>* out) const {
  thread_local std::vector<int32_t> ids;
  if (ignore_merges_) {
    thread_local std::string mapped;
    mapped.clear();
    byte_level::Encode(word, &mapped);
    const int32_t id = vocab_.Find(mapped);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  ids.resize(word.size());
  for (size_t i = 0; i < word.size(); ++i)
    ids[i] = byte_ids_[static_cast<uint8_t>(word[i])];
  if (ids.size() <= kShortWordBytes) {
    MergeShort(&ids);
  } else {
    MergeLong(&ids);
  }
  // A byte whose character is not in the vocabulary is dropped, as in
  // llama.cpp (GGUF "unknown" ids of byte-level vocabularies are often EOS).
  for (int32_t id : ids) {
    if (id >= 0) out->push_back(id);
  }
}

void BpeModel::EncodeWord(std::string_view word,
                          std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (word.size() > WordCache::kMaxWordBytes) {
    EncodeUncached(word, out);
    return;
  }
  if (cache_.Lookup(word, out)) return;
  const size_t before = out->size();
  EncodeUncached(word, out);
  cache_.Insert(word, out->data() + before, out->size() - before);
}

}  // namespace redline::model::tokenizer_internal

#include "model/tokenizer/spm.h"

#include <algorithm>
#include <cstdio>

#include "base/utf8.h"

namespace redline::model::tokenizer_internal {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁

}  // namespace

SpmModel::SpmModel(const Vocab& vocab, int32_t unk_id)
    : vocab_(vocab), unk_id_(unk_id) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = vocab.Find(hex);
    if (id < 0) {
      const char raw = static_cast<char>(b);
      id = vocab.Find(std::string_view(&raw, 1));
    }
    byte_ids_[static_cast<size_t>(b)] = id;
  }
  // Words can be encoded independently unless some token has a "▁" after
  // its leading run of "▁".
  split_words_ = true;
  for (const std::string& text : vocab.texts()) {
    std::string_view rest = text;
    while (rest.substr(0, kSpace.size()) == kSpace)
      rest.remove_prefix(kSpace.size());
    if (rest.find(kSpace) != std::string_view::npos) {
      split_words_ = false;
      break;
    }
  }
}

namespace {

struct Symbol {
  uint32_t start;
  uint32_t length;  // 0: merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // combined length when queued; detects stale entries
};

// Max-heap order: higher score first, then the leftmost pair.
struct Lower {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void SpmModel::Encode(std::string_view text, std::vector<int32_t>* out) const {
  if (!split_words_) {
    EncodePiece(text, out);
    return;
  }
  // Words: a run of "▁" and everything up to the next run.
  size_t start = 0;
  while (start < text.size()) {
    size_t end = start;
    while (text.compare(end, kSpace.size(), kSpace) == 0) end += kSpace.size();
    end = text.find(kSpace, end);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (word.size() > WordCache::kMaxWordBytes) {
      EncodePiece(word, out);
    } else if (!cache_.Lookup(word, out)) {
      const size_t before = out->size();
      EncodePiece(word, out);
      cache_.Insert(word, out->data() + before, out->size() - before);
    }
    start = end;
  }
}

void SpmModel::EncodePiece(std::string_view text,
                           std::vector<int32_t>* out) const {
  if (text.empty()) return;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Bigram> heap;
  symbols.clear();
  heap.clear();
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::CharLength(text, pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{static_cast<uint32_t>(pos),
                             static_cast<uint32_t>(len), index - 1,
                             pos + len < text.size() ? index + 1 : -1});
    pos += len;
  }

  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const std::string_view joined = text.substr(l.start, l.length + r.length);
    const int32_t id = vocab_.Find(joined);
    if (id < 0) return;
    heap.push_back(Bigram{vocab_.score(id), left, right, l.length + r.length});
    std::push_heap(heap.begin(), heap.end(), Lower{});
  };

  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Lower{});
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = symbols[static_cast<size_t>(b.left)];
    Symbol& r = symbols[static_cast<size_t>(b.right)];
    if (l.length == 0 || r.length == 0 || l.length + r.length != b.length)
      continue;
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.start, s.length);
    const int32_t id = vocab_.Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // A lone character that is not a token: its bytes, or one unknown token
    // if the vocabulary cannot spell them (no byte fallback).
    const bool all_bytes = std::all_of(piece.begin(), piece.end(), [&](char c) {
      return byte_ids_[static_cast<uint8_t>(c)] >= 0;
    });
    if (all_bytes) {
      for (char c : piece) out->push_back(byte_ids_[static_cast<uint8_t>(c)]);
    } else if (unk_id_ >= 0) {
      out->push_back(unk_id_);
    }
  }
}

}  // namespace redline::model::tokenizer_internal

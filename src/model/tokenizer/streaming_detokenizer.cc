#include "base/utf8.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::model {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer,
                                           bool skip_special, bool continuation)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      continuation_(continuation),
      at_start_(!continuation) {}

std::string StreamingDetokenizer::Push(int32_t id) {
  tokenizer_.AppendPiece(id, skip_special_, &at_start_, &pending_);
  const size_t complete = utf8::CompletePrefixLength(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  at_start_ = !continuation_;
  return out;
}

}  // namespace redline::model
